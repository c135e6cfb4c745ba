//! A machine without Landlock, simulated by the `simulate_no_landlock` switch (the probe and the
//! helper both act as if the kernel had none): contained calls fail closed with
//! `SANDBOX_UNAVAILABLE` and run nothing, unless the settings say to ask or to run uncontained.

use std::process::Command;

use dsh_tool_bash::{Probe, SandboxMode, SandboxSettings, Unavailable};
use serde_json::json;

use super::support::*;

fn no_landlock(unavailable: Unavailable) -> Fixture {
    fixture_with(
        SandboxSettings {
            unavailable,
            ..SandboxSettings::default()
        },
        |c| c.simulate_no_landlock = true,
    )
}

#[tokio::test]
async fn the_probe_reports_the_simulated_kernel_as_unsupported() {
    let f = no_landlock(Unavailable::Fail);
    match f.tool.probe().await {
        Probe::Unavailable(why) => assert!(why.contains("Landlock is not supported"), "{why}"),
        other => panic!("expected unavailable, got {other:?}"),
    }
    // And this machine's real kernel does contain (the switch is what makes the difference).
    assert!(sandbox_available().await);
}

#[tokio::test]
async fn a_contained_call_fails_closed_and_runs_nothing() {
    let f = no_landlock(Unavailable::Fail);
    for mode in ["read-only", "workspace-write"] {
        let r = f
            .call(json!({
                "command": "touch ran",
                "description": "d",
                "sandbox_permissions": mode,
            }))
            .await;
        assert!(r.is_error(), "{mode}: {r:?}");
        assert_eq!(code(&r).as_deref(), Some("SANDBOX_UNAVAILABLE"), "{mode}");
        assert!(
            text(&r).contains(&format!("cannot run the command under the {mode} sandbox")),
            "{}",
            text(&r)
        );
        assert!(!f.workspace().join("ran").exists(), "{mode}: it ran");
    }
}

#[test]
fn the_helper_itself_refuses_to_run_uncontained() {
    // Even if a probe had said yes, the helper checks again and never executes the command.
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = Command::new(helper().program())
        .args([
            "--mode",
            "workspace-write",
            "--simulate-no-landlock",
            "--root",
        ])
        .arg(dir.path())
        .args(["--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(dsh_tool_bash::sandbox::SETUP_FAILED_EXIT)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(dsh_tool_bash::sandbox::SETUP_MARKER),
        "{stderr}"
    );
    assert!(!marker.exists());
}

#[tokio::test]
async fn the_policy_may_ask_to_run_uncontained_instead() {
    let f = no_landlock(Unavailable::Ask);
    f.approver.grant(true);
    let r = f.sh("touch ran && echo ok").await;
    assert!(!r.is_error(), "{r:?}");
    let asked = f.approver.asked();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0]
            .as_deref()
            .unwrap_or("")
            .starts_with("the sandbox is unavailable (Landlock is not supported"),
        "{asked:?}"
    );
    let t = text(&r);
    assert!(
        t.starts_with("ok\n[sandbox: unavailable (Landlock is not supported"),
        "{t}"
    );
    assert!(t.ends_with("the command ran without containment]"), "{t}");
    assert_eq!(
        r.value().unwrap().value()["sandbox"],
        json!("danger-full-access")
    );
    // Refused: nothing runs.
    f.approver.grant(false);
    std::fs::remove_file(f.workspace().join("ran")).unwrap();
    let r = f.sh("touch ran").await;
    assert!(r.is_error());
    assert!(!f.workspace().join("ran").exists());
}

#[tokio::test]
async fn the_policy_may_run_uncontained_and_say_so() {
    let f = no_landlock(Unavailable::RunUncontained);
    let r = f.sh("echo ok").await;
    assert!(
        text(&r).contains("the command ran without containment]"),
        "{}",
        text(&r)
    );
    assert!(f.approver.asked().is_empty());
}

#[tokio::test]
async fn danger_full_access_needs_no_kernel_support() {
    let f = fixture_with(
        SandboxSettings {
            mode: SandboxMode::DangerFullAccess,
            ..SandboxSettings::default()
        },
        |c| c.simulate_no_landlock = true,
    );
    assert_eq!(text(&f.sh("echo ok").await), "ok\n");
}

#[tokio::test]
async fn without_a_helper_contained_calls_fail_closed() {
    let f = fixture_with(SandboxSettings::default(), |c| c.helper = None);
    let r = f.sh("touch ran").await;
    assert_eq!(code(&r).as_deref(), Some("SANDBOX_UNAVAILABLE"));
    assert!(
        text(&r).contains("no sandbox helper program is configured"),
        "{}",
        text(&r)
    );
    assert!(!f.workspace().join("ran").exists());
}
