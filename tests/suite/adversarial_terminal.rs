//! Control characters and ANSI escape sequences from tools, the model and logs never reach the
//! terminal raw: not in human lines (piped), not in `--json` lines (C0 escaped by JSON, C1
//! escaped too), not in what `check`, `repair` and `transcript` print about a log.

use std::path::Path;

use serde_json::json;

use super::support::*;

/// Sets a window title, clears the screen, a C1 CSI (U+009B), carriage return, backspace, NEL.
const NASTY: &str = "ok\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\r\u{8}x\u{85}end";

/// Bytes that can drive a terminal: C0 controls except newline and tab, DEL, and the C1
/// controls as UTF-8 (C2 80..C2 9F).
fn drivers(bytes: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    for (i, w) in bytes.windows(2).enumerate() {
        if w[0] == 0xC2 && (0x80..=0x9F).contains(&w[1]) {
            found.push(format!("C1 U+{:04X} at {i}", w[1]));
        }
    }
    for (i, &b) in bytes.iter().enumerate() {
        if (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7F {
            found.push(format!("0x{b:02x} at {i}"));
        }
    }
    found
}

fn assert_inert(what: &str, text: &str) {
    let found = drivers(text.as_bytes());
    assert!(found.is_empty(), "{what}: {found:?}\n{text}");
}

fn nasty_session(t: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let ws = t.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let steps = [
        openai(
            "",
            &[
                call("e", "echo", json!({ "text": NASTY })),
                call("f", "fail", json!({ "message": NASTY })),
                call("n", &format!("tool{NASTY}"), json!({})),
            ],
        ),
        anthropic(
            "",
            &[call(
                "w",
                "write",
                json!({"file_path": "n.txt", "content": format!("{NASTY}\nline 2\n")}),
            )],
        ),
        anthropic(
            "",
            &[call(
                "d",
                "edit",
                json!({"file_path": "n.txt", "old_string": "line 2", "new_string": NASTY}),
            )],
        ),
    ];
    (script(t, "nasty.jsonl", &steps), ws)
}

#[test]
fn adv_tool_output_never_drives_the_terminal_in_human_lines() {
    let t = tmp();
    let (sc, ws) = nasty_session(t.path());
    let log = t.path().join("log.jsonl");
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--demo-tools",
        "--workspace",
        s(&ws),
        "--session",
        s(&log),
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert_inert("stdout", &out.stdout);
    assert_inert("stderr", &out.stderr);
    // The lines are still there, with the harmless text kept.
    assert!(out.stdout.contains("✗ fail ok"), "{}", out.both());
    assert!(out.stdout.contains("✓ write n.txt"), "{}", out.both());
    assert!(out.stdout.contains("✓ edit n.txt"), "{}", out.both());
    // The tool got, and the log kept, the exact text.
    assert_eq!(
        std::fs::read_to_string(ws.join("n.txt")).unwrap(),
        format!("{NASTY}\n{NASTY}\n")
    );
    let events = events(&log);
    assert_eq!(result_of(&events, "e").text, NASTY);
}

#[test]
fn adv_tool_output_never_drives_the_terminal_in_json_lines() {
    let t = tmp();
    let (sc, ws) = nasty_session(t.path());
    let log = t.path().join("log.jsonl");
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--json",
        "--demo-tools",
        "--workspace",
        s(&ws),
        "--session",
        s(&log),
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert_inert("stdout", &out.stdout);
    // Escaped, not dropped: the JSON values are exact.
    let lines = json_lines(&out.stdout);
    let echo = lines
        .iter()
        .find(|l| l["type"] == "tool/result" && l["data"]["message"]["source"]["callId"] == "e")
        .unwrap();
    assert_eq!(
        echo["data"]["message"]["content"][0]["content"][0]["text"],
        NASTY
    );
}

#[test]
fn adv_log_content_never_drives_the_terminal_in_check_repair_or_transcript() {
    let t = tmp();
    let log = t.path().join("log.jsonl");
    let id = serde_json::to_string(&format!("c{NASTY}")).unwrap();
    let lines = [
        r#"{"type":"session","version":0,"id":"t","createdAt":0,"cwd":"/"}"#.to_owned(),
        r#"{"type":"turn/start","data":{"turn":1}}"#.to_owned(),
        r#"{"type":"step/start","data":{"turn":1,"step":1}}"#.to_owned(),
        format!(
            r#"{{"type":"tool/call","data":{{"turn":1,"step":1,"callId":{id},"name":"echo","arguments":"{{}}"}}}}"#
        ),
        format!(
            r#"{{"type":"tool/call","data":{{"turn":1,"step":1,"callId":{id},"name":"echo","arguments":"{{}}"}}}}"#
        ),
    ];
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 1, "{}", check.both());
    assert!(
        check.stdout.contains("duplicate callId"),
        "{}",
        check.both()
    );
    assert_inert("check", &check.stdout);
    // Repair closes what it can, then lists the duplicate it cannot fix (exit 1), quoting the
    // id as inertly as check does.
    let repair = dsh_run(&["repair", s(&log)]);
    assert_eq!(repair.code, 1, "{}", repair.both());
    assert!(
        repair.stdout.contains("closed call")
            && repair.stdout.contains("repair cannot fix 1 problem(s)")
            && repair.stdout.contains("duplicate callId"),
        "{}",
        repair.both()
    );
    assert_inert("repair", &repair.stdout);
    let transcript = dsh_run(&["transcript", s(&log), "--format", "openai"]);
    assert_eq!(transcript.code, 0, "{}", transcript.both());
    assert_inert("transcript", &transcript.stdout);
    // Escaped, not dropped: the call id reads back exact.
    let v: serde_json::Value = serde_json::from_str(&transcript.stdout).unwrap();
    let mut stack = vec![&v];
    let mut found = false;
    while let Some(x) = stack.pop() {
        match x {
            serde_json::Value::String(s) => found |= *s == format!("c{NASTY}"),
            serde_json::Value::Array(a) => stack.extend(a),
            serde_json::Value::Object(m) => stack.extend(m.values()),
            _ => {}
        }
    }
    assert!(found, "{}", transcript.stdout);
}

