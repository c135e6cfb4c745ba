//! `dsh agent` through the real binary against the mock provider server (real HTTP and SSE in
//! DeepSeek's, OpenAI's and Anthropic's wire formats), and `dsh sessions`.

use std::path::Path;

use dsh_test_support::mock_provider::{MockProvider, Reply, anthropic, openai};
use serde_json::Value;

use super::support::*;

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "the answer is 42\n").unwrap();
    ws
}

/// `dsh agent` in `ws` against `base_url`, with `DEEPSEEK_API_KEY=sk-test` unless `env` says
/// otherwise.
fn agent(ws: &Path, base_url: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = dsh();
    cmd.arg("agent")
        .args(["--workspace", s(ws)])
        .env_remove("DEEPSEEK_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env("DEEPSEEK_API_KEY", "sk-test");
    if let Some(url) = base_url {
        cmd.args(["--base-url", url]);
    }
    cmd.args(args);
    for (k, v) in env {
        if v.is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    run(&mut cmd)
}

/// The model reads `notes.txt`, then answers.
fn read_then_answer(mock: &MockProvider) {
    let mut call = vec![openai::role()];
    call.extend(openai::tool_call(
        0,
        "call_1",
        "read",
        &["{\"file_path\"", ": \"notes.txt\"}"],
    ));
    call.extend(openai::finish("tool_calls", 40, 12));
    mock.push(Reply::Stream(call));
    mock.push(openai::text_reply(&["The answer ", "is 42."]));
}

/// The log a run names on its last stderr line.
fn log_of(out: &Out) -> std::path::PathBuf {
    let line = out
        .stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("log: "))
        .unwrap_or_else(|| panic!("no log line: {}", out.both()));
    std::path::PathBuf::from(line)
}

#[test]
fn loop_agent_one_turn_reads_a_file_prints_the_final_text_and_logs_a_clean_session() {
    let srv = mock_server();
    srv.mock.require_key("sk-test");
    read_then_answer(&srv.mock);
    let ws = workspace();
    let out = agent(
        ws.path(),
        Some(&srv.mock.openai_base_url()),
        &["What is the answer in notes.txt?"],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.both());
    assert_eq!(out.stdout, "The answer is 42.\n", "{}", out.both());
    assert!(out.stderr.contains("read notes.txt"), "{}", out.both());
    let bodies = srv.mock.bodies();
    assert_eq!(bodies.len(), 2, "{bodies:#?}");
    assert_eq!(bodies[0]["model"], "deepseek-chat");
    let first = bodies[0]["messages"].as_array().unwrap();
    assert_eq!(first[0]["role"], "system");
    assert_eq!(first[1]["content"], "What is the answer in notes.txt?");
    let tools: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        tools.contains(&"read") && tools.contains(&"bash"),
        "{tools:?}"
    );
    // The tool's result went back to the model, paired with its call.
    let second = bodies[1]["messages"].as_array().unwrap();
    let result = second
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool message");
    assert_eq!(result["tool_call_id"], "call_1");
    assert!(
        result["content"]
            .as_str()
            .is_some_and(|c| c.contains("the answer is 42")),
        "{result}"
    );
    let log = log_of(&out);
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}

#[test]
fn agent_json_prints_one_durable_event_per_line_and_no_bare_text() {
    let srv = mock_server();
    read_then_answer(&srv.mock);
    let ws = workspace();
    let out = agent(
        ws.path(),
        Some(&srv.mock.openai_base_url()),
        &["--json", "What is the answer?"],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.both());
    let events: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let at = |t: &str| {
        types
            .iter()
            .position(|x| *x == t)
            .unwrap_or_else(|| panic!("no {t}: {types:?}"))
    };
    assert!(at("turn/start") < at("user/message"), "{types:?}");
    assert!(at("user/message") < at("assistant/message"), "{types:?}");
    assert!(at("tool/call") < at("tool/result"), "{types:?}");
    assert_eq!(types.last(), Some(&"turn/end"), "{types:?}");
    assert_eq!(types.iter().filter(|t| **t == "tool/result").count(), 1);
}

