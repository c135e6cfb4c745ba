//! `dsh mcp serve` driven by the official MCP Inspector's command-line mode
//! (`@modelcontextprotocol/inspector-cli` from npm, pinned in tests/mcp/package.json; `cargo
//! xtask test` installs it, and these tests fail, naming it, without it), over stdio and HTTP.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::mcp_serve::{HttpServer, workspace};
use super::support::*;

/// The inspector's build directory (its CLI finds its own package.json from there).
fn inspector_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp/node_modules/@modelcontextprotocol/inspector-cli/build");
    assert!(
        dir.join("cli.js").is_file(),
        "@modelcontextprotocol/inspector-cli is missing: `npm ci` in tests/mcp (`cargo xtask \
         test` installs it)"
    );
    dir
}

/// Runs `node cli.js --cli ARGS` and returns the JSON it printed.
fn inspector(args: &[&str]) -> Value {
    let out = Command::new("node")
        .current_dir(inspector_dir())
        .arg("cli.js")
        .arg("--cli")
        .args(args)
        .output()
        .expect("node runs");
    assert!(
        out.status.success(),
        "the inspector failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the inspector printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// `dsh mcp serve ARGS` as the inspector's stdio server, then the inspector's own options.
fn over_stdio(serve: &[&str], method: &[&str]) -> Value {
    let mut args = vec![env!("CARGO_BIN_EXE_dsh"), "mcp", "serve"];
    args.extend_from_slice(serve);
    args.extend_from_slice(method);
    inspector(&args)
}

fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn the_mcp_inspector_lists_and_calls_dsh_tools_over_stdio_under_the_rules() {
    let ws = workspace();
    let policy = ws.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[permissions]\ndeny = [\"bash\"]\nask = [\"write\"]\n",
    )
    .unwrap();
    let log = ws.path().join("inspector.jsonl");
    let serve = [
        "--workspace",
        s(ws.path()),
        "--session",
        s(&log),
        "--policy",
        s(&policy),
        "--demo-tools",
    ];
    let listed = over_stdio(&serve, &["--method", "tools/list"]);
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"echo") && names.contains(&"read"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"bash"),
        "a denied tool is not listed: {names:?}"
    );
    let echo = &listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap()["inputSchema"];
    assert_eq!(echo["required"][0], "text", "{echo}");

    let called = over_stdio(
        &serve,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "echo",
            "--tool-arg",
            "text=hello",
        ],
    );
    assert_eq!(called["isError"], false, "{called}");
    assert_eq!(text_of(&called), "hello", "{called}");

    // An ask with no way to ask (the inspector declares no elicitation): denied, nothing written.
    let refused = over_stdio(
        &serve,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "write",
            "--tool-arg",
            "path=new.txt",
            "content=x",
        ],
    );
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text_of(&refused).contains("approval"), "{refused}");
    assert!(!ws.path().join("new.txt").exists());

    // Each serve resumed the same log: every call is in it, paired, and it checks clean.
    let ev = events(&log);
    assert_eq!(of_type(&ev, "tool/call").len(), 2, "{ev:#?}");
    assert_eq!(of_type(&ev, "tool/result").len(), 2, "{ev:#?}");
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}

#[test]
fn the_mcp_inspector_calls_dsh_over_http_with_the_bearer_token() {
    let ws = workspace();
    let log = ws.path().join("http.jsonl");
    let server = HttpServer::start(
        &[
            "--workspace",
            s(ws.path()),
            "--session",
            s(&log),
            "--demo-tools",
            "--token",
            "s3cret",
        ],
        "",
    );
    let url = server.url.clone();
    let http = |extra: &[&str]| {
        let mut args = vec![
            url.as_str(),
            "--transport",
            "http",
            "--header",
            "Authorization: Bearer s3cret",
        ];
        args.extend_from_slice(extra);
        inspector(&args)
    };
    let listed = http(&["--method", "tools/list"]);
    assert!(
        listed["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "read")),
        "{listed}"
    );
    let read = http(&[
        "--method",
        "tools/call",
        "--tool-name",
        "read",
        "--tool-arg",
        "file_path=notes.txt",
    ]);
    assert_eq!(read["isError"], false, "{read}");
    assert!(text_of(&read).contains("hello from a note"), "{read}");
    let (code, stderr) = server.interrupt();
    assert_eq!(code, 0, "{stderr}");
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}
