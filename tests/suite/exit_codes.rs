//! Exit codes: 0 the script ran (tool failures are results), 1 an internal error, 2 bad usage,
//! 130 cancelled (see `cancel.rs`). Plain, sanitized rendering when stdout is not a terminal.

use serde_json::json;

use super::support::*;

#[test]
fn usage_errors_exit_2_before_anything_is_written() {
    let t = tmp();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai("", &[call("c", "echo", json!({"text": "x"}))])],
    );
    let not_a_dir = t.path().join("file.txt");
    std::fs::write(&not_a_dir, "x").unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec![],
        vec!["frobnicate"],
        vec!["run"],
        vec!["run", s(&sc), "--bogus"],
        vec!["run", s(&sc), "--approve", "sometimes"],
        vec!["run", s(&sc), "--mode", "fast"],
        vec!["run", s(&sc), "--cancel-after-ms", "-1"],
        vec!["run", s(&sc), "--workspace", "/definitely/not/here"],
        vec!["run", s(&sc), "--workspace", s(&not_a_dir)],
        vec!["transcript"],
        vec!["repair"],
    ];
    for args in cases {
        let out = run(dsh().args(&args).current_dir(t.path()));
        assert_eq!(out.code, 2, "{args:?}: {}", out.both());
        assert!(!out.stderr.is_empty(), "{args:?}: says nothing");
    }
    assert!(default_sessions(t.path()).is_empty());
}

#[test]
fn internal_errors_exit_1() {
    let t = tmp();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai("", &[call("c", "sleep", json!({"ms": 20_000}))])],
    );
    // The session path is a directory.
    let dir = t.path().join("dir.jsonl");
    std::fs::create_dir(&dir).unwrap();
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&dir),
    ]);
    assert_eq!(out.code, 1, "{}", out.both());
    assert!(out.stderr.contains("dir.jsonl"), "{}", out.both());

    // The existing session is corrupt in the middle (not a torn tail): refused, not rewritten.
    let corrupt = t.path().join("corrupt.jsonl");
    std::fs::write(
        &corrupt,
        "{\"type\":\"session\",\"version\":0,\"id\":\"x\",\"createdAt\":0,\"cwd\":\"/\"}\nnonsense\n{\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n",
    )
    .unwrap();
    let before = std::fs::read(&corrupt).unwrap();
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&corrupt),
    ]);
    assert_eq!(out.code, 1, "{}", out.both());
    assert!(out.stderr.contains("line 2"), "{}", out.both());
    assert_eq!(std::fs::read(&corrupt).unwrap(), before);

    // The session is held by a running process: another run and a repair are refused.
    let held = t.path().join("held.jsonl");
    let mut live = Live::spawn(dsh().args([
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&held),
        "--demo-tools",
        "--json",
    ]));
    live.until(|l| l.contains("\"tool/call\""));
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&held),
    ]);
    // Repair must not close a call that is still running elsewhere.
    let held_bytes = std::fs::read(&held).unwrap();
    let repair = dsh_run(&["repair", s(&held)]);
    live.child.kill().unwrap();
    live.child.wait().unwrap();
    assert_eq!(out.code, 1, "{}", out.both());
    assert!(out.stderr.contains("lock"), "{}", out.both());
    assert_eq!(repair.code, 1, "{}", repair.both());
    assert!(repair.stderr.contains("lock"), "{}", repair.both());
    assert_eq!(
        std::fs::read(&held).unwrap(),
        held_bytes,
        "repaired under a live writer"
    );
}

#[test]
fn tool_failures_are_results_and_exit_0() {
    let t = tmp();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai(
            "",
            &[
                call("f", "fail", json!({"message": "bad things"})),
                call("u", "nonexistent_tool", json!({})),
                call("a", "echo", json!({"wrong": 1})),
            ],
        )],
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
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    assert!(results(&ev).iter().all(|r| r.is_error));
    assert_eq!(result_of(&ev, "u").code.as_deref(), Some("UNKNOWN_TOOL"));
    assert!(out.stderr.contains("3 calls, 3 failed"), "{}", out.both());
    assert!(out.stderr.contains("UNKNOWN_TOOL ×1"), "{}", out.both());
}

#[test]
fn plain_rendering_sanitizes_what_tools_and_models_wrote() {
    let t = tmp();
    let nasty = "red\u{1b}[31m bell\u{7} back\u{8}";
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai(
            "",
            &[
                call("e", "echo", json!({"text": nasty})),
                call("f", "fail", json!({"message": nasty})),
            ],
        )],
    );
    let out = dsh_run(&["run", s(&sc), "--workspace", s(t.path()), "--demo-tools"]);
    assert_eq!(out.code, 0, "{}", out.both());
    for c in ['\u{1b}', '\u{7}', '\u{8}'] {
        assert!(
            !out.stdout.contains(c),
            "{c:?} reached stdout: {:?}",
            out.stdout
        );
        assert!(
            !out.stderr.contains(c),
            "{c:?} reached stderr: {:?}",
            out.stderr
        );
    }
    assert!(out.stdout.contains("✓ echo red"), "{}", out.stdout);
    assert!(out.stdout.contains("✗ fail red"), "{}", out.stdout);
}

#[test]
fn a_closed_stderr_loses_the_messages_not_the_exit_code() {
    // `dsh ... 2>&1 | head` closes the pipe early: the lines dsh writes to stderr are lost,
    // and the command ends with its own exit code, never a panic's 101.
    let t = tmp();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai("", &[call("c", "echo", json!({"text": "x"}))])],
    );
    let log = t.path().join("log.jsonl");
    for (args, want) in [
        (
            vec![
                "run",
                s(&sc),
                "--demo-tools",
                "--workspace",
                s(t.path()),
                "--session",
                s(&log),
            ],
            0,
        ),
        (vec!["transcript", "/definitely/not/here.jsonl"], 1),
        (vec!["run", s(&sc), "--bogus"], 2),
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let status = dsh()
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(writer)
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(want), "{args:?}");
    }
    assert_eq!(
        dsh_run(&["check", s(&log)]).code,
        0,
        "the run's log is whole"
    );
}