#[test]
fn agent_resume_continues_the_last_session_with_its_history_and_sessions_lists_it() {
    let srv = mock_server();
    srv.mock.push(openai::text_reply(&["First answer."]));
    srv.mock.push(openai::text_reply(&["Second answer."]));
    let ws = workspace();
    let state = tempfile::tempdir().unwrap();
    let env = [("XDG_STATE_HOME", s(state.path()))];
    let url = srv.mock.openai_base_url();
    let first = agent(ws.path(), Some(&url), &["first question"], &env);
    assert_eq!(first.code, 0, "{}", first.both());
    let second = agent(
        ws.path(),
        Some(&url),
        &["--resume", "--", "second question"],
        &env,
    );
    assert_eq!(second.code, 0, "{}", second.both());
    assert_eq!(second.stdout, "Second answer.\n");
    assert_eq!(log_of(&first), log_of(&second), "the same log goes on");
    let bodies = srv.mock.bodies();
    let history: Vec<String> = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{}: {}", m["role"].as_str().unwrap_or("?"), m["content"]))
        .collect();
    assert!(
        history.iter().any(|m| m.contains("first question"))
            && history.iter().any(|m| m.contains("First answer."))
            && history
                .last()
                .is_some_and(|m| m.contains("second question")),
        "{history:#?}"
    );
    let listed = run(dsh()
        .args(["sessions", "--workspace", s(ws.path())])
        .env("XDG_STATE_HOME", state.path()));
    assert_eq!(listed.code, 0, "{}", listed.both());
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", listed.stdout);
    let id = log_of(&first)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap()
        .to_owned();
    assert!(lines[0].starts_with(&id), "{}", listed.stdout);
    assert!(lines[0].ends_with("first question"), "{}", listed.stdout);
    let check = dsh_run(&["check", s(&log_of(&second))]);
    assert_eq!(check.code, 0, "{}", check.both());
}

#[test]
fn agent_resume_whose_request_fails_prints_no_earlier_answer() {
    // A script reading stdout took the last turn's answer ("First answer.") for the answer to
    // a prompt whose request never reached a model.
    let srv = mock_server();
    srv.mock.push(openai::text_reply(&["First answer."]));
    let ws = workspace();
    let state = tempfile::tempdir().unwrap();
    let env = [("XDG_STATE_HOME", s(state.path()))];
    let first = agent(
        ws.path(),
        Some(&srv.mock.openai_base_url()),
        &["first question"],
        &env,
    );
    assert_eq!(first.code, 0, "{}", first.both());
    assert_eq!(first.stdout, "First answer.\n");
    let failed = agent(
        ws.path(),
        Some("http://127.0.0.1:9/v1"),
        &["--resume", "--", "second question"],
        &env,
    );
    assert_eq!(failed.code, 2, "{}", failed.both());
    assert_eq!(failed.stdout, "", "{}", failed.both());
    assert!(
        failed.stderr.contains("cannot connect"),
        "{}",
        failed.both()
    );
}

#[test]
fn an_answer_lost_to_a_full_disk_is_an_error_not_a_panic() {
    // `dsh agent "..." > /dev/full` panicked (`println!`) with exit 101 once the turn ended.
    let srv = mock_server();
    srv.mock.push(openai::text_reply(&["An answer."]));
    let ws = workspace();
    let state = tempfile::tempdir().unwrap();
    let full = std::fs::File::create("/dev/full").expect("/dev/full");
    let out = dsh()
        .arg("agent")
        .args(["--workspace", s(ws.path())])
        .args(["--base-url", &srv.mock.openai_base_url()])
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env("DEEPSEEK_API_KEY", "sk-test")
        .env("XDG_STATE_HOME", s(state.path()))
        .arg("a question")
        .stdin(std::process::Stdio::null())
        .stdout(full)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("dsh: cannot write to standard output: No space left on device"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn agent_resume_of_an_unknown_session_is_one_sentence_and_exit_2() {
    let ws = workspace();
    let state = tempfile::tempdir().unwrap();
    let out = agent(
        ws.path(),
        Some("http://127.0.0.1:9/v1"),
        &["--resume", "nope", "hi"],
        &[("XDG_STATE_HOME", s(state.path()))],
    );
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("no such session"), "{}", out.both());
}

#[test]
fn agent_without_a_key_names_the_variable_and_exits_2_before_any_log() {
    let ws = workspace();
    let state = tempfile::tempdir().unwrap();
    let out = agent(
        ws.path(),
        None,
        &["hi"],
        &[
            ("DEEPSEEK_API_KEY", ""),
            ("XDG_STATE_HOME", s(state.path())),
        ],
    );
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("DEEPSEEK_API_KEY"), "{}", out.both());
    assert_eq!(
        out.stderr.lines().count(),
        1,
        "one sentence: {}",
        out.both()
    );
    assert!(
        !state.path().join("dsh").exists(),
        "nothing was written before the key was checked"
    );
}

#[test]
fn agent_against_a_closed_port_says_it_cannot_connect_and_exits_2() {
    let ws = workspace();
    // A port nothing listens on: bind one, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = agent(
        ws.path(),
        Some(&format!("http://127.0.0.1:{port}/v1")),
        &["hi"],
        &[],
    );
    assert_eq!(out.code, 2, "{}", out.both());
    let last = out.stderr.lines().last().unwrap_or_default();
    assert!(last.contains("cannot connect"), "{}", out.both());
    assert!(!out.stderr.contains("panicked"), "{}", out.both());
}

