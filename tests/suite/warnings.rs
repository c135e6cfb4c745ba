//! Issue 17 item 1: the warnings the README promises reach stderr (a `tracing` subscriber at
//! `warn` by default, `RUST_LOG` honoured): hooks that cannot run, time out or answer garbage,
//! and hook points dsh does not run.

use serde_json::{Value, json};

use super::support::*;

/// Runs one `echo` call with `hooks` as the settings file; returns the output and the
/// `hook/result` events of the log.
fn run_hooked(hooks: Value, env: &[(&str, &str)]) -> (Out, Vec<Value>) {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let settings = t.path().join("settings.json");
    std::fs::write(&settings, json!({ "hooks": hooks }).to_string()).unwrap();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai("go", &[call("c1", "echo", json!({"text": "hi"}))])],
    );
    let log = t.path().join("log.jsonl");
    let mut cmd = dsh();
    cmd.args([
        "run",
        s(&sc),
        "--workspace",
        s(&ws),
        "--demo-tools",
        "--settings",
        s(&settings),
        "--session",
        s(&log),
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    let results = of_type(&events(&log), "hook/result")
        .into_iter()
        .map(|e| e["data"].clone())
        .collect();
    (out, results)
}

fn pre(command: &str, timeout: Option<u64>) -> Value {
    let mut hook = json!({"type": "command", "command": command});
    if let Some(t) = timeout {
        hook["timeout"] = json!(t);
    }
    json!({"PreToolUse": [{"matcher": "*", "hooks": [hook]}]})
}

#[test]
fn hook_failures_are_warned_on_stderr_and_change_nothing_by_default() {
    let t = tmp();
    let not_exec = t.path().join("not-executable.sh");
    std::fs::write(&not_exec, "#!/bin/sh\nexit 0\n").unwrap();
    let cases: Vec<(String, Option<u64>, &str)> = vec![
        ("dsh-no-such-hook-command".into(), None, "127"),
        (not_exec.display().to_string(), None, "126"),
        ("echo '{not json'".into(), None, "invalid JSON output"),
        ("echo garbage".into(), None, "must print a JSON object"),
        ("sleep 5".into(), Some(1), "timed out"),
    ];
    for (command, timeout, what) in cases {
        let (out, results) = run_hooked(pre(&command, timeout), &[]);
        assert_eq!(out.code, 0, "{command}: {}", out.both());
        let warning = out
            .stderr
            .lines()
            .find(|l| l.contains("WARN") && l.contains("hook error"))
            .unwrap_or_else(|| panic!("{command}: no warning: {}", out.both()));
        assert!(
            warning.contains(what),
            "{command} should say {what:?}: {warning}"
        );
        assert_eq!(results.len(), 1, "{command}");
        assert_eq!(
            results[0]["decision"], "error",
            "{command}: {:?}",
            results[0]
        );
        // By default a hook error changes nothing: the call ran.
        assert!(out.stdout.contains("✓ echo"), "{command}: {}", out.both());
    }
}

#[test]
fn hook_points_dsh_does_not_run_are_named_at_load() {
    let hooks = json!({
        "Stop": [{"hooks": [{"type": "command", "command": "true"}]}],
        "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "true"}]}]
    });
    let (out, _) = run_hooked(hooks, &[]);
    assert_eq!(out.code, 0, "{}", out.both());
    let warning = out
        .stderr
        .lines()
        .find(|l| l.contains("WARN") && l.contains("not supported"))
        .unwrap_or_else(|| panic!("no warning: {}", out.both()));
    assert!(warning.contains("Stop"), "{warning}");
    assert!(!warning.contains("PreToolUse"), "{warning}");
    // stderr is a pipe here: the warning is plain text, no colour escapes.
    assert!(!out.stderr.contains('\u{1b}'), "{:?}", out.stderr);
}

#[test]
fn rust_log_is_honoured() {
    let (quiet, _) = run_hooked(pre("echo garbage", None), &[("RUST_LOG", "error")]);
    assert_eq!(quiet.code, 0, "{}", quiet.both());
    assert!(!quiet.stderr.contains("hook error"), "{}", quiet.both());
    let (bad, _) = run_hooked(pre("echo garbage", None), &[("RUST_LOG", "=[bad")]);
    assert!(bad.stderr.contains("RUST_LOG ignored"), "{}", bad.both());
    assert!(bad.stderr.contains("hook error"), "{}", bad.both());
}
