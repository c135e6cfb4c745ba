//! The pre-execute sandbox policy: the session mode by default, narrowing for free, widening
//! only through a fresh approval (APR-01's fail-closed degrade without an approver), a later
//! listener's denial kept, and the reference's blocked-then-escalated flow.

use async_trait::async_trait;
use dsh_core::{Failure, PreNext, PreToolDecision, ToolExecution, ToolRegistry};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::Runtime;
use dsh_tool_bash::{SandboxMode, SandboxSettings, mount};
use serde_json::json;

use super::support::*;

fn read_only() -> SandboxSettings {
    SandboxSettings {
        mode: SandboxMode::ReadOnly,
        ..SandboxSettings::default()
    }
}

fn write_notes(extra: serde_json::Value) -> serde_json::Value {
    let mut args = json!({"command": "echo hi > notes.txt", "description": "Write notes"});
    if let (Some(a), Some(e)) = (args.as_object_mut(), extra.as_object()) {
        a.extend(e.clone());
    }
    args
}

#[tokio::test]
async fn a_blocked_command_retried_with_escalation_runs_after_a_fresh_approval() {
    let f = fixture_with(read_only(), |_| {});
    f.approver.grant(true);
    // Blocked, with the hint, and nobody asked.
    let r = f.call(write_notes(json!({}))).await;
    let t = text(&r);
    assert!(
        t.contains("[sandbox: file access denied under read-only mode]"),
        "{t}"
    );
    assert!(t.contains("escalation available"), "{t}");
    assert!(f.approver.asked().is_empty());
    assert!(!f.workspace().join("notes.txt").exists());
    // Retried with sandbox_permissions: asked with the reference's reason, then run wider.
    let r = f
        .call(write_notes(json!({
            "sandbox_permissions": "workspace-write",
            "justification": "Need to write the notes.txt file as requested by the user."
        })))
        .await;
    assert_eq!(text(&r), "(no output)", "{r:?}");
    assert_eq!(
        f.approver.asked(),
        vec![Some(
            "escalate sandbox to workspace-write: Need to write the notes.txt file as requested by the user."
                .to_owned()
        )]
    );
    assert_eq!(
        r.value().unwrap().value()["sandbox"],
        json!("workspace-write")
    );
    assert_eq!(
        std::fs::read_to_string(f.workspace().join("notes.txt")).unwrap(),
        "hi\n"
    );
    // The session's mode is unchanged: the next plain call is read-only again.
    let r = f.sh("echo again > other.txt").await;
    assert!(text(&r).contains("under read-only mode"), "{}", text(&r));
}

#[tokio::test]
async fn every_escalation_asks_again() {
    let f = fixture_with(read_only(), |_| {});
    f.approver.grant(true);
    for _ in 0..2 {
        let r = f
            .call(write_notes(
                json!({"sandbox_permissions": "workspace-write"}),
            ))
            .await;
        assert!(!r.is_error(), "{r:?}");
    }
    assert_eq!(
        f.approver.asked(),
        vec![Some("escalate sandbox to workspace-write".to_owned()); 2]
    );
}

#[tokio::test]
async fn a_rejected_escalation_never_runs_the_command() {
    let f = fixture_with(read_only(), |_| {});
    f.approver.grant(false);
    let r = f
        .call(write_notes(
            json!({"sandbox_permissions": "danger-full-access"}),
        ))
        .await;
    assert!(r.is_error());
    assert_eq!(text(&r), "Error: the user rejected tool \"bash\"");
    assert!(!f.workspace().join("notes.txt").exists());
}

#[tokio::test]
async fn without_an_approver_an_escalation_fails_closed() {
    // APR-01 analogue: an ask with no approver degrades to a denial with the ask's reason.
    let f = fixture_with(read_only(), |_| {});
    let registry = ToolRegistry::new();
    let hooks = Hooks::new();
    mount(&f.tool, &registry, &hooks).unwrap().keep();
    let runtime = Runtime::new(registry, hooks);
    let input = dsh_test_support::input(
        "c1",
        "bash",
        write_notes(json!({"sandbox_permissions": "workspace-write", "justification": "why"})),
    );
    let r = runtime.execute(input).await;
    assert!(r.is_error());
    assert_eq!(text(&r), "Error: escalate sandbox to workspace-write: why");
    assert!(!f.workspace().join("notes.txt").exists());
}

#[tokio::test]
async fn narrowing_the_mode_needs_no_approval() {
    let f = fixture();
    let r = f
        .call(write_notes(json!({"sandbox_permissions": "read-only"})))
        .await;
    assert!(text(&r).contains("under read-only mode"), "{}", text(&r));
    assert!(f.approver.asked().is_empty());
}

#[tokio::test]
async fn an_unknown_mode_is_denied() {
    let f = fixture();
    let r = f
        .call(write_notes(json!({"sandbox_permissions": "root"})))
        .await;
    assert!(r.is_error());
    assert!(
        text(&r).starts_with("Error: sandbox_permissions: sandbox mode must be one of"),
        "{}",
        text(&r)
    );
    assert!(f.approver.asked().is_empty());
}

struct DenyAll;

#[async_trait]
impl dsh_core::PreExecuteHook for DenyAll {
    async fn pre_execute(
        &self,
        _exec: &ToolExecution,
        _next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        Ok(PreToolDecision::deny("commands are off"))
    }
}

struct AskFirst;

#[async_trait]
impl dsh_core::PreExecuteHook for AskFirst {
    async fn pre_execute(
        &self,
        _exec: &ToolExecution,
        _next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        Ok(PreToolDecision::ask("bash needs a look"))
    }
}

#[tokio::test]
async fn a_later_denial_wins_over_an_escalation_request() {
    let f = fixture_with(read_only(), |_| {});
    f.approver.grant(true);
    f.runtime
        .hooks()
        .on_pre_execute(Scope::Global, DenyAll)
        .keep();
    let r = f
        .call(write_notes(
            json!({"sandbox_permissions": "workspace-write"}),
        ))
        .await;
    assert_eq!(text(&r), "Error: commands are off");
    assert!(f.approver.asked().is_empty());
    assert_eq!(f.tool.pending_decisions(), 0);
}

#[tokio::test]
async fn a_later_ask_is_merged_with_the_escalation_into_one_question() {
    let f = fixture_with(read_only(), |_| {});
    f.approver.grant(true);
    f.runtime
        .hooks()
        .on_pre_execute(Scope::Global, AskFirst)
        .keep();
    let r = f
        .call(write_notes(
            json!({"sandbox_permissions": "workspace-write", "justification": "j"}),
        ))
        .await;
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(
        f.approver.asked(),
        vec![Some(
            "bash needs a look; escalate sandbox to workspace-write: j".to_owned()
        )]
    );
}

#[tokio::test]
async fn other_tools_pass_through_the_policy_untouched() {
    let f = fixture();
    f.runtime
        .registry()
        .register(dsh_test_support::echo_tool())
        .unwrap()
        .keep();
    let input = dsh_test_support::input(
        "e1",
        "echo",
        json!({"text": "hi", "sandbox_permissions": "danger-full-access"}),
    );
    let r = f.runtime.execute(input).await;
    assert!(f.approver.asked().is_empty(), "{r:?}");
    assert_eq!(f.tool.pending_decisions(), 0);
}
