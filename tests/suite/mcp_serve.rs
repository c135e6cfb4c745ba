//! `dsh mcp serve` driven by a client nobody here wrote: the Python `mcp` SDK's stdio client
//! (installed by `.ci/run`; these tests fail, naming the install, when it is missing).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::support::*;

fn client_script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py")
}

/// Runs the Python client against `dsh mcp serve ARGS`, making `calls`; returns its report.
fn mcp_client(args: &[&str], calls: Value) -> Value {
    let probe = Command::new("python3")
        .args(["-c", "import mcp"])
        .output()
        .expect("python3 runs");
    assert!(
        probe.status.success(),
        "the Python `mcp` SDK is missing: `pip install mcp==2.3.0` (.ci/run installs it): {}",
        String::from_utf8_lossy(&probe.stderr)
    );
    let mut cmd = Command::new("python3");
    cmd.arg(client_script())
        .arg(env!("CARGO_BIN_EXE_dsh"))
        .args(["mcp", "serve"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("the client starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(calls.to_string().as_bytes())
        .expect("write the calls");
    let out = child.wait_with_output().expect("the client ends");
    assert!(
        out.status.success(),
        "the MCP client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the client printed no report ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "hello from a note\n").unwrap();
    ws
}

#[test]
fn an_mcp_client_sees_only_allowed_tools_and_every_call_goes_through_the_pipeline_and_the_log() {
    let ws = workspace();
    let log = ws.path().join("gateway.jsonl");
    let policy = ws.path().join("policy.toml");
    std::fs::write(&policy, "[permissions]\ndeny = [\"bash\"]\n").unwrap();
    let report = mcp_client(
        &[
            "--workspace",
            s(ws.path()),
            "--session",
            s(&log),
            "--policy",
            s(&policy),
        ],
        json!([
            ["read", {"file_path": "notes.txt"}],
            ["bash", {"command": "echo hi"}],
            ["write", {"file_path": "notes.txt", "content": "overwritten"}],
        ]),
    );
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"read"), "{tools:?}");
    assert!(
        !tools.contains(&"bash"),
        "a denied tool is not offered: {tools:?}"
    );
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls[0]["isError"], false);
    assert!(
        calls[0]["text"][0]
            .as_str()
            .unwrap()
            .contains("hello from a note")
    );
    // Called anyway (a client may call what it was not offered): denied by the rule, logged.
    assert_eq!(calls[1]["isError"], true);
    assert!(calls[1]["text"][0].as_str().unwrap().contains("denied"));
    // The read-before-write policy applies to MCP clients too: the file was read first.
    assert_eq!(calls[2]["isError"], false, "{calls:?}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(),
        "overwritten"
    );

    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
    let text = std::fs::read_to_string(&log).unwrap();
    let types: Vec<String> = text
        .lines()
        .skip(1)
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(types.iter().filter(|t| *t == "tool/call").count(), 3);
    assert_eq!(types.iter().filter(|t| *t == "tool/result").count(), 3);
    assert_eq!(types.iter().filter(|t| *t == "turn/start").count(), 3);
}

#[test]
fn an_ask_with_no_one_to_ask_is_denied_and_approve_always_lets_it_run() {
    let ws = workspace();
    let policy = ws.path().join("policy.toml");
    std::fs::write(&policy, "[permissions]\nask = [\"read\"]\n").unwrap();
    let calls = json!([["read", {"file_path": "notes.txt"}]]);
    let closed = mcp_client(
        &[
            "--workspace",
            s(ws.path()),
            "--session",
            s(&ws.path().join("a.jsonl")),
            "--policy",
            s(&policy),
        ],
        calls.clone(),
    );
    assert_eq!(closed["calls"][0]["isError"], true, "{closed}");
    let open = mcp_client(
        &[
            "--workspace",
            s(ws.path()),
            "--session",
            s(&ws.path().join("b.jsonl")),
            "--policy",
            s(&policy),
            "--demo-tools",
            "--approve",
            "always",
        ],
        calls,
    );
    assert_eq!(open["calls"][0]["isError"], false, "{open}");
    assert!(
        open["calls"][0]["text"][0]
            .as_str()
            .is_some_and(|t| t.contains("hello from a note")),
        "{open}"
    );
}

#[test]
fn approve_ask_is_refused_because_stdin_carries_the_protocol() {
    let out = dsh_run(&["mcp", "serve", "--approve", "ask"]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(
        out.stderr.contains("stdin carries the protocol"),
        "{}",
        out.both()
    );
}
