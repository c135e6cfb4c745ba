//! How upstream servers are started and ended: against `tests/mcp/upstream.py`, a plain
//! JSON-RPC stdio server (no SDK) that misbehaves on request.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dsh_mcp::{McpError, McpServer, ServerConfig};

fn upstream() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp/upstream.py")
        .display()
        .to_string()
}

/// A fresh directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dsh-mcp-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether `pid` is running (a zombie waiting for its parent counts as ended).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let rest = stat[stat.rfind(')')? + 1..].trim_start().to_owned();
            rest.chars().next()
        })
        .is_some_and(|state| state != 'Z' && state != 'X')
}

/// Waits (at most `limit`) for `done`; whether it came.
async fn eventually(limit: Duration, done: impl Fn() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done()
}

#[tokio::test]
async fn mcp_a_dropped_server_takes_its_own_children_with_it_even_when_they_ignore_sigterm() {
    let dir = scratch("grandchild");
    let pidfile = dir.join("sleep.pid");
    let config = ServerConfig::command(
        "python3",
        [
            upstream(),
            "--grandchild".to_owned(),
            pidfile.display().to_string(),
        ],
    );
    let server = McpServer::connect("up", &config).await.unwrap();
    assert_eq!(server.tools().unwrap().len(), 1);
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid), "the grandchild runs while the server does");
    // The server leads the group its child is in, and the group is one of the live groups dsh
    // kills at once when it must exit at once.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let pgid: u32 = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    let group = dsh_process::ProcessGroup::new(pgid).unwrap();
    assert!(dsh_process::live_groups().contains(&group));
    drop(server);
    assert!(
        eventually(Duration::from_secs(10), || !alive(pid)).await,
        "the server's child `sleep 301` (pid {pid}) outlived the server"
    );
    assert!(
        eventually(Duration::from_secs(10), || !dsh_process::live_groups()
            .contains(&group))
        .await,
        "an ended group leaves the registry"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn mcp_a_cwd_that_is_missing_or_not_a_directory_is_named_as_the_problem() {
    let dir = scratch("cwd");
    let mut config = ServerConfig::command("python3", [upstream()]);
    config.cwd = Some(dir.join("nonexistent/dir"));
    let e = McpServer::connect("a", &config).await.unwrap_err();
    assert!(matches!(e, McpError::Config { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "MCP server `a`: its cwd {} does not exist",
            dir.join("nonexistent/dir").display()
        )
    );
    let file = dir.join("file");
    std::fs::write(&file, "").unwrap();
    config.cwd = Some(file.clone());
    let e = McpServer::connect("a", &config).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "MCP server `a`: its cwd {} is not a directory",
            file.display()
        )
    );
    config.cwd = Some(dir.clone());
    let server = McpServer::connect("a", &config).await.unwrap();
    assert_eq!(
        server.tools().unwrap().len(),
        1,
        "a directory that exists works"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn mcp_a_server_that_never_answers_initialize_times_out_quoting_its_stderr() {
    let mut config = ServerConfig::command("python3", [upstream(), "--silent-start".to_owned()]);
    config.startup_timeout_ms = Some(1500);
    let e = McpServer::connect("slow", &config).await.unwrap_err();
    assert!(matches!(e, McpError::Timeout { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "MCP server `slow` did not start within 1.5s; it said: waiting for a licence key that \
         never comes"
    );
}
