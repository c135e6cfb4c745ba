//! The `bash` tool through the `dsh` binary: presets announced at the start of the log, a
//! sandboxed write refused and then escalated through approval, `--preset` overriding the policy
//! file, a policy file that names both `preset` and `approval` refused, and the hidden helper.

use serde_json::json;

use super::support::*;

fn write_notes(id: &str, extra: serde_json::Value) -> Call {
    let mut args = json!({"command": "echo hi > notes.txt", "description": "Write notes"});
    if let (Some(a), Some(e)) = (args.as_object_mut(), extra.as_object()) {
        a.extend(e.clone());
    }
    call(id, "bash", args)
}

#[test]
fn a_read_only_preset_refuses_a_write_until_an_escalation_is_approved() {
    let dir = tmp();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let log = dir.path().join("log.jsonl");
    let sc = script(
        dir.path(),
        "s.jsonl",
        &[
            openai("write", &[write_notes("c1", json!({}))]),
            openai(
                "escalate",
                &[write_notes(
                    "c2",
                    json!({"sandbox_permissions": "workspace-write", "justification": "asked"}),
                )],
            ),
            openai("done", &[]),
        ],
    );
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(&ws),
        "--session",
        s(&log),
        "--preset",
        "read-only",
        "--approve",
        "always",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert_checks_clean(&log);
    let ev = events(&log);
    // The reference's three events open the session (apps-approval-composer.jsonl).
    let first: Vec<_> = ev.iter().take(3).cloned().collect();
    assert_eq!(
        first,
        vec![
            json!({"type": "permission/preset", "data": {"preset": "read-only"}}),
            json!({"type": "sandbox/mode", "data": {"mode": "read-only"}}),
            json!({"type": "approval/policy", "data": {"policy": "ask"}}),
        ]
    );
    let refused = result_of(&ev, "c1");
    assert!(!refused.is_error, "{refused:?}");
    assert!(
        refused
            .text
            .contains("[sandbox: file access denied under read-only mode]"),
        "{refused:?}"
    );
    let asked = of_type(&ev, "approval/asked");
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0]["data"]["reason"],
        "escalate sandbox to workspace-write: asked"
    );
    assert_eq!(result_of(&ev, "c2").text, "(no output)");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "hi\n"
    );
}

#[test]
fn the_preset_comes_from_the_policy_file_and_the_flag_overrides_it() {
    let dir = tmp();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "preset = \"danger-full-access\"\n").unwrap();
    let sc = script(
        dir.path(),
        "s.jsonl",
        &[openai("w", &[write_notes("c1", json!({}))])],
    );
    let log = dir.path().join("a.jsonl");
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(&ws),
        "--session",
        s(&log),
        "--policy",
        s(&policy),
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    assert_eq!(ev[0]["data"]["preset"], "danger-full-access");
    assert_eq!(
        ev[2],
        json!({"type": "approval/policy", "data": {"policy": "never"}})
    );
    assert_eq!(result_of(&ev, "c1").text, "(no output)");

    std::fs::remove_file(ws.join("notes.txt")).unwrap();
    let log = dir.path().join("b.jsonl");
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(&ws),
        "--session",
        s(&log),
        "--policy",
        s(&policy),
        "--preset",
        "read-only",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    assert_eq!(ev[0]["data"]["preset"], "read-only");
    assert!(result_of(&ev, "c1").text.contains("under read-only mode"));
    assert!(!ws.join("notes.txt").exists());
}

#[test]
fn a_policy_file_with_both_preset_and_approval_is_refused() {
    let dir = tmp();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "approval = \"ask\"\npreset = \"read-only\"\n").unwrap();
    let sc = script(dir.path(), "s.jsonl", &[openai("done", &[])]);
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(dir.path()),
        "--policy",
        s(&policy),
    ]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(
        out.stderr
            .contains("line 2: preset: a preset sets the approval policy too"),
        "{}",
        out.both()
    );
    std::fs::write(&policy, "preset = \"root\"\n").unwrap();
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(dir.path()),
        "--policy",
        s(&policy),
    ]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(
        out.stderr.contains("permission preset must be one of"),
        "{}",
        out.both()
    );
}

