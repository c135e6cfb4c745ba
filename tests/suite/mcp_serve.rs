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

/// Runs the Python client against `dsh mcp serve ARGS` over stdio, making `calls`; returns its
/// report.
fn mcp_client(args: &[&str], calls: Value) -> Value {
    let mut argv = vec![env!("CARGO_BIN_EXE_dsh"), "mcp", "serve"];
    argv.extend_from_slice(args);
    python_client(&argv, calls)
}

/// Runs the Python client with `argv` (a server command, or an HTTP URL and a token), making
/// `calls`; returns its report.
fn python_client(argv: &[&str], calls: Value) -> Value {
    let out = python_client_output(argv, calls);
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

fn python_client_output(argv: &[&str], calls: Value) -> std::process::Output {
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
        .args(argv)
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
    child.wait_with_output().expect("the client ends")
}

pub(super) fn workspace() -> tempfile::TempDir {
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

/// `dsh mcp serve --http 127.0.0.1:0 ARGS` running in the background.
pub(super) struct HttpServer {
    child: std::process::Child,
    /// The endpoint it printed.
    pub(super) url: String,
    stderr: std::sync::Arc<parking_lot::Mutex<String>>,
    drain: Option<std::thread::JoinHandle<()>>,
}

impl HttpServer {
    /// Starts the server, `stdin` written to its stdin (then held open), and waits for the line
    /// that says where it listens.
    pub(super) fn start(args: &[&str], stdin: &str) -> HttpServer {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_dsh"))
            .args(["mcp", "serve", "--http", "127.0.0.1:0"])
            .args(args)
            .env_remove("DSH_MCP_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dsh starts");
        let mut input = child.stdin.take().expect("stdin");
        input.write_all(stdin.as_bytes()).expect("write stdin");
        // Held open (leaked into the drain thread) so a question waits for its line.
        let mut lines = std::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
        let mut seen = String::new();
        let url = loop {
            let Some(Ok(line)) = lines.next() else {
                panic!("dsh ended before it listened: {seen}");
            };
            seen.push_str(&line);
            seen.push('\n');
            if let Some(url) = line.strip_prefix("dsh mcp serve: listening on ") {
                break url.to_string();
            }
        };
        let stderr = std::sync::Arc::new(parking_lot::Mutex::new(seen));
        let sink = stderr.clone();
        let drain = std::thread::spawn(move || {
            let _input = input;
            for line in lines.map_while(Result::ok) {
                let mut s = sink.lock();
                s.push_str(&line);
                s.push('\n');
            }
        });
        HttpServer {
            child,
            url,
            stderr,
            drain: Some(drain),
        }
    }

    /// The status line's code of a raw `initialize` POST carrying `authorization`.
    fn status_of_post(&self, authorization: Option<&str>) -> u16 {
        use std::io::Read;
        let addr = self
            .url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp");
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
        let auth = authorization
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n{auth}Content-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        );
        let mut stream = std::net::TcpStream::connect(addr).expect("connect");
        stream.write_all(request.as_bytes()).expect("send");
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).expect("a status line");
        let head = String::from_utf8_lossy(&head).to_string();
        head[9..12].parse().unwrap_or_else(|_| panic!("{head}"))
    }

    /// Interrupts the server as Ctrl-C would and returns its exit code and stderr.
    pub(super) fn interrupt(mut self) -> (i32, String) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-INT", &pid]).status().unwrap();
        assert!(sent.success());
        let status = self.child.wait().expect("dsh ends");
        if let Some(drain) = self.drain.take() {
            drain.join().unwrap();
        }
        (status.code().unwrap_or(-1), self.stderr.lock().clone())
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

#[test]
fn over_http_only_a_client_with_the_token_is_served_and_ctrl_c_closes_a_clean_log() {
    let ws = workspace();
    let log = ws.path().join("http.jsonl");
    let server = HttpServer::start(
        &[
            "--workspace",
            s(ws.path()),
            "--session",
            s(&log),
            "--token",
            "s3cret",
        ],
        "",
    );
    assert_eq!(server.status_of_post(None), 401);
    assert_eq!(server.status_of_post(Some("Bearer wrong")), 401);
    assert_eq!(server.status_of_post(Some("Bearer s3cret")), 200);
    let refused = python_client_output(&[&server.url], json!([]));
    assert!(
        !refused.status.success(),
        "a client without the token was served"
    );
    let report = python_client(
        &[&server.url, "s3cret"],
        json!([["read", {"file_path": "notes.txt"}], ["read", {"file_path": "missing.txt"}]]),
    );
    assert!(
        report["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|n| n == "read")),
        "{report}"
    );
    assert_eq!(report["calls"][0]["isError"], false, "{report}");
    assert!(
        report["calls"][0]["text"][0]
            .as_str()
            .is_some_and(|t| t.contains("hello from a note")),
        "{report}"
    );
    assert_eq!(report["calls"][1]["isError"], true, "{report}");
    let (code, stderr) = server.interrupt();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("log: "), "{stderr}");
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text.matches("\"type\":\"tool/result\"").count(),
        2,
        "{text}"
    );
}

