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
    // Six server starts and the restarts' backoff (0.2 + 0.4 + ... + 3.2 s) take 12-19 s on
    // two cores: more than the suite's deadline for a hang.
    let out = run_within(
        dsh().args([
            "run",
            s(&script),
            "--workspace",
            s(ws.path()),
            "--session",
            s(&log),
            "--policy",
            s(&policy),
        ]),
        std::time::Duration::from_secs(90),
    );
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

#[test]
fn dsh_tools_warns_on_stderr_about_a_server_that_did_not_start_and_prints_the_rest() {
    let ws = tmp();
    let policy = policy_file(
        ws.path(),
        &format!(
            "[mcp.servers.ok]\ncommand = \"python3\"\nargs = [{:?}]\n\
             [mcp.servers.broken]\ncommand = \"python3\"\nargs = [{:?}, \"--die-at-start\"]\n",
            mcp_dir().join("upstream.py").display().to_string(),
            mcp_dir().join("server.py").display().to_string(),
        ),
    );
    let out = dsh_run(&["tools", "--workspace", s(ws.path()), "--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(
        out.stderr.contains("dsh: warning: MCP server `broken`")
            && out.stderr.contains("giving up")
            && out.stderr.contains("its tools are not available"),
        "the warning names the server and what it said: {}",
        out.both()
    );
    let tools: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(names.contains(&"mcp__ok__hello"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__broken")),
        "{names:?}"
    );
}

#[test]
fn mcp_a_server_s_children_do_not_outlive_dsh() {
    let ws = tmp();
    let pidfile = ws.path().join("sleep.pid");
    let policy = policy_file(
        ws.path(),
        &format!(
            "[mcp.servers.up]\ncommand = \"python3\"\nargs = [{:?}, \"--grandchild\", {:?}]\n",
            mcp_dir().join("upstream.py").display().to_string(),
            pidfile.display().to_string(),
        ),
    );
    let out = dsh_run(&["tools", "--workspace", s(ws.path()), "--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(out.stdout.contains("mcp__up__hello"), "{}", out.both());
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    let stat = format!("/proc/{}/stat", pid.trim());
    // Bounded: SIGKILL of the group was sent before dsh exited; the kernel may take a moment.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let alive = || {
        std::fs::read_to_string(&stat).is_ok_and(|st| {
            let state = st.rsplit(')').next().unwrap_or("").trim_start();
            !(state.starts_with('Z') || state.starts_with('X'))
        })
    };
    while alive() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        !alive(),
        "the server's child `sleep 301` (pid {}) outlived dsh",
        pid.trim()
    );
}

#[test]
fn mcp_an_error_inside_mcp_names_the_line_and_the_path_of_the_key_at_fault() {
    let out = dsh_tools(
        "mode = \"native\"\n\n\
         [mcp.servers.one]\ncommand = \"python3\"\nargs = [\"a.py\"]\ntimeout_ms = 5000\n\n\
         [mcp.servers.two]\ncommand = \"python3\"\nargs = [\"b.py\"]\ntimeout_ms = \"5000\"\n",
    );
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(
        out.stderr.contains(
            "line 11: mcp.servers.two.timeout_ms: invalid type: string \"5000\", expected u64"
        ),
        "{}",
        out.both()
    );
    let out = dsh_tools("[mcp.servers.a]\ncommand = \"python3\"\nargz = [\"x\"]\n");
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(
        out.stderr
            .contains("line 3: mcp.servers.a.argz: unknown field `argz`"),
        "{}",
        out.both()
    );
    // A value the table's checks refuse names the line of the server's table.
    let out =
        dsh_tools("mode = \"native\"\n\n[mcp.servers.a]\ncommand = \"python3\"\ntimeout_ms = 0\n");
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(
        out.stderr.contains("line 3: mcp.servers.a: "),
        "{}",
        out.both()
    );
}

/// The live (not zombie) processes whose process group is `pgid`, read from `/proc`.
fn live_members(pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
                // After the command name: state, ppid, pgrp.
                let mut f = st.rsplit(')').next().unwrap_or("").split_whitespace();
                let state = f.next().unwrap_or("Z");
                let pgrp = f.nth(1).and_then(|p| p.parse::<i32>().ok());
                pgrp == Some(pgid) && !state.starts_with('Z') && !state.starts_with('X')
            })
        })
        .collect()
}

