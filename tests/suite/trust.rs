//! A workspace runs nothing until trusted: its own `.dsh/settings.json` (hooks that run
//! commands) applies only with `--trust-workspace`, or once the user said yes on a terminal
//! (remembered with the file's hash, asked again when it changes).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::support::*;

/// A workspace whose settings hold a PreToolUse hook that writes `marker` (outside it).
fn hostile_workspace(t: &Path) -> (PathBuf, PathBuf) {
    let ws = t.join("ws");
    std::fs::create_dir_all(ws.join(".dsh")).unwrap();
    let marker = t.join("marker");
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": format!("touch {}", marker.display())}]}]}});
    std::fs::write(ws.join(".dsh/settings.json"), settings.to_string()).unwrap();
    (ws, marker)
}

fn run_in(t: &Path, ws: &Path, config: &Path, extra: &[&str]) -> Out {
    let sc = script(
        t,
        "s.jsonl",
        &[
            anthropic("", &[call("c1", "echo", json!({"text": "x"}))]),
            anthropic("done", &[]),
        ],
    );
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = t.join(format!("log-{n}.jsonl"));
    let mut args = vec![
        "run",
        s(&sc),
        "--workspace",
        s(ws),
        "--session",
        s(&log),
        "--demo-tools",
    ];
    args.extend_from_slice(extra);
    run(dsh().env("XDG_CONFIG_HOME", config).args(&args))
}

#[test]
fn an_untrusted_workspace_runs_none_of_its_hooks_and_says_so() {
    let t = tmp();
    let (ws, marker) = hostile_workspace(t.path());
    let config = t.path().join("config");
    let out = run_in(t.path(), &ws, &config, &[]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(!marker.exists(), "an untrusted workspace ran its hook");
    assert!(
        out.stderr.contains("not applying")
            && out.stderr.contains(".dsh/settings.json")
            && out.stderr.contains("--trust-workspace"),
        "{}",
        out.both()
    );
    // Automation trusts it explicitly.
    let out = run_in(t.path(), &ws, &config, &["--trust-workspace"]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(
        marker.exists(),
        "--trust-workspace applies the workspace's hooks"
    );
}

/// `dsh <args>` on a pseudo-terminal (util-linux `script`), answering `answer` to what it asks.
fn on_terminal(args: &[String], config: &Path, answer: &str) -> String {
    let line: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_dsh").to_owned())
        .chain(args.iter().cloned())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let mut child = Command::new("script")
        .args(["-qec", &line.join(" "), "/dev/null"])
        .env("XDG_CONFIG_HOME", config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("util-linux `script` (a pseudo-terminal) is required");
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let start = Instant::now();
    let mut stdin = child.stdin.take();
    loop {
        if let Ok(chunk) = rx.recv_timeout(Duration::from_millis(100)) {
            seen.extend(chunk);
        }
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some(input) = stdin.as_mut().filter(|_| text.contains("[y/N]")) {
            input.write_all(format!("{answer}\n").as_bytes()).unwrap();
            input.flush().unwrap();
            stdin = None;
        }
        if child.try_wait().unwrap().is_some() {
            while let Ok(chunk) = rx.recv_timeout(Duration::from_millis(200)) {
                seen.extend(chunk);
            }
            return String::from_utf8_lossy(&seen).into_owned();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "dsh did not finish: {text}"
        );
    }
}

#[test]
fn on_a_terminal_trust_is_asked_once_remembered_and_asked_again_when_the_file_changes() {
    let t = tmp();
    let (ws, marker) = hostile_workspace(t.path());
    let config = t.path().join("config");
    let sc = script(
        t.path(),
        "s.jsonl",
        &[
            anthropic("", &[call("c1", "echo", json!({"text": "x"}))]),
            anthropic("done", &[]),
        ],
    );
    let args = |n: usize| -> Vec<String> {
        [
            "run",
            s(&sc),
            "--workspace",
            s(&ws),
            "--session",
            &t.path().join(format!("l{n}.jsonl")).to_string_lossy(),
            "--demo-tools",
            "--approve",
            "never",
        ]
        .iter()
        .map(|a| (*a).to_owned())
        .collect()
    };
    // No: nothing runs, nothing is remembered.
    let screen = on_terminal(&args(1), &config, "n");
    assert!(
        screen.contains("trust this workspace") && screen.contains("touch"),
        "{screen}"
    );
    assert!(!marker.exists());
    // Yes: the hook runs, and the answer is remembered for this file.
    let screen = on_terminal(&args(2), &config, "y");
    assert!(marker.exists(), "{screen}");
    std::fs::remove_file(&marker).unwrap();
    let out = run_in(t.path(), &ws, &config, &[]);
    assert!(marker.exists(), "remembered: {}", out.both());
    std::fs::remove_file(&marker).unwrap();
    // The file changes: untrusted again.
    let settings = std::fs::read_to_string(ws.join(".dsh/settings.json")).unwrap();
    std::fs::write(ws.join(".dsh/settings.json"), settings + "\n").unwrap();
    let out = run_in(t.path(), &ws, &config, &[]);
    assert!(
        !marker.exists(),
        "a changed file ran untrusted: {}",
        out.both()
    );
    assert!(out.stderr.contains("not applying"), "{}", out.both());
}
