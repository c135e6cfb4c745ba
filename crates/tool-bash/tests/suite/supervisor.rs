//! The session supervisor: the helper started once per tool and mode, which starts each
//! command. Its commands see the sandbox; concurrent calls each get their own output and status;
//! a timeout ends only its own call's group; a supervisor killed during a call fails that call
//! clearly and the next call starts a new one. Each check names the supervisor by the parent of
//! the command (`$PPID`), so it fails if the command did not run through one.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::support::*;
use dsh_tool_bash::{SandboxMode, SandboxSettings};
use serde_json::json;

fn in_mode(mode: SandboxMode) -> Fixture {
    fixture_with(
        SandboxSettings {
            mode,
            ..SandboxSettings::default()
        },
        |_| {},
    )
}

/// The command line of process `pid`, its words joined by spaces.
fn cmdline(pid: &str) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Waits (up to 10 s) for `path` to hold a line, and returns it.
async fn wait_for_line(path: &Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(path)
            && s.ends_with('\n')
        {
            return s.trim().to_owned();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{} never written",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn commands_run_through_one_supervisor_per_mode_and_see_its_sandbox() {
    if !sandbox_available().await {
        panic!("this kernel must contain commands for this test (Landlock)");
    }
    let f = in_mode(SandboxMode::WorkspaceWrite);
    let outside = f.outside().join("x");
    let first = f.sh("echo $PPID").await;
    assert!(!first.is_error(), "{first:?}");
    let sup = text(&first).trim().to_owned();
    assert_ne!(
        sup,
        std::process::id().to_string(),
        "not through a supervisor"
    );
    assert!(cmdline(&sup).contains("--serve"), "{}", cmdline(&sup));
    // The same supervisor runs the next call, and the sandbox holds in it.
    let denied = f
        .sh(&format!("echo $PPID; touch {}", outside.display()))
        .await;
    let t = text(&denied);
    assert!(t.starts_with(&sup), "{t}");
    assert!(t.contains("[sandbox: file access denied"), "{t}");
    assert!(!outside.exists());
    // Control: inside the workspace the write works.
    let ok = f.sh("touch inside && echo $PPID").await;
    assert_eq!(text(&ok).trim(), sup);
    assert!(f.workspace().join("inside").exists());
}

/// Field `n` (1-based) of `/proc/PID/stat`, after the command name (which may hold spaces).
fn stat_field(pid: &str, n: usize) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(") ").map(|(_, rest)| rest).unwrap_or("");
    after.split(' ').nth(n - 3).unwrap_or_default().to_owned()
}

#[tokio::test]
async fn each_command_leads_its_own_group_and_a_contained_one_runs_under_the_filter() {
    if !sandbox_available().await {
        panic!("this kernel must contain commands for this test (Landlock)");
    }
    for (mode, filter) in [
        (SandboxMode::ReadOnly, "2"),
        (SandboxMode::WorkspaceWrite, "2"),
        (SandboxMode::DangerFullAccess, "0"),
    ] {
        let f = in_mode(mode);
        // The shell's own pid, its group and its parent (the supervisor), read by the shell
        // itself; then the seccomp state of a process it starts.
        let r = f
            .sh(
                "read -r _ _ _ ppid pgid _ < /proc/$$/stat; echo \"$$ $pgid $ppid\"; \
                 sed -n 's/^Seccomp:[[:space:]]*//p' /proc/self/status",
            )
            .await;
        let t = text(&r);
        let lines: Vec<&str> = t.lines().collect();
        let [ids, seccomp] = lines.as_slice() else {
            panic!("{mode}: {t}");
        };
        let ids: Vec<&str> = ids.split(' ').collect();
        let [pid, pgid, sup] = ids.as_slice() else {
            panic!("{mode}: {t}");
        };
        assert_eq!(pid, pgid, "{mode}: the shell leads a group of its own");
        assert!(cmdline(sup).contains("--serve"), "{mode}: {}", cmdline(sup));
        assert_ne!(
            stat_field(sup, 5),
            *pgid,
            "{mode}: not the supervisor's group"
        );
        assert_eq!(*seccomp, filter, "{mode}: seccomp mode of the command");
        // The supervisor itself carries no filter: it could not start the next group if it did.
        assert_eq!(
            std::fs::read_to_string(format!("/proc/{sup}/status"))
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix("Seccomp:"))
                .map(str::trim),
            Some("0"),
            "{mode}: the supervisor's own seccomp mode"
        );
    }
}

#[tokio::test]
async fn concurrent_calls_each_get_their_own_output_and_status() {
    let f = Arc::new(in_mode(SandboxMode::DangerFullAccess));
    const N: usize = 6;
    let ws = f.workspace();
    // Each command waits until all have started (a barrier of files), so they overlap.
    let calls = (0..N).map(|i| {
        let f = f.clone();
        let cmd = format!(
            "touch ready.{i}; until [ $(ls ready.* | wc -l) -ge {N} ]; do sleep 0.01; done; \
             echo out-{i}; echo err-{i} >&2; echo $PPID > ppid.{i}; exit {i}"
        );
        tokio::spawn(async move { f.sh(&cmd).await })
    });
    let results = futures_join(calls.collect()).await;
    let sup = std::fs::read_to_string(ws.join("ppid.0")).unwrap();
    assert!(cmdline(sup.trim()).contains("--serve"));
    for (i, r) in results.iter().enumerate() {
        let t = text(r);
        assert!(t.contains(&format!("out-{i}")), "{i}: {t}");
        assert!(t.contains(&format!("err-{i}")), "{i}: {t}");
        for j in (0..N).filter(|j| *j != i) {
            assert!(
                !t.contains(&format!("out-{j}")),
                "{i} got {j}'s output: {t}"
            );
        }
        if i == 0 {
            assert!(!t.contains("[exit code"), "{t}");
        } else {
            assert!(t.contains(&format!("[exit code: {i}]")), "{i}: {t}");
        }
        let p = std::fs::read_to_string(ws.join(format!("ppid.{i}"))).unwrap();
        assert_eq!(p, sup, "one supervisor for the mode");
    }
}