/// The pid written in `path`, once it is there (at most 30 s).
fn pid_in(path: &Path) -> i32 {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            std::time::Instant::now() < until,
            "{} never written",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The process group of the upstream server whose child's pid is in `pidfile` (the server leads
/// it; the child is in it), checked to hold both.
fn server_group(pidfile: &Path) -> i32 {
    let child = pid_in(pidfile);
    let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap();
    let group: i32 = stat
        .rsplit(')')
        .next()
        .and_then(|f| f.split_whitespace().nth(2))
        .and_then(|p| p.parse().ok())
        .unwrap();
    assert!(
        live_members(group).len() >= 2,
        "the server and its child: {:?}",
        live_members(group)
    );
    group
}

/// `dsh run` of a one-step script with `policy`, its stderr piped.
fn dsh_run_live(dir: &Path, policy: &Path, step: String) -> std::process::Child {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let sc = script(dir, "s.jsonl", &[step]);
    dsh()
        .args([
            "run",
            s(&sc),
            "--workspace",
            s(&ws),
            "--policy",
            s(policy),
            "--session",
            s(&dir.join("log.jsonl")),
            "--json",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Sends dsh SIGTERM, waits until it says `said` on stderr (so the first was taken: a signal
/// sent before its handler waits is lost), sends a second, and returns dsh's exit code.
fn two_sigterms(mut child: std::process::Child, said: &str) -> Option<i32> {
    use std::io::BufRead;
    let pid = child.id().to_string();
    let term = || {
        // Fails only when dsh is already gone, which the exit code then tells.
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
    };
    term();
    let mut heard = Vec::new();
    for line in std::io::BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        let done = line.contains(said);
        heard.push(line);
        if done {
            break;
        }
    }
    term();
    let code = child.wait().unwrap().code();
    eprintln!("dsh said: {heard:#?}");
    code
}

/// Waits (at most 10 s) until no process of `group` is alive; they are expected to die, so the
/// wait proves that they did. SIGKILL was sent before dsh exited; the kernel may take a moment.
fn assert_group_gone(group: i32, what: &str) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !live_members(group).is_empty() {
        assert!(
            std::time::Instant::now() < until,
            "{what}: process group {group} outlived dsh: {:?}",
            live_members(group)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Two signals while an MCP server starts (it never answers `initialize`; its child ignores
/// SIGTERM): the first stops the start, the second exits at once, and nothing of the server's
/// process group is left. The signals used to come before dsh handled any (the handlers were
/// installed once the servers had started): the first killed dsh outright and the server's
/// group lived on.
#[test]
fn mcp_two_signals_while_a_server_starts_leave_nothing_of_its_process_group() {
    let t = tmp();
    let pidfile = t.path().join("sleep.pid");
    let policy = policy_file(
        t.path(),
        &format!(
            "[mcp.servers.slow]\ncommand = \"python3\"\nargs = [{:?}, \"--grandchild\", {:?}, \
             \"--silent-start\"]\nstartup_timeout_ms = 120000\n",
            mcp_dir().join("upstream.py").display().to_string(),
            pidfile.display().to_string(),
        ),
    );
    let child = dsh_run_live(
        t.path(),
        &policy,
        anthropic("", &[call("e1", "echo", json!({"text": "never runs"}))]),
    );
    let group = server_group(&pidfile);
    let code = two_sigterms(child, "a second signal exits at once");
    assert_group_gone(group, "the starting MCP server");
    assert_eq!(code, Some(130), "stopped, not killed by the signal");
}

/// A second signal during a run exits at once (the `bash` call ignores SIGTERM, so the first
/// leaves it in its grace) and every process group dsh leads goes with it, through the one
/// registry of live groups (`dsh::process`): the command's and the MCP server's, whose child
/// ignores SIGTERM.
#[test]
fn mcp_a_second_signal_during_a_run_kills_the_servers_group_with_the_bash_commands() {
    let t = tmp();
    let pidfile = t.path().join("sleep.pid");
    let policy = policy_file(
        t.path(),
        &format!(
            "[mcp.servers.up]\ncommand = \"python3\"\nargs = [{:?}, \"--grandchild\", {:?}]\n",
            mcp_dir().join("upstream.py").display().to_string(),
            pidfile.display().to_string(),
        ),
    );
    let stubborn = "trap '' TERM INT; sleep 1000 & echo $! > sleep.pid; wait";
    let child = dsh_run_live(
        t.path(),
        &policy,
        anthropic(
            "",
            &[call(
                "b1",
                "bash",
                json!({"command": stubborn, "description": "stubborn"}),
            )],
        ),
    );
    let group = server_group(&pidfile);
    let bash_sleep = pid_in(&t.path().join("ws/sleep.pid"));
    let code = two_sigterms(child, "a second signal exits at once");
    assert_eq!(code, Some(130));
    assert_group_gone(group, "the MCP server");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let bash_alive = || {
        std::fs::read_to_string(format!("/proc/{bash_sleep}/stat"))
            .is_ok_and(|st| !st.contains(") Z "))
    };
    while bash_alive() {
        assert!(
            std::time::Instant::now() < until,
            "the bash command's sleep (pid {bash_sleep}) outlived dsh"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