#[test]
fn a_non_loopback_address_without_a_token_is_refused_before_listening() {
    let out = run(dsh()
        .args(["mcp", "serve", "--http", "0.0.0.0:0"])
        .env_remove("DSH_MCP_TOKEN"));
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("--token"), "{}", out.both());
    assert!(!out.stderr.contains("listening"), "{}", out.both());
}

#[test]
fn approve_ask_over_http_asks_the_terminal_that_started_dsh() {
    let ws = workspace();
    std::fs::write(ws.path().join("other.txt"), "another note\n").unwrap();
    let policy = ws.path().join("policy.toml");
    std::fs::write(&policy, "[permissions]\nask = [\"read\"]\n").unwrap();
    let server = HttpServer::start(
        &[
            "--workspace",
            s(ws.path()),
            "--session",
            s(&ws.path().join("ask.jsonl")),
            "--policy",
            s(&policy),
            "--approve",
            "ask",
        ],
        "y\nn\n",
    );
    let report = python_client(
        &[&server.url],
        json!([["read", {"file_path": "notes.txt"}], ["read", {"file_path": "other.txt"}]]),
    );
    assert_eq!(report["calls"][0]["isError"], false, "{report}");
    assert_eq!(report["calls"][1]["isError"], true, "{report}");
    let (code, stderr) = server.interrupt();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("notes.txt"),
        "the question shows the path: {stderr}"
    );
}

#[test]
fn an_ask_goes_to_a_client_that_declared_elicitation_and_only_an_explicit_allow_runs_it() {
    let ws = workspace();
    let log = ws.path().join("elicit.jsonl");
    let policy = ws.path().join("policy.toml");
    std::fs::write(&policy, "[permissions]\nask = [\"read\"]\n").unwrap();
    let read = json!(["read", {"file_path": "notes.txt"}]);
    let report = mcp_client(
        &[
            "--workspace",
            s(ws.path()),
            "--session",
            s(&log),
            "--policy",
            s(&policy),
        ],
        json!({
            "calls": [read, read, read, read],
            "elicit": ["allow", "decline", "accept-false", "cancel"],
        }),
    );
    let errors: Vec<&Value> = (0..4).map(|i| &report["calls"][i]["isError"]).collect();
    assert_eq!(errors, [false, true, true, true], "{report}");
    assert!(
        report["calls"][0]["text"][0]
            .as_str()
            .is_some_and(|t| t.contains("hello from a note")),
        "{report}"
    );
    let asked = report["elicited"].as_array().expect("elicited");
    assert_eq!(asked.len(), 4, "one question per call: {report}");
    for message in asked {
        let message = message.as_str().unwrap_or_default();
        assert!(
            message.contains("read wants approval") && message.contains("path:      notes.txt"),
            "the question names the tool and the path: {message}"
        );
    }
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}

#[test]
fn as_a_gateway_it_serves_the_tools_of_the_policys_mcp_servers_behind_its_rules() {
    let ws = workspace();
    let policy = ws.path().join("gateway.toml");
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/server.py");
    std::fs::write(
        &policy,
        format!(
            "[mcp.servers.py]\ncommand = \"python3\"\nargs = [{:?}]\n\
             [permissions]\ndeny = [\"mcp__py__shout\"]\n",
            server.display().to_string()
        ),
    )
    .unwrap();
    let log = ws.path().join("gateway.jsonl");
    let report = mcp_client(
        &[
            "--workspace",
            s(ws.path()),
            "--session",
            s(&log),
            "--policy",
            s(&policy),
        ],
        json!([["mcp__py__add", {"a": 20, "b": 22}]]),
    );
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    assert!(tools.contains(&"mcp__py__add"), "{tools:?}");
    assert!(
        !tools.contains(&"mcp__py__shout"),
        "a tool the rules deny is not offered: {tools:?}"
    );
    assert_eq!(report["calls"][0]["isError"], false, "{report}");
    assert_eq!(report["calls"][0]["text"][0], "20 + 22 = 42", "{report}");
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}

