//! No process outlives dsh: a command that ignores SIGTERM and SIGINT is killed by a second
//! Ctrl-C before dsh exits, and when dsh itself is killed with SIGKILL, even in the grace that
//! follows the SIGTERM of a cancellation (the session supervisor, which started the commands,
//! kills them and goes too).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::support::*;

/// A command that ignores SIGTERM and SIGINT, with a child that does too; both pids written.
const STUBBORN: &str =
    "trap '' TERM INT; echo $$ > shell.pid; sleep 1000 & echo $! > sleep.pid; wait";

/// A shell that notes each SIGTERM it gets (in `got.term`) and goes on waiting for a child that
/// ignores SIGTERM and SIGINT.
const NOTES_SIGTERM: &str = "trap '' INT; trap 'echo > got.term' TERM; (trap '' TERM INT; exec sleep 1000) & echo $! > sleep.pid; echo $$ > shell.pid; while kill -0 $! 2>/dev/null; do wait $!; done";

fn start(t: &Path) -> Child {
    start_with(t, STUBBORN)
}

fn start_with(t: &Path, command: &str) -> Child {
    let ws = t.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let sc = script(
        t,
        "s.jsonl",
        &[
            anthropic(
                "",
                &[call(
                    "b1",
                    "bash",
                    json!({"command": command, "description": "stubborn"}),
                )],
            ),
            anthropic("done", &[]),
        ],
    );
    dsh()
        .args([
            "run",
            s(&sc),
            "--workspace",
            s(&ws),
            "--session",
            s(&t.join("log.jsonl")),
            "--json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The pids the command wrote, once both files are there.
fn pids(ws: &Path) -> Vec<i32> {
    let start = Instant::now();
    loop {
        let read = |f: &str| {
            std::fs::read_to_string(ws.join(f))
                .ok()?
                .trim()
                .parse::<i32>()
                .ok()
        };
        if let (Some(a), Some(b)) = (read("shell.pid"), read("sleep.pid")) {
            return vec![a, b];
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the command never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

/// Waits (up to 10 s) for every pid to be gone; the processes are expected to die, so the wait
/// proves that they did, not that something did not happen.
fn assert_all_gone(pids: &[i32]) {
    let start = Instant::now();
    while pids.iter().any(|p| alive(*p)) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "still running after dsh ended: {:?}",
            pids.iter().filter(|p| alive(**p)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigint(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_second_ctrl_c_kills_every_command_before_dsh_exits() {
    let t = tmp();
    let mut child = start(t.path());
    let pids = pids(&t.path().join("ws"));
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    sigint(&child);
    // The second Ctrl-C once the first was taken (a signal before its handler waits is lost).
    for line in lines.by_ref() {
        if line.unwrap().contains("press Ctrl-C again") {
            break;
        }
    }
    sigint(&child);
    let code = child.wait().unwrap().code();
    assert_eq!(code, Some(130));
    assert_all_gone(&pids);
}

#[test]
fn when_dsh_is_killed_with_sigkill_its_commands_die_too() {
    let t = tmp();
    let mut child = start(t.path());
    let pids = pids(&t.path().join("ws"));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_all_gone(&pids);
}

#[test]
fn when_dsh_is_killed_with_sigkill_its_supervisor_kills_the_commands_it_started() {
    let t = tmp();
    let ws = t.path().join("ws");
    let mut child = start_with(t.path(), &format!("echo $PPID > sup.pid; {STUBBORN}"));
    let mut pids = pids(&ws);
    // The command runs under the session supervisor (not a per-call helper, not dsh itself).
    let sup: i32 = std::fs::read_to_string(ws.join("sup.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let cmdline = std::fs::read(format!("/proc/{sup}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("--serve"),
        "{:?}",
        String::from_utf8_lossy(&cmdline)
    );
    pids.push(sup);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_all_gone(&pids);
}

#[test]
fn killing_dsh_in_the_grace_after_a_cancellations_sigterm_still_kills_its_commands() {
    let t = tmp();
    let ws = t.path().join("ws");
    let mut child = start_with(t.path(), NOTES_SIGTERM);
    let pids = pids(&ws);
    // The first Ctrl-C cancels the call: its group gets SIGTERM, then a grace before SIGKILL.
    sigint(&child);
    let start = Instant::now();
    while !ws.join("got.term").exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the command never got SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // dsh dies inside that grace: no one is left to send the SIGKILL but the helper.
    child.kill().unwrap();
    child.wait().unwrap();
    assert_all_gone(&pids);
}
