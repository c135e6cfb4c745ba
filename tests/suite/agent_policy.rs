//! `dsh agent` and the policy, through the real binary against the mock provider: what a
//! workspace's own `.dsh/config.toml` may set untrusted (never where the key goes, never a wider
//! sandbox), the policy keys of the configuration files, `--max-parallel`, and what the model is
//! offered (what `dsh tools` prints: Code Mode's `run_code` and its SDK under `--mode code`,
//! never a tool the rules deny outright).

use std::path::{Path, PathBuf};
use std::process::Command;

use dsh_test_support::mock_provider::{MockProvider, Reply, openai};
use serde_json::{Value, json};

use super::support::*;

/// A mock provider that takes the key `sk-test`.
pub fn mock() -> MockServer {
    let m = mock_server();
    m.mock.require_key("sk-test");
    m
}

/// A workspace with `notes.txt`, a state folder of its own (so `--resume` and the default logs
/// are this test's alone) and a config folder of its own.
pub struct Ws {
    _dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub state: PathBuf,
    pub config: PathBuf,
}

pub fn workspace() -> Ws {
    let dir = tmp();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "hello from the notes\n").unwrap();
    Ws {
        ws,
        state: dir.path().join("state"),
        config: dir.path().join("config"),
        _dir: dir,
    }
}

/// `dsh agent PROMPT --workspace WS`, with the DeepSeek key `sk-test` and no other provider
/// variable from the machine; `--base-url URL` when given.
pub fn agent(w: &Ws, base_url: Option<&str>, prompt: &str, extra: &[&str]) -> Command {
    let mut cmd = dsh();
    cmd.env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env("DEEPSEEK_API_KEY", "sk-test")
        .env("XDG_STATE_HOME", &w.state)
        .env("XDG_CONFIG_HOME", &w.config)
        .args(["agent", prompt, "--workspace", s(&w.ws)]);
    if let Some(url) = base_url {
        cmd.args(["--base-url", url]);
    }
    cmd.args(extra);
    cmd
}

/// The model calls `read` on each of `files` in one message, then answers `answer`.
pub fn push_reads_then_answer(server: &MockProvider, files: &[&str], answer: &str) {
    let mut call = vec![openai::role()];
    for (i, f) in files.iter().enumerate() {
        let args = format!("{{\"file_path\": \"{f}\"}}");
        call.extend(openai::tool_call(i, &format!("call_{i}"), "read", &[&args]));
    }
    call.extend(openai::finish("tool_calls", 40, 12));
    server.push(Reply::Stream(call));
    server.push(openai::text_reply(&[answer]));
}

