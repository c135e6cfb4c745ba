//! Process control: a timeout and a cancellation end the whole process group and report what
//! was captured; a command ignoring SIGTERM is killed after the grace; a fork bomb is stopped by
//! the process limit; a disk-filling write is stopped by the file-size limit; whatever the shell
//! leaves running when it exits is ended; a helper whose starter died before it looked is no
//! shelter. Every check looks for leftovers in `/proc` by a marker that only the test's processes
//! carry.

use std::time::{Duration, Instant};

use super::support::*;
use dsh_core::AbortController;
use serde_json::json;

/// Waits up to two seconds for no live process to carry `marker`.
async fn gone(marker: &str) -> bool {
    for _ in 0..100 {
        if processes_with(marker).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Fails, naming them, if processes carrying `marker` are still alive after two seconds.
async fn assert_gone(marker: &str) {
    assert!(
        gone(marker).await,
        "left running: {:?}",
        processes_with(marker)
    );
}

/// Waits up to three seconds for `n` live processes to carry `marker`.
async fn running(marker: &str, n: usize) -> bool {
    for _ in 0..150 {
        if processes_with(marker).len() >= n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn the_timeout_kills_the_whole_group_and_reports_the_output_so_far() {
    let f = fixture();
    let marker = "987.6541";
    // Three sleepers: a background job, a double-forked orphan, and the foreground.
    let cmd = format!("echo started; sleep {marker}1 & (sleep {marker}2 &); sleep {marker}3");
    let f = std::sync::Arc::new(f);
    let task = {
        let f = f.clone();
        tokio::spawn(async move {
            f.call(json!({"command": cmd, "description": "d", "timeoutMs": 2500}))
                .await
        })
    };
    assert!(running(marker, 3).await, "the sleepers never started");
    let r = task.await.unwrap();
    assert_eq!(code(&r).as_deref(), Some("BASH_TIMEOUT"), "{r:?}");
    let t = text(&r);
    assert!(t.contains("timed out after 2500ms"), "{t}");
    assert!(t.contains("started"), "output so far is reported: {t}");
    assert_gone(marker).await;
}

#[tokio::test]
async fn cancellation_kills_the_group_and_reports_the_output_so_far() {
    let f = std::sync::Arc::new(fixture());
    let marker = "987.6542";
    let cmd = format!("echo before-cancel; sleep {marker}1 & sleep {marker}2");
    let ctl = AbortController::new();
    let task = {
        let f = f.clone();
        let signal = ctl.signal();
        tokio::spawn(async move {
            f.call_with(json!({"command": cmd, "description": "d"}), signal)
                .await
        })
    };
    assert!(running(marker, 2).await, "the sleepers never started");
    ctl.cancel();
    let r = task.await.unwrap();
    assert_eq!(code(&r).as_deref(), Some("ABORTED"), "{r:?}");
    let t = text(&r);
    assert!(t.contains("tool call aborted"), "{t}");
    assert!(t.contains("before-cancel"), "{t}");
    assert_gone(marker).await;
}

#[tokio::test]
async fn a_command_that_ignores_sigterm_is_killed_after_the_grace() {
    let f = fixture();
    let marker = "987.6543";
    let start = Instant::now();
    let r = f
        .call(json!({
            "command": format!("trap '' TERM; echo trapped; sleep {marker}1 & sleep {marker}2"),
            "description": "d",
            "timeoutMs": 400,
        }))
        .await;
    let elapsed = start.elapsed();
    assert_eq!(code(&r).as_deref(), Some("BASH_TIMEOUT"), "{r:?}");
    assert!(text(&r).contains("trapped"), "{}", text(&r));
    // 400 ms budget + 300 ms grace (the fixture's), then SIGKILL.
    assert!(elapsed >= Duration::from_millis(700), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert_gone(marker).await;
}

#[tokio::test]
async fn what_the_shell_leaves_running_is_ended_when_it_exits() {
    let f = fixture();
    let marker = "987.6544";
    let start = Instant::now();
    let r = f
        .sh(&format!("sleep {marker}1 & (sleep {marker}2 &); echo done"))
        .await;
    assert_eq!(text(&r), "done\n");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_gone(marker).await;
}

#[tokio::test]
async fn a_fork_bomb_is_stopped_by_the_process_limit() {
    let f = fixture_with(Default::default(), |c| c.max_processes = Some(48));
    let marker = "dsh-forkbomb-987";
    let start = Instant::now();
    let r = f
        .call(json!({
            // A fork bomb bounded by its depth (at most 2^8 shells and as many sleeps, so a
            // failing limit cannot exhaust the machine's pids), in a named shell so every fork
            // carries the marker in its command line. The limit must stop it long before.
            "command": format!(
                "bash -c 'b(){{ if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & fi; sleep 5; }}; b 7' {marker}"
            ),
            "description": "d",
            "timeoutMs": 10000,
        }))
        .await;
    assert!(!r.is_error(), "{r:?}");
    let t = text(&r);
    assert!(t.contains("[sandbox: process limit exceeded ("), "{t}");
    assert!(
        t.contains("limit 48); the command's process group was killed]"),
        "{t}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "{:?}",
        start.elapsed()
    );
    assert!(
        gone(marker).await,
        "forks left: {}",
        processes_with(marker).len()
    );
}

#[tokio::test]
async fn filling_the_temp_dir_is_stopped_by_a_file_size_limit() {
    let f = fixture();
    let r = f
        .sh("ulimit -f 1024; head -c 10485760 /dev/zero > $TMPDIR/fill; echo rc=$?; stat -c %s $TMPDIR/fill")
        .await;
    let t = text(&r);
    assert!(t.starts_with("rc=153\n1048576\n"), "{t}");
    assert!(t.contains("File size limit exceeded"), "{t}");
    assert!(
        t.ends_with("[file size limit exceeded: a write was stopped]"),
        "{t}"
    );
}

#[tokio::test]
async fn the_configured_file_size_limit_applies_to_every_command() {
    let f = fixture_with(Default::default(), |c| c.max_file_size = Some(65536));
    let r = f
        .sh("head -c 1000000 /dev/zero > big; stat -c %s big")
        .await;
    let t = text(&r);
    assert!(t.starts_with("65536\n"), "{t}");
    assert!(
        t.contains("[file size limit exceeded: a write was stopped]"),
        "{t}"
    );
}

#[tokio::test]
async fn a_shell_killed_by_a_signal_is_reported_as_such() {
    let f = fixture();
    let r = f.sh("kill -SEGV $$").await;
    assert!(!r.is_error());
    assert_eq!(text(&r), "[killed by signal 11 (SIGSEGV)]");
}

#[tokio::test]
async fn decisions_are_forgotten_once_results_are_final() {
    let f = fixture();
    for _ in 0..3 {
        f.sh("true").await;
    }
    f.call(json!({"command": "x"})).await;
    assert_eq!(f.tool.pending_decisions(), 0);
}

#[tokio::test]
async fn the_tool_deadline_of_the_timeout_policy_also_kills_the_group() {
    let f = fixture();
    dsh_guard::TimeoutPolicy::new(f.runtime.registry().clone())
        .with_overrides([("bash", 500u64)])
        .unwrap()
        .install(f.runtime.hooks())
        .keep();
    let marker = "987.6545";
    let r = f
        .sh(&format!("echo begun; sleep {marker}1 & sleep {marker}2"))
        .await;
    assert_eq!(code(&r).as_deref(), Some("TOOL_TIMEOUT"), "{r:?}");
    assert_eq!(text(&r), "Error: tool call timed out after 500ms");
    assert_gone(marker).await;
}

/// Runs the helper on `command` in its own process group (its watcher kills that group, never
/// the test's), saying `parent` started it.
fn helper_child(command: &str, parent: u32, ws: &std::path::Path) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let mut args = dsh_tool_bash::sandbox::SandboxArgs::new(
        dsh_tool_bash::SandboxMode::WorkspaceWrite,
        vec!["bash".into(), "-c".into(), command.into()],
    );
    args.roots.push(ws.to_path_buf());
    args.parent_pid = Some(parent);
    std::process::Command::new(env!("CARGO_BIN_EXE_dsh-tool-bash-helper"))
        .args(args.to_args())
        .current_dir(ws)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap()
}

#[test]
fn item3_a_command_whose_starter_died_before_the_helper_looked_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let ws = canonical(dir.path());
    // The helper's starter, already dead: a parent the helper can never have.
    let mut gone_starter = std::process::Command::new("true").spawn().unwrap();
    let dead = gone_starter.id();
    gone_starter.wait().unwrap();
    let marker = "987.6581";
    let mut child = helper_child(
        &format!("trap '' TERM INT; sleep {marker} & wait"),
        dead,
        &ws,
    );
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the command outlived its dead starter"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "{status:?}");
    let start = Instant::now();
    while !processes_with(marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the sleeper outlived its dead starter: {:?}",
            processes_with(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Control: named truly, the starter keeps its command alive until it is done.
    let out = helper_child("sleep 0.3; echo ok", std::process::id(), &ws)
        .wait_with_output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
}

fn danger_full_access() -> Fixture {
    fixture_with(
        dsh_tool_bash::SandboxSettings {
            mode: dsh_tool_bash::SandboxMode::DangerFullAccess,
            ..dsh_tool_bash::SandboxSettings::default()
        },
        |_| {},
    )
}

#[tokio::test]
async fn a_process_that_left_its_group_is_ended_once_its_command_is_done() {
    // Only `danger-full-access` lets a command call `setsid`: the process leaves the group the
    // tool ends, and outlives its shell.
    let f = danger_full_access();
    let marker = "987.6551";
    let r = f
        .sh(&format!(
            "setsid sleep {marker}1 >/dev/null 2>&1 </dev/null & \
             setsid sh -c 'setsid sleep {marker}2 >/dev/null 2>&1 </dev/null & sleep {marker}3' \
             >/dev/null 2>&1 </dev/null & echo started"
        ))
        .await;
    assert_eq!(text(&r), "started\n");
    assert_gone(marker).await;
}

#[tokio::test]
async fn a_process_that_left_its_group_lives_while_its_command_runs() {
    let f = danger_full_access();
    let marker = "987.6552";
    // The detached sleeper must still be there when the command looks for it at its end.
    let r = f
        .sh(&format!(
            "setsid sleep {marker}1 >/dev/null 2>&1 </dev/null & p=$!; sleep 0.6; \
             if kill -0 $p 2>/dev/null; then echo alive; else echo ended; fi"
        ))
        .await;
    assert_eq!(text(&r), "alive\n");
    assert_gone(marker).await;
}

#[tokio::test]
async fn a_process_that_left_its_group_is_ended_on_the_per_call_path_too() {
    // A command longer than a supervisor's message runs under a helper of its own.
    let f = danger_full_access();
    let marker = "987.6553";
    let padding = "#".repeat(70 * 1024);
    let r = f
        .sh(&format!(
            "setsid sleep {marker}1 >/dev/null 2>&1 </dev/null & echo started\n{padding}"
        ))
        .await;
    assert_eq!(text(&r), "started\n");
    assert_gone(marker).await;
}

#[tokio::test]
async fn a_process_that_left_its_group_is_ended_when_a_group_left_behind_ends_too() {
    // The shell leaves a member in its own group as well: the call counts as running until dsh
    // has ended that group, and the detached one is ended once it has.
    let f = danger_full_access();
    let marker = "987.6554";
    let r = f
        .sh(&format!(
            "setsid sleep {marker}1 >/dev/null 2>&1 </dev/null & \
             sleep {marker}2 >/dev/null 2>&1 </dev/null & echo started"
        ))
        .await;
    assert_eq!(text(&r), "started\n");
    assert_gone(marker).await;
}
