//! `@modelcontextprotocol/server-everything` from npm (pinned in tests/mcp/package.json; `cargo
//! xtask test` installs it, and this test fails, naming it, without it): the reference server's
//! tools through `dsh run`, declared as `[mcp.servers.ev]` in the policy.

use std::path::Path;

use serde_json::json;

use super::support::*;

/// A policy starting the installed server-everything over stdio as `ev` (plus `extra` TOML).
fn everything_policy(ws: &Path, extra: &str) -> std::path::PathBuf {
    let server = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        server.is_file(),
        "@modelcontextprotocol/server-everything is missing: `npm ci` in tests/mcp (`cargo xtask \
         test` installs it)"
    );
    let path = ws.join("policy.toml");
    std::fs::write(
        &path,
        format!(
            "[mcp.servers.ev]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n{extra}",
            server.display().to_string()
        ),
    )
    .unwrap();
    path
}

#[test]
fn mcp_the_npm_everything_server_s_tools_are_listed_called_and_report_progress() {
    let ws = tempfile::tempdir().unwrap();
    // Past the 1.5 s budget in all (2.4 s), with progress every 0.6 s keeping it alive.
    let policy = everything_policy(ws.path(), "timeout_ms = 1500\n");

    let listed = dsh_run(&["tools", "--workspace", s(ws.path()), "--policy", s(&policy)]);
    assert_eq!(listed.code, 0, "{}", listed.both());
    for tool in [
        "mcp__ev__echo",
        "mcp__ev__get-sum",
        "mcp__ev__trigger-long-running-operation",
    ] {
        assert!(listed.stdout.contains(tool), "{tool}: {}", listed.both());
    }

    let log = ws.path().join("log.jsonl");
    let script = script(
        ws.path(),
        "s.jsonl",
        &[
            openai(
                "",
                &[
                    call("c1", "mcp__ev__echo", json!({"message": "hi from dsh"})),
                    call("c2", "mcp__ev__get-sum", json!({"a": 2, "b": 40})),
                    // The server's input schema is checked before the server sees the call.
                    call("c3", "mcp__ev__get-sum", json!({"a": "two", "b": 1})),
                ],
            ),
            openai(
                "",
                &[call(
                    "c4",
                    "mcp__ev__trigger-long-running-operation",
                    json!({"duration": 2.4, "steps": 4}),
                )],
            ),
            openai("done", &[]),
        ],
    );
    let out = run_script(&script, ws.path(), &log, &["--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    let echoed = result_of(&ev, "c1");
    assert!(
        !echoed.is_error && echoed.text == "Echo: hi from dsh",
        "{echoed:?}"
    );
    let sum = result_of(&ev, "c2");
    assert!(
        !sum.is_error && sum.text == "The sum of 2 and 40 is 42.",
        "{sum:?}"
    );
    let invalid = result_of(&ev, "c3");
    assert_eq!(invalid.code.as_deref(), Some("INVALID_ARGS"), "{invalid:?}");
    let long = result_of(&ev, "c4");
    assert!(
        !long.is_error
            && long.text == "Long running operation completed. Duration: 2.4 seconds, Steps: 4.",
        "progress kept the call alive past its budget: {long:?}"
    );
    assert!(
        out.stdout
            .contains("⋯ mcp__ev__trigger-long-running-operation 1/4"),
        "the progress is shown: {}",
        out.both()
    );
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}
