//! Cancellation from the command line: `--cancel-after-ms` and Ctrl-C (SIGINT) end the turn
//! with exit 130, started calls `ABORTED`, unstarted ones `ABORTED_BEFORE_DISPATCH`, and a log
//! that checks clean (spec C, I1).

use std::time::{Duration, Instant};

use serde_json::json;

use super::support::*;

#[test]
fn can_cancel_after_ms_exits_130_with_a_clean_log() {
    let t = tmp();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[
            anthropic(
                "",
                &[
                    call("long", "sleep", json!({"ms": 10_000})),
                    call("queued", "echo", json!({"text": "never ran"})),
                ],
            ),
            openai("", &[call("next", "echo", json!({"text": "next step"}))]),
        ],
    );
    let log = t.path().join("log.jsonl");
    let started = Instant::now();
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&log),
        "--demo-tools",
        "--max-parallel",
        "1",
        "--cancel-after-ms",
        "500",
    ]);
    assert_eq!(out.code, 130, "{}", out.both());
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the sleep was not cut short"
    );
    assert_checks_clean(&log);

    let ev = events(&log);
    assert_paired(&ev);
    let long = result_of(&ev, "long");
    assert_eq!(long.code.as_deref(), Some("ABORTED"));
    assert_eq!(long.text, "Error: tool call aborted");
    let queued = result_of(&ev, "queued");
    assert_eq!(queued.code.as_deref(), Some("ABORTED_BEFORE_DISPATCH"));
    assert_eq!(queued.text, "Error: tool call aborted before dispatch");
    assert!(
        !call_ids(&ev).contains(&"next".to_owned()),
        "the next step ran"
    );
    let end = of_type(&ev, "turn/end");
    assert_eq!(end.len(), 1);
    assert_eq!(end[0]["data"]["reason"]["kind"], "aborted");
}

#[test]
fn cancel_after_the_turn_ended_changes_nothing() {
    let t = tmp();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai("", &[call("c", "echo", json!({"text": "quick"}))])],
    );
    let log = t.path().join("log.jsonl");
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&log),
        "--demo-tools",
        "--cancel-after-ms",
        "5000",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert_eq!(result_of(&events(&log), "c").text, "quick");
}

/// Runs a step of one 10 s `sleep` call, sends `signal` once its `tool/call` is logged, and
/// checks that dsh exits 130 with a log that checks clean, the call aborted and the turn ended
/// as aborted.
fn a_run_stopped_by(signal: &str) {
    let t = tmp();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[anthropic(
            "",
            &[call("long", "sleep", json!({"ms": 10_000}))],
        )],
    );
    let log = t.path().join("log.jsonl");
    let mut live = Live::spawn(dsh().args([
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&log),
        "--demo-tools",
        "--json",
    ]));
    live.until(|l| l.contains("\"tool/call\""));
    let pid = live.child.id().to_string();
    let kill = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid])
        .status()
        .unwrap();
    assert!(kill.success());
    let code = wait(live.child);
    assert_eq!(code, 130, "SIG{signal}");
    assert_checks_clean(&log);
    let ev = events(&log);
    // The signal may land before or after the body starts.
    let long = result_of(&ev, "long");
    assert!(
        matches!(
            long.code.as_deref(),
            Some("ABORTED" | "ABORTED_BEFORE_DISPATCH")
        ),
        "SIG{signal}: {long:?}"
    );
    assert_eq!(
        of_type(&ev, "turn/end")[0]["data"]["reason"]["kind"],
        "aborted",
        "SIG{signal}"
    );
}

#[test]
fn can_ctrl_c_cancels_the_turn_and_exits_130_with_a_clean_log() {
    a_run_stopped_by("INT");
}

#[test]
fn a_sigterm_or_a_sighup_stops_a_run_as_ctrl_c_does_exit_130_and_a_clean_log() {
    a_run_stopped_by("TERM");
    a_run_stopped_by("HUP");
}
