//! How `dsh` reports on the upstream MCP servers of a policy: what a crashing server said,
//! whether it will be started again, bad `[mcp]` tables, and `dsh tools`' warnings.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::support::*;

fn mcp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// `policy.toml` in `dir` holding `text`.
fn policy_file(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("policy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn mcp_a_crash_quotes_only_that_process_s_stderr_and_the_last_one_says_no_restart_follows() {
    let ws = tmp();
    let policy = policy_file(
        ws.path(),
        &format!(
            "[mcp.servers.py]\ncommand = \"python3\"\nargs = [{:?}]\n",
            mcp_dir().join("server.py").display().to_string()
        ),
    );
    let log = ws.path().join("log.jsonl");
    let max = 5; // dsh_mcp::MAX_RESTARTS
    let mut steps: Vec<String> = (1..=max + 2)
        .map(|i| openai("", &[call(&format!("c{i}"), "mcp__py__crash", json!({}))]))
        .collect();
    steps.push(openai("done", &[]));
    let script = script(ws.path(), "s.jsonl", &steps);
    let out = run_script(&script, ws.path(), &log, &["--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    for i in 1..=max {
        let r = result_of(&ev, &format!("c{i}"));
        assert!(r.is_error, "{r:?}");
        assert_eq!(
            r.text.matches("crashing on purpose").count(),
            1,
            "call {i} quotes its own process's last words, once: {r:?}"
        );
        assert!(
            r.text.contains("started again for the next call"),
            "call {i}: {r:?}"
        );
    }
    let last = result_of(&ev, &format!("c{}", max + 1));
    assert_eq!(
        last.text.matches("crashing on purpose").count(),
        1,
        "{last:?}"
    );
    assert!(
        !last.text.contains("started again for the next call")
            && last.text.contains("is not started again"),
        "the crash that reaches the cap says no restart follows: {last:?}"
    );
    let after = result_of(&ev, &format!("c{}", max + 2));
    assert!(
        after.is_error && after.text.contains("is not started again"),
        "{after:?}"
    );
}

/// `dsh tools --policy` with `policy` in a fresh workspace.
fn dsh_tools(policy: &str) -> Out {
    let ws = tmp();
    let path = policy_file(ws.path(), policy);
    dsh_run(&["tools", "--workspace", s(ws.path()), "--policy", s(&path)])
}

#[test]
fn mcp_values_that_cannot_work_are_refused_naming_the_server_and_the_key() {
    let cases = [
        (
            "[mcp.servers.a]\ncommand = \"\"\n",
            "mcp.servers.a",
            "`command` is empty",
        ),
        (
            "[mcp.servers.a]\ncommand = \"python3\"\ntimeout_ms = 0\n",
            "mcp.servers.a",
            "`timeout_ms` is 0",
        ),
        (
            "[mcp.servers.a]\ncommand = \"python3\"\nstartup_timeout_ms = 0\n",
            "mcp.servers.a",
            "`startup_timeout_ms` is 0",
        ),
        (
            "[mcp.servers.x]\ncommand = \"python3\"\n[mcp.servers.x__y]\ncommand = \"python3\"\n",
            "mcp.servers.x__y",
            "may not hold `__`",
        ),
    ];
    for (policy, server, problem) in cases {
        let out = dsh_tools(policy);
        assert_eq!(out.code, 2, "{policy}: {}", out.both());
        assert!(
            out.stderr.contains(server) && out.stderr.contains(problem),
            "{policy}: {}",
            out.both()
        );
        assert!(out.stdout.is_empty(), "{}", out.both());
    }
    let out = dsh_tools("[mcp.servers.x__y]\ncommand = \"python3\"\n");
    assert!(
        out.stderr.contains("mcp__<server>__<tool>") && !out.stderr.contains("register_scoped"),
        "the refusal says why `__` is refused: {}",
        out.both()
    );
}