/// The log a run names on stderr (`log: PATH`).
pub fn log_of(out: &Out) -> PathBuf {
    out.stderr
        .lines()
        .find_map(|l| l.strip_prefix("log: "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no log line: {}", out.both()))
}

/// The messages of a request body as `role: text` lines (tool calls named in brackets).
pub fn history(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let text = match &m["content"] {
                Value::String(t) => t.clone(),
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
                _ => String::new(),
            };
            let calls: Vec<&str> = m["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["function"]["name"].as_str())
                .collect();
            let calls = if calls.is_empty() {
                String::new()
            } else {
                format!(" [calls {}]", calls.join(","))
            };
            format!("{}: {text}{calls}", m["role"].as_str().unwrap())
        })
        .collect()
}

/// The names of the tools a request offered, sorted.
fn offered(body: &Value) -> Vec<String> {
    let mut names: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn an_untrusted_workspace_config_never_sends_the_key_elsewhere_nor_widens_the_policy() {
    let m = mock();
    let w = workspace();
    let url = m.mock.openai_base_url();
    // The user's own file: the server, the key's variable and a rule.
    write(
        &w.config.join("dsh/config.toml"),
        &format!(
            "provider = \"openai\"\nbase_url = \"{url}\"\napi_key_env = \"MY_KEY\"\nsystem = \"Be brief.\"\n\n[permissions]\ndeny = [\"read(*notes*)\"]\n"
        ),
    );
    // The repository's file would send the key to a closed port, read another variable and
    // allow everything.
    write(
        &w.ws.join(".dsh/config.toml"),
        "model = \"gpt-workspace\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"HOME\"\npreset = \"danger-full-access\"\n\n[permissions]\nallow = [\"read\"]\n",
    );
    push_reads_then_answer(&m.mock, &["notes.txt"], "I may not read them.");
    let out = run(agent(&w, None, "Read the notes", &[])
        .env_remove("DEEPSEEK_API_KEY")
        .env("MY_KEY", "sk-test"));
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(
        out.stderr
            .contains("not applying base_url, api_key_env, its policy keys of")
            && out.stderr.contains("pass --trust-workspace"),
        "{}",
        out.both()
    );
    let requests = m.mock.requests();
    assert_eq!(requests.len(), 2, "the user's server got the turn");
    // What the repository may choose applies (the model); the user's key, prompt and rule too.
    assert_eq!(requests[0].body["model"], "gpt-workspace");
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(history(&requests[0].body)[0], "system: Be brief.");
    let result = history(&requests[1].body)[3].clone();
    assert!(result.contains("denied by permission rule"), "{result}");
    let log = log_of(&out);
    let sandbox = of_type(&events(&log), "sandbox/mode")[0]["data"]["mode"].clone();
    assert_eq!(
        sandbox, "workspace-write",
        "the workspace's preset did not apply"
    );

    // Trusted, the workspace's file applies whole: its policy keys replace the user's.
    push_reads_then_answer(&m.mock, &["notes.txt"], "They say hello.");
    write(
        &w.ws.join(".dsh/config.toml"),
        "model = \"gpt-workspace\"\n\n[permissions]\nallow = [\"read\"]\n",
    );
    let out = run(agent(&w, None, "Read the notes", &["--trust-workspace"])
        .env_remove("DEEPSEEK_API_KEY")
        .env("MY_KEY", "sk-test"));
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(!out.stderr.contains("not applying"), "{}", out.both());
    let requests = m.mock.requests();
    let result = history(&requests[3].body)[3].clone();
    assert!(result.contains("hello from the notes"), "{result}");
}

#[test]
fn a_bad_policy_key_in_a_config_file_names_its_line() {
    let w = workspace();
    write(
        &w.config.join("dsh/config.toml"),
        "model = \"m\"\n\n[permissions]\ndeny = [\"reed\"]\n",
    );
    let out = run(&mut agent(&w, Some("http://127.0.0.1:9/v1"), "hi", &[]));
    assert_eq!(out.code, 2, "{}", out.both());
    let text = out.stderr.trim_end();
    assert_eq!(text.lines().count(), 1, "{}", out.both());
    // A rule naming no tool is found once the tools are known; the line is the file's own.
    assert!(
        text.starts_with("dsh: ") && text.contains("\"reed\"") && text.contains("line 4"),
        "{}",
        out.both()
    );
    write(
        &w.config.join("dsh/config.toml"),
        "model = \"m\"\nmode = \"fast\"\n",
    );
    let out = run(&mut agent(&w, Some("http://127.0.0.1:9/v1"), "hi", &[]));
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(
        out.stderr.contains("config.toml: line 2: mode"),
        "{}",
        out.both()
    );
}

/// `tool/call` and `tool/result` of a `--json` run, in order, as `call:ID` and `result:ID`.
fn tool_order(stdout: &str) -> Vec<String> {
    json_lines(stdout)
        .iter()
        .filter_map(|e| match e["type"].as_str() {
            Some("tool/call") => Some(format!("call:{}", e["data"]["callId"].as_str()?)),
            Some("tool/result") => Some(format!(
                "result:{}",
                e["data"]["message"]["source"]["callId"].as_str()?
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn max_parallel_bounds_how_many_of_the_models_calls_start_together() {
    let m = mock();
    let w = workspace();
    std::fs::write(w.ws.join("more.txt"), "more\n").unwrap();
    let url = m.mock.openai_base_url();
    push_reads_then_answer(&m.mock, &["notes.txt", "more.txt"], "Read both.");
    let one = run(&mut agent(
        &w,
        Some(&url),
        "Read both",
        &["--json", "--max-parallel", "1"],
    ));
    assert_eq!(one.code, 0, "{}", one.both());
    assert_eq!(
        tool_order(&one.stdout),
        [
            "call:call_0",
            "result:call_0",
            "call:call_1",
            "result:call_1"
        ]
    );
    // By default both start together: recorded in one write before either result.
    push_reads_then_answer(&m.mock, &["notes.txt", "more.txt"], "Read both.");
    let both = run(&mut agent(&w, Some(&url), "Read both", &["--json"]));
    assert_eq!(both.code, 0, "{}", both.both());
    assert_eq!(
        tool_order(&both.stdout)[..2],
        ["call:call_0", "call:call_1"]
    );
}

#[test]
fn the_model_is_offered_what_dsh_tools_prints_code_mode_included() {
    let m = mock();
    let w = workspace();
    let policy = w.state.parent().unwrap().join("policy.toml");
    std::fs::write(&policy, "[permissions]\ndeny = [\"bash\"]\n").unwrap();
    let url = m.mock.openai_base_url();
    for mode in ["native", "code"] {
        let listed = dsh_run(&[
            "tools",
            "--workspace",
            s(&w.ws),
            "--policy",
            s(&policy),
            "--mode",
            mode,
        ]);
        assert_eq!(listed.code, 0, "{}", listed.both());
        let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
        let expected = offered(&json!({ "tools": listed }));
        let before = m.mock.requests().len();
        let (name, args) = if mode == "code" {
            (
                "run_code",
                "{\"description\": \"find the notes\", \"code\": \"return await tools.glob({pattern: '*.txt'})\"}",
            )
        } else {
            ("glob", "{\"pattern\": \"*.txt\"}")
        };
        let mut reply = vec![openai::role()];
        reply.extend(openai::tool_call(0, "call_1", name, &[args]));
        reply.extend(openai::finish("tool_calls", 40, 12));
        m.mock.push(Reply::Stream(reply));
        m.mock.push(openai::text_reply(&["Found notes.txt."]));
        let out = run(&mut agent(
            &w,
            Some(&url),
            "Find the notes",
            &["--policy", s(&policy), "--mode", mode],
        ));
        assert_eq!(out.code, 0, "{mode}: {}", out.both());
        let requests = m.mock.requests();
        let sent = offered(&requests[before].body);
        assert_eq!(sent, expected, "{mode}");
        assert!(
            !sent.contains(&"bash".to_owned()),
            "denied outright: {sent:?}"
        );
        if mode == "code" {
            assert_eq!(sent, ["run_code"]);
        }
        let system = history(&requests[before].body)[0].clone();
        let sdk = system.contains("Only `run_code` is callable directly");
        assert_eq!(sdk, mode == "code", "{system}");
        let result = history(&requests[before + 1].body)[3].clone();
        assert!(result.contains("notes.txt"), "{mode}: {result}");
        assert_checks_clean(&log_of(&out));
    }
}