async fn futures_join(
    tasks: Vec<tokio::task::JoinHandle<Arc<dsh_core::ToolResult>>>,
) -> Vec<Arc<dsh_core::ToolResult>> {
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test]
async fn a_timeout_kills_only_its_own_calls_group() {
    let f = Arc::new(in_mode(SandboxMode::DangerFullAccess));
    let ws = f.workspace();
    let marker = "987.6591";
    let fifo = ws.join("release");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // B: a sleeper of its own, then waits for the test to release it.
    let b = {
        let f = f.clone();
        let cmd = format!("sleep {marker}2 & echo $! > b.pid; read line < release; echo b-$line");
        tokio::spawn(async move { f.sh(&cmd).await })
    };
    let b_sleeper = wait_for_line(&ws.join("b.pid")).await;
    // A: times out with a sleeper of its own.
    let a = f
        .call(json!({"command": format!("sleep {marker}1 & wait"), "description": "d", "timeoutMs": 300}))
        .await;
    assert_eq!(code(&a).as_deref(), Some("BASH_TIMEOUT"), "{a:?}");
    let start = Instant::now();
    while !processes_with(&format!("{marker}1")).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "A's sleeper lives"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // B and its sleeper are untouched.
    assert!(
        Path::new(&format!("/proc/{b_sleeper}")).exists(),
        "B's sleeper was killed by A's timeout"
    );
    let fifo2 = fifo.clone();
    tokio::task::spawn_blocking(move || std::fs::write(fifo2, "go\n"))
        .await
        .unwrap()
        .unwrap();
    let b = b.await.unwrap();
    assert!(!b.is_error(), "{b:?}");
    assert!(text(&b).contains("b-go"), "{}", text(&b));
}

#[tokio::test]
async fn a_supervisor_killed_during_a_call_fails_it_clearly_and_the_next_call_works() {
    for mode in [SandboxMode::DangerFullAccess, SandboxMode::WorkspaceWrite] {
        let f = Arc::new(in_mode(mode));
        let ws = f.workspace();
        let marker = "987.6592";
        let running = {
            let f = f.clone();
            let cmd = format!("sleep {marker} & echo $PPID > sup.pid; wait");
            tokio::spawn(async move { f.sh(&cmd).await })
        };
        let sup = wait_for_line(&ws.join("sup.pid")).await;
        assert!(
            cmdline(&sup).contains("--serve"),
            "{mode}: {}",
            cmdline(&sup)
        );
        assert!(
            std::process::Command::new("kill")
                .args(["-KILL", &sup])
                .status()
                .unwrap()
                .success()
        );
        let r = running.await.unwrap();
        assert!(r.is_error(), "{mode}: {r:?}");
        let t = text(&r);
        assert!(
            t.contains("the sandbox supervisor exited while the command was running"),
            "{mode}: {t}"
        );
        // The call's group went with it.
        let start = Instant::now();
        while !processes_with(marker).is_empty() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{mode}: sleeper lives"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let next = f.sh("echo $PPID").await;
        assert!(!next.is_error(), "{mode}: {next:?}");
        let again = text(&next).trim().to_owned();
        assert_ne!(again, sup, "{mode}: a new supervisor");
        assert!(cmdline(&again).contains("--serve"), "{mode}");
    }
}

#[tokio::test]
async fn a_call_cancelled_before_its_command_started_leaves_no_command_behind() {
    let f = Arc::new(in_mode(SandboxMode::DangerFullAccess));
    let sup = text(&f.sh("echo $PPID").await).trim().to_owned();
    assert!(cmdline(&sup).contains("--serve"), "{}", cmdline(&sup));
    let signal = |sig: &str| {
        assert!(
            std::process::Command::new("kill")
                .args([sig, &sup])
                .status()
                .unwrap()
                .success()
        )
    };
    // A stopped supervisor: the request waits in its socket.
    signal("-STOP");
    let marker = "987.6593";
    let ctl = dsh_core::AbortController::new();
    let call = {
        let f = f.clone();
        let s = ctl.signal();
        tokio::spawn(async move {
            f.call_with(
                json!({"command": format!("sleep {marker}"), "description": "d"}),
                s,
            )
            .await
        })
    };
    // The call's temp dir is made in the same step that sends the request.
    let root = f.temp_parent();
    let start = Instant::now();
    loop {
        let sent = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .any(|session| std::fs::read_dir(session.path()).is_ok_and(|mut d| d.next().is_some()));
        if sent {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never sent");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    ctl.cancel();
    let r = call.await.unwrap();
    assert!(r.is_error(), "{r:?}");
    signal("-CONT");
    // The supervisor reads the request, then the order to kill what it started.
    let start = Instant::now();
    while !processes_with(marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the command outlived its call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!f.sh("true").await.is_error());
}