#[test]
fn agent_with_a_refused_key_or_an_html_answer_is_one_sentence_and_exit_2() {
    let srv = mock_server();
    srv.mock.require_key("sk-right");
    let ws = workspace();
    let refused = agent(
        ws.path(),
        Some(&srv.mock.openai_base_url()),
        &["hi"],
        &[("DEEPSEEK_API_KEY", "sk-wrong")],
    );
    assert_eq!(refused.code, 2, "{}", refused.both());
    assert!(
        refused.stderr.contains("refused the API key"),
        "{}",
        refused.both()
    );
    let log = refused
        .stderr
        .lines()
        .last()
        .and_then(|l| l.rsplit_once("(log: "))
        .map(|(_, p)| p.trim_end_matches(')').to_owned())
        .unwrap_or_else(|| panic!("the log is named: {}", refused.both()));
    let check = dsh_run(&["check", &log]);
    assert_eq!(check.code, 0, "{}", check.both());

    let srv = mock_server();
    srv.mock.push(Reply::Status {
        status: 200,
        headers: vec![("content-type".into(), "text/html".into())],
        body: "<html><body>Welcome to the proxy</body></html>".into(),
    });
    let html = agent(ws.path(), Some(&srv.mock.openai_base_url()), &["hi"], &[]);
    assert_eq!(html.code, 2, "{}", html.both());
    let last = html.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("dsh: ")
            && last.contains("a web page (text/html)")
            && last.contains("Welcome to the proxy"),
        "one sentence: {}",
        html.both()
    );
}

#[test]
fn agent_talks_to_anthropic_in_its_own_wire_format() {
    let srv = mock_server();
    srv.mock
        .push(anthropic::text_reply(&["Hello from ", "Claude."]));
    let ws = workspace();
    let out = agent(
        ws.path(),
        Some(&srv.mock.anthropic_base_url()),
        &["--provider", "anthropic", "--model", "claude-test", "hi"],
        &[("ANTHROPIC_API_KEY", "sk-ant")],
    );
    assert_eq!(out.code, 0, "{}", out.both());
    assert_eq!(out.stdout, "Hello from Claude.\n");
    let requests = srv.mock.requests();
    assert_eq!(requests[0].header("x-api-key"), Some("sk-ant"));
    assert_eq!(srv.mock.bodies()[0]["model"], "claude-test");
}

#[test]
fn agent_reads_provider_and_model_from_a_trusted_workspace_config_file() {
    let srv = mock_server();
    srv.mock.push(openai::text_reply(&["ok"]));
    let ws = workspace();
    std::fs::create_dir_all(ws.path().join(".dsh")).unwrap();
    std::fs::write(
        ws.path().join(".dsh/config.toml"),
        format!(
            "provider = \"openai\"\nmodel = \"gpt-test\"\nbase_url = \"{}\"\napi_key_env = \"MY_KEY\"\n",
            srv.mock.openai_base_url()
        ),
    )
    .unwrap();
    // The file names a URL and a key variable: it applies once the workspace is trusted.
    let out = agent(
        ws.path(),
        None,
        &["--trust-workspace", "hi"],
        &[("MY_KEY", "sk-mine")],
    );
    assert_eq!(out.code, 0, "{}", out.both());
    assert_eq!(srv.mock.bodies()[0]["model"], "gpt-test");
    assert_eq!(
        srv.mock.requests()[0].header("authorization"),
        Some("Bearer sk-mine")
    );
    std::fs::write(ws.path().join(".dsh/config.toml"), "modle = \"x\"\n").unwrap();
    let bad = agent(ws.path(), None, &["hi"], &[]);
    assert_eq!(bad.code, 2, "{}", bad.both());
    assert!(
        bad.stderr.contains("config.toml") && bad.stderr.contains("modle"),
        "{}",
        bad.both()
    );
    // Prices for the status line: a negative one, and one without the other, are refused by
    // name before any request.
    for (text, says) in [
        (
            "input_price = 0.27\noutput_price = -1.0\n",
            "line 2: output_price must be",
        ),
        (
            "input_price = 0.27\n",
            "input_price and output_price go together",
        ),
    ] {
        std::fs::write(ws.path().join(".dsh/config.toml"), text).unwrap();
        let bad = agent(ws.path(), None, &["hi"], &[]);
        assert_eq!(bad.code, 2, "{}", bad.both());
        assert!(bad.stderr.contains(says), "{}", bad.both());
    }
    assert_eq!(srv.mock.bodies().len(), 1);
}