#[test]
fn dsh_uses_the_tools_of_an_http_mcp_server_sending_the_bearer_token_from_the_environment() {
    // Upstream: another dsh serving its demo tools over HTTP behind a token.
    let up = workspace();
    let server = HttpServer::start(
        &[
            "--workspace",
            s(up.path()),
            "--session",
            s(&up.path().join("up.jsonl")),
            "--token",
            "up-secret",
            "--demo-tools",
        ],
        "",
    );
    let ws = workspace();
    let policy = ws.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[mcp.servers.up]\nurl = {:?}\nbearer_token_env = \"UP_TOKEN\"\n",
            server.url
        ),
    )
    .unwrap();
    let script = script(
        ws.path(),
        "s.jsonl",
        &[
            openai(
                "",
                &[call(
                    "c1",
                    "mcp__up__echo",
                    json!({"text": "through two pipelines"}),
                )],
            ),
            openai("done", &[]),
        ],
    );
    let log = ws.path().join("log.jsonl");
    let out = run(dsh()
        .args([
            "run",
            s(&script),
            "--workspace",
            s(ws.path()),
            "--session",
            s(&log),
        ])
        .args(["--policy", s(&policy)])
        .env("UP_TOKEN", "up-secret"));
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    assert_eq!(
        result_of(&ev, "c1").text,
        "through two pipelines",
        "{}",
        out.both()
    );
    // Without the token in the environment the server is left out, saying why.
    let log2 = ws.path().join("log2.jsonl");
    let out = run(dsh()
        .args([
            "run",
            s(&script),
            "--workspace",
            s(ws.path()),
            "--session",
            s(&log2),
        ])
        .args(["--policy", s(&policy)])
        .env_remove("UP_TOKEN"));
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(out.stderr.contains("UP_TOKEN"), "{}", out.both());
    assert_eq!(
        result_of(&events(&log2), "c1").code.as_deref(),
        Some("UNKNOWN_TOOL")
    );
    let (code, stderr) = server.interrupt();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("echo"),
        "the upstream ran the call: {stderr}"
    );
}

#[test]
fn mcp_list_changed_upstream_replaces_the_gateways_tools_and_a_removed_tool_is_unknown() {
    let ws = workspace();
    let policy = ws.path().join("gateway.toml");
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/server.py");
    std::fs::write(
        &policy,
        format!(
            "[mcp.servers.py]\ncommand = \"python3\"\nargs = [{:?}]\n",
            server.display().to_string()
        ),
    )
    .unwrap();
    let log = ws.path().join("gateway.jsonl");
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
            ["mcp__py__grow", {}],
            ["?wait_for", {"tool": "mcp__py__extra"}],
            ["mcp__py__extra", {}],
            ["mcp__py__shout", {"text": "hi"}]
        ]),
    );
    let before: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    assert!(before.contains(&"mcp__py__shout"), "{report}");
    assert!(!before.contains(&"mcp__py__extra"), "{report}");
    assert_eq!(report["calls"][0]["text"][0], "grown", "{report}");
    // The server said its list changed: dsh read it again and offers the new one.
    let after = &report["calls"][1]["text"];
    assert!(
        after.as_array().unwrap().contains(&json!("mcp__py__extra")),
        "the new tool is offered: {report}"
    );
    assert!(
        !after.as_array().unwrap().contains(&json!("mcp__py__shout")),
        "the removed tool is not: {report}"
    );
    assert_eq!(report["calls"][2]["isError"], false, "{report}");
    assert_eq!(report["calls"][2]["text"][0], "extra here", "{report}");
    // A call to the tool the server no longer lists is an unknown tool, said so.
    assert_eq!(report["calls"][3]["isError"], true, "{report}");
    let text = report["calls"][3]["text"][0].as_str().unwrap_or_default();
    assert!(
        text.contains("unknown tool \"mcp__py__shout\"")
            && text.contains("MCP server `py` no longer lists it"),
        "{report}"
    );
    let ev = events(&log);
    assert_eq!(
        result_of(&ev, "mcp-3").code.as_deref(),
        Some("UNKNOWN_TOOL"),
        "{report}"
    );
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}
