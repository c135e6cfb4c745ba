//! On a terminal (a pseudo-terminal from util-linux `script`; skipped where it is missing):
//! colours unless `NO_COLOR`, approval asks by default, and a question stays on screen (live
//! spinners do not redraw over it).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use super::support::*;

fn have_script() -> bool {
    let ok = Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is not available");
    }
    ok
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `dsh <args>` on a pseudo-terminal; stdout and stderr both arrive on the terminal.
fn on_tty(args: &[&str], no_color: bool) -> (std::process::Child, Arc<Mutex<Vec<u8>>>) {
    let line: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_dsh"))
        .chain(args.iter().copied())
        .map(quote)
        .collect();
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line.join(" "), "/dev/null"])
        .env("XDG_CONFIG_HOME", "/nonexistent/dsh-tests-config")
        .env("COLUMNS", "100")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if no_color {
        cmd.env("NO_COLOR", "1");
    } else {
        cmd.env_remove("NO_COLOR");
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    (child, seen)
}

fn text(seen: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&seen.lock().unwrap()).into_owned()
}

fn echo_run(dir: &Path, no_color: bool) -> String {
    let sc = script(
        dir,
        &format!("s{no_color}.jsonl"),
        &[openai("", &[call("c", "echo", json!({"text": "hi"}))])],
    );
    let log = dir.join(format!("log{no_color}.jsonl"));
    let (mut child, seen) = on_tty(
        &[
            "run",
            s(&sc),
            "--workspace",
            s(dir),
            "--session",
            s(&log),
            "--demo-tools",
        ],
        no_color,
    );
    let input = child.stdin.take();
    let code = wait(child);
    drop(input);
    assert_eq!(code, 0, "{}", text(&seen));
    assert_checks_clean(&log);
    text(&seen)
}

#[test]
fn colours_on_a_terminal_unless_no_color() {
    if !have_script() {
        return;
    }
    let t = tmp();
    let coloured = echo_run(t.path(), false);
    assert!(coloured.contains("\u{1b}[32m✓"), "{coloured:?}");
    let plain = echo_run(t.path(), true);
    assert!(plain.contains("✓ echo hi"), "{plain:?}");
    for sgr in ["\u{1b}[31m", "\u{1b}[32m", "\u{1b}[2m"] {
        assert!(!plain.contains(sgr), "NO_COLOR ignored: {plain:?}");
    }
}

#[test]
fn on_a_terminal_approval_asks_by_default_and_the_question_stays_visible() {
    if !have_script() {
        return;
    }
    let t = tmp();
    let policy = t.path().join("p.toml");
    std::fs::write(&policy, ASK_ECHO).unwrap();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai(
            "",
            &[call("c1", "echo", json!({"text": "allowed"}))],
        )],
    );
    let log = t.path().join("log.jsonl");
    let (mut child, seen) = on_tty(
        &[
            "run",
            s(&sc),
            "--workspace",
            s(t.path()),
            "--session",
            s(&log),
            "--policy",
            s(&policy),
            "--demo-tools",
        ],
        true,
    );
    let start = Instant::now();
    while !text(&seen).contains("allow this call? [") {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no question: {:?}",
            text(&seen)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Long enough for several spinner ticks: none may clear the question's line.
    std::thread::sleep(Duration::from_millis(350));
    let before_answer = text(&seen);
    let mut input = child.stdin.take().unwrap();
    input.write_all(b"y\n").unwrap();
    let code = wait(child);
    drop(input);
    assert_eq!(code, 0, "{}", text(&seen));
    let after_question = before_answer.split("allow this call? [").nth(1).unwrap();
    assert!(
        !after_question.contains("\u{1b}[2K") && !after_question.contains('\r'),
        "the question was redrawn over: {after_question:?}"
    );
    let ev = events(&log);
    assert_eq!(result_of(&ev, "c1").text, "allowed");
    assert_eq!(
        of_type(&ev, "approval/decided")[0]["data"]["outcome"],
        "allowed-once"
    );
}

/// Issue 17 item 4: on a terminal each finished line ends with its own newline, so a captured
/// session (`script`, a terminal's log) is one line per call, not one line padded to the width.
#[test]
fn finished_lines_end_with_a_newline_on_a_terminal() {
    if !have_script() {
        return;
    }
    let t = tmp();
    let seen = echo_run(t.path(), true);
    let at = seen.find("✓ echo hi").unwrap_or_else(|| panic!("{seen:?}"));
    let line = seen[at..].split('\n').next().unwrap_or_default();
    let line = line.trim_end_matches('\r');
    assert!(line.ends_with("ms"), "the line runs on: {line:?}");
    assert!(!line.contains("  calls"), "{line:?}");
}