/// On a terminal (util-linux `script` gives one; skipped where it is missing) the renderer adds
/// its own colours and spinner redraws, so the check is that none of the tool's sequences
/// appears: no OSC, no screen clear, no BEL, no C1 control.
#[test]
fn adv_tool_output_never_drives_a_real_terminal() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let have_script = Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have_script {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is not available");
        return;
    }
    let t = tmp();
    let (sc, ws) = nasty_session(t.path());
    let log = t.path().join("log.jsonl");
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let line = [
        env!("CARGO_BIN_EXE_dsh"),
        "run",
        s(&sc),
        "--demo-tools",
        "--approve",
        "never",
        "--workspace",
        s(&ws),
        "--session",
        s(&log),
    ]
    .map(quote)
    .join(" ");
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env_remove("NO_COLOR")
        .env("COLUMNS", "100")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let input = child.stdin.take();
    let mut raw = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut raw).unwrap();
    let code = wait(child);
    drop(input);
    let shown = String::from_utf8_lossy(&raw).into_owned();
    assert_eq!(code, 0, "{shown:?}");
    assert!(shown.contains("\u{1b}[32m"), "colours expected: {shown:?}");
    for bad in ["\u{1b}]", "\u{1b}[2J", "\u{7}"] {
        assert!(
            !shown.contains(bad),
            "{bad:?} reached the terminal: {shown:?}"
        );
    }
    let c1: Vec<&[u8]> = raw
        .windows(2)
        .filter(|w| w[0] == 0xC2 && (0x80..=0x9F).contains(&w[1]))
        .collect();
    assert!(c1.is_empty(), "C1 controls reached the terminal: {shown:?}");
    assert!(shown.contains("fail ok"), "{shown:?}");
    assert_checks_clean(&log);
}
