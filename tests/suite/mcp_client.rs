//! The tools of MCP servers in `dsh run`, declared as `[mcp.servers.<name>]` in the policy:
//! against a server written with the Python `mcp` SDK (installed by `cargo xtask test`; these
//! tests fail, naming it, without it), started by dsh as a child process.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::support::*;

fn server_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/server.py")
}

fn require_python_mcp() {
    let probe = std::process::Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver"])
        .output()
        .expect("python3 runs");
    assert!(
        probe.status.success(),
        "the Python `mcp` SDK is missing: `pip install mcp==2.3.0` (`cargo xtask test` installs \
         it): {}",
        String::from_utf8_lossy(&probe.stderr)
    );
}

/// A policy declaring the test server as `py` (plus `extra` TOML).
fn policy(dir: &Path, extra: &str) -> PathBuf {
    require_python_mcp();
    let path = dir.join("policy.toml");
    std::fs::write(
        &path,
        format!(
            "[mcp.servers.py]\ncommand = \"python3\"\nargs = [{:?}]\n{extra}",
            server_script().display().to_string()
        ),
    )
    .unwrap();
    path
}

/// Runs `steps` (one model message each) with the Python server and `extra` policy lines in a
/// fresh workspace: what the run printed and its log's events, the run and `dsh check` having
/// passed.
fn run_steps(extra: &str, steps: &[String]) -> (Out, Vec<serde_json::Value>) {
    let ws = tempfile::tempdir().unwrap();
    let policy = policy(ws.path(), extra);
    let log = ws.path().join("log.jsonl");
    let script = script(ws.path(), "s.jsonl", steps);
    let out = run_script(&script, ws.path(), &log, &["--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
    (out, events(&log))
}

#[test]
fn the_tools_of_a_python_sdk_server_run_through_the_pipeline_and_the_log() {
    let ws = tempfile::tempdir().unwrap();
    let policy = policy(ws.path(), "");
    let log = ws.path().join("log.jsonl");
    let script = script(
        ws.path(),
        "s.jsonl",
        &[
            openai(
                "",
                &[
                    call("c1", "mcp__py__add", json!({"a": 2, "b": 3})),
                    call("c2", "mcp__py__fail", json!({"why": "testing"})),
                    call("c3", "mcp__py__picture", json!({})),
                    call("c4", "mcp__py__add", json!({"a": "two"})),
                ],
            ),
            openai("done", &[]),
        ],
    );
    let out = run_script(&script, ws.path(), &log, &["--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    let added = result_of(&ev, "c1");
    assert!(!added.is_error && added.text == "2 + 3 = 5", "{added:?}");
    // The server's `isError` result is a failure the model sees.
    let failed = result_of(&ev, "c2");
    assert!(
        failed.is_error && failed.text.contains("fail"),
        "{failed:?}"
    );
    // An image block passes as an image.
    let picture = of_type(&ev, "tool/result")
        .into_iter()
        .find(|e| e["data"]["message"]["content"][0]["toolCallId"] == "c3")
        .expect("c3's result")
        .clone();
    let block = &picture["data"]["message"]["content"][0]["content"][0];
    assert_eq!(block["type"], "image", "{picture}");
    assert_eq!(block["mimeType"], "image/png", "{picture}");
    // The server's input schema is checked before the server sees the call.
    let invalid = result_of(&ev, "c4");
    assert_eq!(invalid.code.as_deref(), Some("INVALID_ARGS"), "{invalid:?}");
    assert!(invalid.text.contains("\"b\""), "{invalid:?}");
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}

#[test]
fn permission_rules_deny_and_ask_for_mcp_tools_by_name_and_pattern() {
    let ws = tempfile::tempdir().unwrap();
    let policy = policy(
        ws.path(),
        "[permissions]\ndeny = [\"mcp__py__shout\"]\nask = [\"mcp__py__*\"]\n",
    );
    let log = ws.path().join("log.jsonl");
    let script = script(
        ws.path(),
        "s.jsonl",
        &[
            openai(
                "",
                &[
                    call("c1", "mcp__py__shout", json!({"text": "hi"})),
                    call("c2", "mcp__py__add", json!({"a": 1, "b": 1})),
                ],
            ),
            openai("done", &[]),
        ],
    );
    // No terminal, no --approve: an ask is denied (fail closed).
    let out = run_script(&script, ws.path(), &log, &["--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    let shout = result_of(&ev, "c1");
    assert!(shout.is_error && shout.text.contains("deny"), "{shout:?}");
    assert!(result_of(&ev, "c2").is_error, "asked with nobody to ask");
    // Allowed once asked, the same call runs.
    let log2 = ws.path().join("log2.jsonl");
    let out = run_script(
        &script,
        ws.path(),
        &log2,
        &["--policy", s(&policy), "--approve", "always"],
    );
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log2);
    assert!(result_of(&ev, "c1").is_error, "a deny stays a deny");
    assert_eq!(result_of(&ev, "c2").text, "1 + 1 = 2");
}

#[test]
fn a_call_past_the_servers_budget_times_out_and_the_run_goes_on() {
    let ws = tempfile::tempdir().unwrap();
    let policy = policy(ws.path(), "timeout_ms = 300\n");
    let log = ws.path().join("log.jsonl");
    let script = script(
        ws.path(),
        "s.jsonl",
        &[
            openai("", &[call("c1", "mcp__py__slow", json!({"seconds": 30}))]),
            openai("", &[call("c2", "mcp__py__add", json!({"a": 1, "b": 2}))]),
            openai("done", &[]),
        ],
    );
    let out = run_script(&script, ws.path(), &log, &["--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    let slow = result_of(&ev, "c1");
    assert_eq!(slow.code.as_deref(), Some("TOOL_TIMEOUT"), "{slow:?}");
    assert_eq!(
        result_of(&ev, "c2").text,
        "1 + 2 = 3",
        "the server still answers"
    );
}

#[test]
fn a_server_that_dies_at_start_is_a_warning_naming_it_and_the_others_still_work() {
    let ws = tempfile::tempdir().unwrap();
    let policy = policy(
        ws.path(),
        &format!(
            "[mcp.servers.broken]\ncommand = \"python3\"\nargs = [{:?}, \"--die-at-start\"]\n",
            server_script().display().to_string()
        ),
    );
    let log = ws.path().join("log.jsonl");
    let script = script(
        ws.path(),
        "s.jsonl",
        &[
            openai(
                "",
                &[
                    call("c1", "mcp__broken__add", json!({"a": 1, "b": 2})),
                    call("c2", "mcp__py__add", json!({"a": 1, "b": 2})),
                ],
            ),
            openai("done", &[]),
        ],
    );
    let out = run_script(&script, ws.path(), &log, &["--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(
        out.stderr.contains("MCP server `broken`") && out.stderr.contains("giving up"),
        "the warning names the server and what it said: {}",
        out.both()
    );
    let ev = events(&log);
    assert_eq!(
        result_of(&ev, "c1").code.as_deref(),
        Some("UNKNOWN_TOOL"),
        "{}",
        out.both()
    );
    assert_eq!(result_of(&ev, "c2").text, "1 + 2 = 3");
}

#[test]
fn dsh_tools_lists_mcp_tools_with_the_servers_schemas() {
    let ws = tempfile::tempdir().unwrap();
    let policy = policy(ws.path(), "");
    let out = dsh_run(&["tools", "--workspace", s(ws.path()), "--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    let tools: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let add = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__py__add")
        .unwrap_or_else(|| panic!("{tools:#}"));
    assert_eq!(add["function"]["description"], "Adds two whole numbers.");
    let params = &add["function"]["parameters"];
    assert_eq!(params["properties"]["a"]["type"], "integer", "{params}");
    assert_eq!(params["required"], json!(["a", "b"]), "{params}");
}

#[test]
fn a_bad_mcp_table_is_refused_with_its_line_before_anything_starts() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().join("policy.toml");
    std::fs::write(
        &path,
        "mode = \"native\"\n[mcp.servers.py]\ncommand = \"python3\"\ncomand = \"x\"\n",
    )
    .unwrap();
    let out = dsh_run(&["tools", "--workspace", s(ws.path()), "--policy", s(&path)]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("comand"), "{}", out.both());
    std::fs::write(&path, "[mcp.servers.\"a b\"]\ncommand = \"x\"\n").unwrap();
    let out = dsh_run(&["tools", "--workspace", s(ws.path()), "--policy", s(&path)]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("a b"), "{}", out.both());
}

/// `@modelcontextprotocol/server-filesystem` from npm (tests/mcp/package.json; `cargo xtask
/// test` installs it), serving `dir`.
fn npm_filesystem_policy(ws: &Path, dir: &Path) -> PathBuf {
    let server = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        server.is_file(),
        "@modelcontextprotocol/server-filesystem is missing: `npm ci` in tests/mcp (`cargo xtask \
         test` installs it)"
    );
    let path = ws.join("policy.toml");
    std::fs::write(
        &path,
        format!(
            "[mcp.servers.fs]\ncommand = \"node\"\nargs = [{:?}, {:?}]\n\
             [permissions]\nask = [\"mcp__fs__write_file\"]\n",
            server.display().to_string(),
            dir.display().to_string()
        ),
    )
    .unwrap();
    path
}

#[test]
fn the_npm_filesystem_server_reads_inside_its_roots_refuses_outside_and_writes_only_when_allowed() {
    let ws = tempfile::tempdir().unwrap();
    let served = tempfile::tempdir().unwrap();
    std::fs::write(served.path().join("hello.txt"), "hello from npm\n").unwrap();
    let outside = ws.path().join("secret.txt");
    std::fs::write(&outside, "not yours\n").unwrap();
    let policy = npm_filesystem_policy(ws.path(), served.path());
    let log = ws.path().join("log.jsonl");
    let hello = served.path().join("hello.txt");
    let written = served.path().join("new.txt");
    let script = script(
        ws.path(),
        "s.jsonl",
        &[
            openai(
                "",
                &[
                    call("c1", "mcp__fs__read_text_file", json!({"path": s(&hello)})),
                    call(
                        "c2",
                        "mcp__fs__read_text_file",
                        json!({"path": s(&outside)}),
                    ),
                    call(
                        "c3",
                        "mcp__fs__write_file",
                        json!({"path": s(&written), "content": "x"}),
                    ),
                ],
            ),
            openai("done", &[]),
        ],
    );
    let out = run_script(&script, ws.path(), &log, &["--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    let read = result_of(&ev, "c1");
    assert!(
        !read.is_error && read.text.contains("hello from npm"),
        "{read:?}"
    );
    // The server's own check: a path outside its roots is its error, not dsh's.
    let refused = result_of(&ev, "c2");
    assert!(
        refused.is_error && !refused.text.contains("not yours"),
        "{refused:?}"
    );
    // The rule asks; with nobody to ask, nothing is written.
    assert!(result_of(&ev, "c3").is_error);
    assert!(!written.exists(), "a denied write never reached the server");
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}

/// The Python test server over streamable HTTP on a free port, ended when dropped; its port.
pub(super) fn http_server() -> (impl Drop, u16) {
    require_python_mcp();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = std::process::Command::new("python3")
        .arg(server_script())
        .args(["--http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // Ready once it accepts connections.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the server never listened"
        );
        assert!(server.try_wait().unwrap().is_none(), "the server exited");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    (Kill(server), port)
}

#[test]
fn a_python_sdk_server_over_streamable_http_serves_its_tools() {
    let (_server, port) = http_server();
    let ws = tempfile::tempdir().unwrap();
    let policy = ws.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!("[mcp.servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\n"),
    )
    .unwrap();
    let log = ws.path().join("log.jsonl");
    let script = script(
        ws.path(),
        "s.jsonl",
        &[
            openai("", &[call("c1", "mcp__web__add", json!({"a": 40, "b": 2}))]),
            openai("done", &[]),
        ],
    );
    let out = run_script(&script, ws.path(), &log, &["--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert_eq!(
        result_of(&events(&log), "c1").text,
        "40 + 2 = 42",
        "{}",
        out.both()
    );
}

#[test]
fn code_mode_calls_mcp_tools_as_bindings_each_a_sub_call_through_the_pipeline() {
    let ws = tempfile::tempdir().unwrap();
    let policy = policy(ws.path(), "");
    let log = ws.path().join("log.jsonl");
    let code = "const r = await tools.mcp__py__add({a: 5, b: 6}); console.log(JSON.stringify(r));";
    let script = script(
        ws.path(),
        "s.jsonl",
        &[
            openai(
                "",
                &[call(
                    "c1",
                    "run_code",
                    json!({"description": "add", "code": code}),
                )],
            ),
            openai("done", &[]),
        ],
    );
    let out = run_script(
        &script,
        ws.path(),
        &log,
        &["--policy", s(&policy), "--mode", "code"],
    );
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    let result = result_of(&ev, "c1");
    assert!(
        !result.is_error && result.text.contains("5 + 6 = 11"),
        "{result:?}"
    );
    assert!(
        out.stdout.contains("↳ ✓ mcp__py__add"),
        "the sub-call ran through the pipeline: {}",
        out.both()
    );
}

#[test]
fn a_server_that_dies_mid_call_fails_that_call_with_its_exit_status_and_is_started_again() {
    let (out, ev) = run_steps(
        "",
        &[
            openai("", &[call("c1", "mcp__py__crash", json!({}))]),
            openai("", &[call("c2", "mcp__py__add", json!({"a": 1, "b": 1}))]),
            openai("done", &[]),
        ],
    );
    let crashed = result_of(&ev, "c1");
    assert!(
        crashed.is_error
            && crashed.text.contains("MCP server `py` exited")
            && crashed.text.contains('7')
            && crashed.text.contains("crashing on purpose"),
        "the failure names the server, its status and its last words: {crashed:?}"
    );
    assert_eq!(
        result_of(&ev, "c2").text,
        "1 + 1 = 2",
        "the next call goes to a new process: {}",
        out.both()
    );
}

#[test]
fn mcp_a_restarted_server_s_new_tool_list_is_what_the_next_step_offers_and_runs() {
    let ws = tempfile::tempdir().unwrap();
    let starts = ws.path().join("starts.txt");
    let policy = policy(
        ws.path(),
        &format!(
            "[mcp.servers.py.env]\nDSH_TEST_STARTS = {:?}\n",
            starts.display().to_string()
        ),
    );
    let log = ws.path().join("log.jsonl");
    let script = script(
        ws.path(),
        "s.jsonl",
        &[
            openai("", &[call("c1", "mcp__py__crash", json!({}))]),
            // Started again for this call, the server lists `reborn` instead of `shout`.
            openai("", &[call("c2", "mcp__py__add", json!({"a": 1, "b": 1}))]),
            openai(
                "",
                &[
                    call("c3", "mcp__py__reborn", json!({})),
                    call("c4", "mcp__py__shout", json!({"text": "hi"})),
                ],
            ),
            openai("done", &[]),
        ],
    );
    let out = run_script(&script, ws.path(), &log, &["--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    assert!(result_of(&ev, "c1").is_error);
    assert_eq!(result_of(&ev, "c2").text, "1 + 1 = 2", "{}", out.both());
    assert_eq!(result_of(&ev, "c3").text, "reborn here", "{}", out.both());
    let gone = result_of(&ev, "c4");
    assert_eq!(gone.code.as_deref(), Some("UNKNOWN_TOOL"), "{gone:?}");
    assert!(
        gone.text.contains("MCP server `py` no longer lists it"),
        "{gone:?}"
    );
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}

#[test]
fn mcp_progress_notifications_restart_the_calls_timeout_and_show_on_its_line() {
    let (out, ev) = run_steps(
        "timeout_ms = 800\n",
        &[
            // 2.4 s in all, past the 0.8 s budget, with progress every 0.3 s.
            openai(
                "",
                &[call(
                    "c1",
                    "mcp__py__progressing",
                    json!({"seconds": 2.4, "steps": 8}),
                )],
            ),
            // The same work with its only progress at the end: the budget ends it.
            openai(
                "",
                &[call(
                    "c2",
                    "mcp__py__progressing",
                    json!({"seconds": 2.4, "steps": 1}),
                )],
            ),
            openai("done", &[]),
        ],
    );
    let kept = result_of(&ev, "c1");
    assert!(
        !kept.is_error && kept.text == "done after 8 steps",
        "progress kept the call alive: {kept:?}"
    );
    let cut = result_of(&ev, "c2");
    assert_eq!(cut.code.as_deref(), Some("TOOL_TIMEOUT"), "{cut:?}");
    assert!(
        out.stdout.contains("⋯ mcp__py__progressing 1/8 step 1"),
        "the progress is shown: {}",
        out.both()
    );
}

#[test]
fn mcp_structured_content_is_checked_against_the_tools_output_schema() {
    let (_, ev) = run_steps(
        "",
        &[
            openai(
                "",
                &[
                    call("c1", "mcp__py__reading", json!({"place": "Oslo"})),
                    call("c2", "mcp__py__bad_reading", json!({"place": "Oslo"})),
                ],
            ),
            openai("done", &[]),
        ],
    );
    let good = result_of(&ev, "c1");
    assert!(!good.is_error, "{good:?}");
    let seen: serde_json::Value =
        serde_json::from_str(&good.text).expect("the JSON the model sees");
    assert_eq!(seen, json!({"celsius": 21.5, "place": "Oslo"}), "{good:?}");
    let bad = result_of(&ev, "c2");
    assert!(
        bad.is_error
            && bad.text.contains("does not match its outputSchema")
            && bad.text.contains("celsius"),
        "{bad:?}"
    );
    assert!(
        !bad.text.contains("warm in Oslo"),
        "its content is not passed on: {bad:?}"
    );
}

#[test]
fn mcp_a_call_dsh_cancels_is_abandoned_upstream_with_notifications_cancelled() {
    let ws = tempfile::tempdir().unwrap();
    let policy = policy(ws.path(), "");
    let log = ws.path().join("log.jsonl");
    let events_file = ws.path().join("events.txt");
    let script = script(
        ws.path(),
        "s.jsonl",
        &[
            openai(
                "",
                &[call(
                    "h1",
                    "mcp__py__hold",
                    json!({"seconds": 60, "tag": "h1"}),
                )],
            ),
            openai("done", &[]),
        ],
    );
    let mut live = Live::spawn(
        dsh()
            .args([
                "run",
                s(&script),
                "--workspace",
                s(ws.path()),
                "--session",
                s(&log),
            ])
            .args(["--policy", s(&policy), "--json"])
            .env("DSH_TEST_EVENTS", &events_file),
    );
    live.until(|l| l.contains("\"tool/call\""));
    // The call is running upstream; then the person interrupts dsh (the first Ctrl-C cancels
    // the turn).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&events_file)
        .unwrap_or_default()
        .lines()
        .any(|l| l == "started h1")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the call never started upstream"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let pid = live.child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let code = wait(live.child);
    assert_eq!(code, 130);
    let text = std::fs::read_to_string(&events_file).unwrap();
    assert!(
        text.lines().any(|l| l == "notifications/cancelled for h1"),
        "the server heard notifications/cancelled for the call before dsh ended: {text}"
    );
    // dsh ended the server as the stdio transport asks (its input closed, then a wait for it
    // to exit), not with a signal that could cut off what it had not read yet.
    let said = |line: &str| text.lines().position(|l| l == line);
    assert!(
        said("exited on its own") > said("notifications/cancelled for h1"),
        "the server exited on its own after hearing the cancel: {text}"
    );
    let ev = events(&log);
    assert_eq!(result_of(&ev, "h1").code.as_deref(), Some("ABORTED"));
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}

/// Runs `steps` with the Python server (its events file in the workspace) and `extra` policy
/// lines, and `args` for `dsh run`: the run, its log's events, the events file, the workspace.
fn run_failing(
    extra: &str,
    args: &[&str],
    steps: &[String],
) -> (Out, Vec<serde_json::Value>, String, tempfile::TempDir) {
    let ws = tempfile::tempdir().unwrap();
    let policy = policy(ws.path(), extra);
    let log = ws.path().join("log.jsonl");
    let events_file = ws.path().join("events.txt");
    let script = script(ws.path(), "s.jsonl", steps);
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
        .args(args)
        .env("DSH_TEST_EVENTS", &events_file));
    assert_eq!(out.code, 0, "{}", out.both());
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
    let text = std::fs::read_to_string(&events_file).unwrap_or_default();
    (out, events(&log), text, ws)
}

#[test]
fn mcp_a_tool_that_claims_readonlyhint_but_writes_is_still_under_the_rules() {
    let tidy = || {
        vec![
            openai("", &[call("t1", "mcp__py__tidy", json!({"tag": "t1"}))]),
            openai("done", &[]),
        ]
    };
    // An ask rule asks though the tool claims to be read-only; with nobody to ask it is denied
    // and the server never runs it.
    let (_, ev, written, _ws) =
        run_failing("[permissions]\nask = [\"mcp__py__tidy\"]\n", &[], &tidy());
    let r = result_of(&ev, "t1");
    assert!(r.is_error && r.text.contains("approval"), "{r:?}");
    assert!(!written.contains("wrote"), "{written}");
    // A default deny is not lifted by the claim either.
    let (_, ev, written, _ws) = run_failing(
        "[permissions]\ndefault = \"deny\"\nallow = [\"mcp__py__add\"]\n",
        &[],
        &tidy(),
    );
    assert!(result_of(&ev, "t1").is_error);
    assert!(!written.contains("wrote"), "{written}");
    // Allowed, it does write: the claim was a lie, and only the rules decided.
    let (_, ev, written, _ws) = run_failing("", &["--approve", "always"], &tidy());
    assert_eq!(result_of(&ev, "t1").text, "tidied t1");
    assert!(written.contains("wrote t1"), "{written}");
}

#[test]
fn mcp_a_huge_result_shows_its_head_and_saves_the_whole_text_in_a_file_it_names() {
    let steps = [
        openai("", &[call("h1", "mcp__py__huge", json!({"megabytes": 8}))]),
        openai("", &[call("a1", "mcp__py__add", json!({"a": 1, "b": 1}))]),
        openai("done", &[]),
    ];
    let (_, ev, _, ws) = run_failing("", &[], &steps);
    let r = result_of(&ev, "h1");
    assert!(!r.is_error, "{r:?}");
    assert!(r.text.starts_with("line 00000000 "), "the head is kept");
    assert!(r.text.len() < 31_000, "{} bytes shown", r.text.len());
    let note = r.text.lines().last().unwrap();
    assert!(
        note.starts_with("[result cut: 30000 of 8000000 bytes of text shown; all of it is in "),
        "{note}"
    );
    let path = note
        .trim_end_matches(']')
        .rsplit("all of it is in ")
        .next()
        .unwrap();
    let saved = std::fs::read_to_string(path).unwrap();
    assert_eq!(saved.len(), 8_000_000);
    assert!(saved.ends_with(&format!("line {:08} {}\n", 79_999, "x".repeat(85))));
    // The log holds what was shown, not the 8 MB.
    let log_size = std::fs::metadata(ws.path().join("log.jsonl"))
        .unwrap()
        .len();
    assert!(log_size < 200_000, "{log_size} bytes of log");
    assert_eq!(result_of(&ev, "a1").text, "1 + 1 = 2");
}

#[test]
fn mcp_a_message_past_the_size_limit_fails_its_call_naming_the_server_and_the_next_call_works() {
    let steps = [
        openai("", &[call("h1", "mcp__py__huge", json!({"megabytes": 17}))]),
        openai("", &[call("a1", "mcp__py__add", json!({"a": 2, "b": 2}))]),
        openai("done", &[]),
    ];
    let (_, ev, _, _ws) = run_failing("", &[], &steps);
    let r = result_of(&ev, "h1");
    assert!(r.is_error, "{r:?}");
    assert_ne!(
        r.code.as_deref(),
        Some("TOOL_TIMEOUT"),
        "no wait for the timeout: {r:?}"
    );
    assert!(
        r.text.contains(
            "MCP server `py` broke the protocol: it sent a message longer than 16777216 bytes"
        ),
        "{r:?}"
    );
    assert_eq!(
        result_of(&ev, "a1").text,
        "2 + 2 = 4",
        "started again for the next call"
    );
}

#[test]
fn mcp_invalid_json_rpc_from_a_server_fails_the_call_naming_the_server_without_waiting() {
    for (kind, says) in [
        (
            "not-json",
            "it sent a line that is not JSON: `this is not json {`",
        ),
        (
            "not-jsonrpc",
            "it sent JSON that is not a JSON-RPC message: `{\"hello\": \"world\"}`",
        ),
    ] {
        let steps = [
            openai("", &[call("g1", "mcp__py__garble", json!({"kind": kind}))]),
            openai("", &[call("a1", "mcp__py__add", json!({"a": 3, "b": 3}))]),
            openai("done", &[]),
        ];
        // The call's budget is a minute: the answer must not wait for it.
        let (_, ev, _, _ws) = run_failing("", &[], &steps);
        let r = result_of(&ev, "g1");
        assert!(r.is_error, "{r:?}");
        assert!(
            r.text
                .contains(&format!("MCP server `py` broke the protocol: {says}")),
            "{r:?}"
        );
        assert_eq!(
            result_of(&ev, "a1").text,
            "3 + 3 = 6",
            "started again for the next call"
        );
    }
}

#[test]
fn mcp_an_http_server_that_dies_mid_call_fails_that_call_and_the_next_in_words_naming_its_url() {
    let (_server, port) = http_server();
    let ws = tempfile::tempdir().unwrap();
    let policy = ws.path().join("policy.toml");
    let url = format!("http://127.0.0.1:{port}/mcp");
    std::fs::write(&policy, format!("[mcp.servers.web]\nurl = \"{url}\"\n")).unwrap();
    let log = ws.path().join("log.jsonl");
    let script = script(
        ws.path(),
        "s.jsonl",
        &[
            openai("", &[call("c1", "mcp__web__crash", json!({}))]),
            openai("", &[call("c2", "mcp__web__add", json!({"a": 1, "b": 2}))]),
            openai("done", &[]),
        ],
    );
    let out = run_script(&script, ws.path(), &log, &["--policy", s(&policy)]);
    let ev = events(&log);
    let (died, next) = (result_of(&ev, "c1"), result_of(&ev, "c2"));
    assert!(
        died.is_error
            && died.text.contains(&format!(
                "its connection over streamable HTTP at {url} closed"
            )),
        "{died:?}"
    );
    assert!(
        next.is_error && next.text.contains(&url) && next.text.contains("Connection refused"),
        "{next:?}"
    );
    for said in [&died.text, &next.text, &out.stderr] {
        assert!(
            !said.contains("rmcp::") && !said.contains("Transport ["),
            "no library type names: {said}"
        );
    }
    assert!(
        !out.stderr.contains("WARN"),
        "the library's own warnings are not shown: {}",
        out.stderr
    );
}
