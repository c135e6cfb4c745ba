//! Permission presets: what each sets, their names, and their announcement in the session log in
//! the reference's shapes (`apps-approval-composer.jsonl` lines 3-5), written once.

use std::sync::Arc;

use dsh_core::Json;
use dsh_guard::{ApprovalPolicy, AuditSession};
use dsh_session::Session;
use dsh_tool_bash::{Preset, SandboxMode};
use dsh_tool_bash::{RecordedPreset, announce_preset};
use serde_json::{Value, json};

#[test]
fn each_preset_sets_a_mode_and_an_approval_policy_together() {
    let table: Vec<(Preset, &str, SandboxMode, ApprovalPolicy)> = Preset::ALL
        .into_iter()
        .map(|p| (p, p.as_str(), p.sandbox_mode(), p.approval()))
        .collect();
    assert_eq!(
        table,
        vec![
            (
                Preset::ReadOnly,
                "read-only",
                SandboxMode::ReadOnly,
                ApprovalPolicy::Ask
            ),
            (
                Preset::WorkspaceWrite,
                "workspace-write",
                SandboxMode::WorkspaceWrite,
                ApprovalPolicy::Ask
            ),
            (
                Preset::DangerFullAccess,
                "danger-full-access",
                SandboxMode::DangerFullAccess,
                ApprovalPolicy::Never
            ),
        ]
    );
    assert_eq!(Preset::default(), Preset::WorkspaceWrite);
}

#[test]
fn names_parse_and_unknown_names_are_refused_with_the_vocabulary() {
    for p in Preset::ALL {
        assert_eq!(p.as_str().parse::<Preset>().unwrap(), p);
    }
    let e = "full".parse::<Preset>().unwrap_err().to_string();
    assert_eq!(
        e,
        "permission preset must be one of \"read-only\", \"workspace-write\" or \"danger-full-access\", not \"full\""
    );
}

fn events(session: &Session) -> Vec<Value> {
    session
        .events()
        .iter()
        .map(|(_, e)| json!({"type": e.event_type(), "data": e.data().value()}))
        .collect()
}

#[tokio::test]
async fn announcing_a_preset_writes_the_reference_events_once() {
    let session = Session::in_memory("s1");
    let audit = AuditSession::new(Arc::new(dsh_scheduler::SessionAudit(session.clone())));
    let preset = Preset::ReadOnly;
    let n = announce_preset(
        &audit,
        &RecordedPreset::default(),
        Some(preset),
        preset.sandbox_mode(),
        Some(preset.approval()),
    )
    .await
    .unwrap();
    assert_eq!(n, 3);
    // Exactly the reference's lines.
    assert_eq!(
        events(&session),
        vec![
            json!({"type":"permission/preset","data":{"preset":"read-only"}}),
            json!({"type":"sandbox/mode","data":{"mode":"read-only"}}),
            json!({"type":"approval/policy","data":{"policy":"ask"}}),
        ]
    );
    assert_eq!(audit.override_policy(), Some(ApprovalPolicy::Ask));
    // Resuming with the same preset writes nothing more.
    let snapshot = session.events();
    let recorded =
        RecordedPreset::from_events(snapshot.iter().map(|(_, e)| (e.event_type(), e.data())));
    assert_eq!(
        recorded,
        RecordedPreset {
            preset: Some(Preset::ReadOnly),
            mode: Some(SandboxMode::ReadOnly)
        }
    );
    let n = announce_preset(
        &audit,
        &recorded,
        Some(preset),
        preset.sandbox_mode(),
        Some(preset.approval()),
    )
    .await
    .unwrap();
    assert_eq!(n, 0);
    // A switch writes what changed.
    let p = Preset::DangerFullAccess;
    let n = announce_preset(
        &audit,
        &recorded,
        Some(p),
        p.sandbox_mode(),
        Some(p.approval()),
    )
    .await
    .unwrap();
    assert_eq!(n, 3);
    assert_eq!(events(&session).len(), 6);
    assert_eq!(audit.override_policy(), Some(ApprovalPolicy::Never));
}

#[test]
fn the_last_valid_record_wins() {
    let data = |v: Value| Json::new(v).unwrap();
    let evs = [
        ("permission/preset", data(json!({"preset": "read-only"}))),
        ("sandbox/mode", data(json!({"mode": "read-only"}))),
        ("permission/preset", data(json!({"preset": "bogus"}))),
        ("sandbox/mode", data(json!({"mode": "danger-full-access"}))),
        ("sandbox/mode", data(json!({"mode": 7}))),
        ("other", data(json!({"mode": "workspace-write"}))),
    ];
    let r = RecordedPreset::from_events(evs.iter().map(|(t, d)| (*t, d)));
    assert_eq!(r.preset, Some(Preset::ReadOnly));
    assert_eq!(r.mode, Some(SandboxMode::DangerFullAccess));
}