#[test]
fn the_hidden_helper_contains_itself_and_is_not_listed() {
    let dir = tmp();
    let out = dsh_run(&[
        "__sandbox-exec",
        "--mode",
        "workspace-write",
        "--root",
        s(dir.path()),
        "--probe",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(
        out.stdout
            .starts_with("dsh-sandbox: enforced workspace-write"),
        "{}",
        out.both()
    );
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let out = dsh_run(&[
        "__sandbox-exec",
        "--mode",
        "workspace-write",
        "--root",
        s(&ws),
        "--",
        "bash",
        "-c",
        &format!("echo a > {}/in && echo b > {}/out", s(&ws), s(&outside)),
    ]);
    assert_eq!(out.code, 1, "{}", out.both());
    assert!(ws.join("in").exists());
    assert!(!outside.join("out").exists());
    assert!(!dsh_run(&["--help"]).stdout.contains("sandbox-exec"));
}

/// Runs `lines` with bash allowed (every ask approved) in a fresh workspace; returns the output,
/// the log's events, and the temporary directory (also `TMPDIR`) that holds everything.
fn run_bash(lines: &[String], extra: &[&str]) -> (Out, Vec<serde_json::Value>, tempfile::TempDir) {
    let dir = tmp();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let log = dir.path().join("log.jsonl");
    let sc = script(dir.path(), "s.jsonl", lines);
    let mut args = vec![
        "run",
        s(&sc),
        "--workspace",
        s(&ws),
        "--session",
        s(&log),
        "--approve",
        "always",
    ];
    args.extend(extra);
    let out = run(dsh().args(&args).env("TMPDIR", dir.path()));
    let ev = events(&log);
    (out, ev, dir)
}

/// Issue 17 item 3: `description` is optional and Claude Code's `timeout` (milliseconds) is
/// accepted beside `timeoutMs`; a non-zero exit shows on the line (`✗ exit 3`) and in the summary.
#[test]
fn bash_takes_claude_code_parameters_and_shows_a_non_zero_exit() {
    let (out, ev, _dir) = run_bash(
        &[
            openai(
                "run",
                &[
                    call("c1", "bash", json!({"command": "exit 3"})),
                    call("c2", "bash", json!({"command": "sleep 5", "timeout": 300})),
                    call(
                        "c3",
                        "bash",
                        json!({"command": "true", "timeout": 100, "timeoutMs": 200}),
                    ),
                    call(
                        "c4",
                        "bash",
                        json!({"command": "echo ok", "timeout": 5000, "timeoutMs": 5000}),
                    ),
                ],
            ),
            openai("done", &[]),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.both());
    let exit3 = result_of(&ev, "c1");
    assert!(!exit3.is_error, "{exit3:?}");
    assert!(exit3.text.contains("[exit code: 3]"), "{exit3:?}");
    let slow = result_of(&ev, "c2");
    assert_eq!(slow.code.as_deref(), Some("BASH_TIMEOUT"), "{slow:?}");
    assert!(slow.text.contains("after 300ms"), "{slow:?}");
    let both = result_of(&ev, "c3");
    assert_eq!(both.code.as_deref(), Some("INVALID_ARGS"), "{both:?}");
    assert!(both.text.contains("disagree"), "{both:?}");
    assert!(!result_of(&ev, "c4").is_error);
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains("bash exit 3"))
        .unwrap_or_else(|| panic!("{}", out.both()));
    assert!(line.starts_with("✗ bash exit 3"), "{line}");
    assert!(line.ends_with("✗ exit 3"), "{line}");
    assert!(
        out.stdout.lines().any(|l| l.starts_with("✓ bash echo ok")),
        "{}",
        out.both()
    );
    assert!(
        out.stderr.contains("; 1 command exited non-zero"),
        "{}",
        out.both()
    );
}

/// Issue 17 item 3: a sandbox denial shows on the line (`⚠ sandbox`) and in the summary.
#[test]
fn a_sandbox_denial_shows_on_the_line_and_in_the_summary() {
    let (out, ev, _dir) = run_bash(
        &[
            openai("write", &[write_notes("c1", json!({}))]),
            openai("done", &[]),
        ],
        &["--preset", "read-only"],
    );
    assert_eq!(out.code, 0, "{}", out.both());
    let r = result_of(&ev, "c1");
    assert!(r.text.contains("[sandbox: file access denied"), "{r:?}");
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains("bash echo hi"))
        .unwrap_or_else(|| panic!("{}", out.both()));
    assert!(line.starts_with("⚠ bash echo hi"), "{line}");
    assert!(line.contains("⚠ sandbox"), "{line}");
    assert!(out.stderr.contains("1 sandbox denial"), "{}", out.both());
}

/// Issue 17 item 3: a truncated output's full copy is in a private (0700) per-session directory
/// that the session's own `read` may open (here on resuming the session, as the path is only
/// known once the first run has made it).
#[test]
fn full_outputs_go_to_a_private_session_directory_that_read_may_open() {
    use std::os::unix::fs::PermissionsExt;
    let (out, ev, dir) = run_bash(
        &[
            openai(
                "big",
                &[call("c1", "bash", json!({"command": "seq 1 20000"}))],
            ),
            openai("done", &[]),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.both());
    let big = result_of(&ev, "c1");
    let path = big
        .text
        .split("full output: ")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap_or_else(|| panic!("{big:?}"))
        .to_owned();
    let file = std::path::Path::new(&path);
    let parent = file.parent().unwrap();
    assert!(parent.starts_with(dir.path()), "{path}");
    let session_id = header(&dir.path().join("log.jsonl"))["id"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(
        parent
            .file_name()
            .unwrap()
            .to_string_lossy()
            .contains(&session_id),
        "{path} should be per session ({session_id})"
    );
    for dir in [parent, parent.parent().unwrap()] {
        let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
    assert!(std::fs::read_to_string(file).unwrap().contains("\n20000\n"));
    // The same session, resumed, reads the file with its own `read`.
    let ws = dir.path().join("ws");
    let log = dir.path().join("log.jsonl");
    let sc = script(
        dir.path(),
        "read.jsonl",
        &[
            openai(
                "read it",
                &[call(
                    "r1",
                    "read",
                    json!({"file_path": path, "offset": 19990}),
                )],
            ),
            openai("done", &[]),
        ],
    );
    let again = run(dsh()
        .args([
            "run",
            s(&sc),
            "--workspace",
            s(&ws),
            "--session",
            s(&log),
            "--approve",
            "always",
        ])
        .env("TMPDIR", dir.path()));
    assert_eq!(again.code, 0, "{}", again.both());
    let read = result_of(&events(&log), "r1");
    assert!(!read.is_error, "{read:?}");
    assert!(read.text.contains("20000"), "{read:?}");
}
