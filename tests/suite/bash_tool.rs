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
