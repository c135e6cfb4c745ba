//! The process groups a process leads: ended whole (a member that ignores `SIGTERM` included),
//! killed when their guard is dropped, ended gracefully by a watching task, and all killed at
//! once through the one registry of live groups.
//!
//! The registry is the process's: these tests run one at a time (`SERIAL`), so a kill-all in
//! one never reaches another's groups.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use dsh_process::{Ended, KillOnDrop, ProcessGroup, kill_all_live_groups, lead, live_groups};
use dsh_test_support::processes_with;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits up to ten seconds for `done`; whether it came.
async fn eventually(done: impl Fn() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done()
}

/// A shell that ignores `SIGTERM` with a child `sleep <marker>` that does too, led by `lead`;
/// returns once the child runs. The shell's own command line holds the marker too, so the
/// child runs once two processes hold it (the shell alone was seen before its fork, and a test
/// then counted one member).
async fn stubborn(marker: &str) -> (tokio::process::Child, KillOnDrop) {
    let mut command = tokio::process::Command::new("sh");
    command.args(["-c", &format!("trap '' TERM; sleep {marker} & wait")]);
    let started = lead(&mut command).unwrap();
    assert!(
        eventually(|| processes_with(marker).len() >= 2).await,
        "the child never started"
    );
    started
}

/// The fast path of the teardown: a group whose every member was reaped is gone (nothing to
/// scan or signal), one with a member left is not, and ending that member leaves it gone.
#[tokio::test]
async fn a_group_is_gone_only_once_no_member_is_left() {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let _one = SERIAL.lock().await;
    // The leader exits at once; its background child holds stdout open until it is killed.
    let mut leader = std::process::Command::new("bash")
        .args(["-c", "sleep 987.6545 & echo started"])
        .stdout(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let group = ProcessGroup::new(leader.id()).unwrap();
    let mut out = leader.stdout.take().unwrap();
    let mut first = [0u8; 8];
    out.read_exact(&mut first).unwrap();
    leader.wait().unwrap();
    assert!(
        !group.is_gone(),
        "the background sleep is still in the group"
    );
    assert_eq!(group.terminate(Duration::from_secs(5)).await, Ended::Empty);
    // The pipe reaches EOF only when the last member holding it is dead.
    let mut rest = Vec::new();
    out.read_to_end(&mut rest).unwrap();
    assert!(eventually(|| processes_with("987.6545").is_empty()).await);

    let mut alone = std::process::Command::new("true")
        .process_group(0)
        .spawn()
        .unwrap();
    let group = ProcessGroup::new(alone.id()).unwrap();
    alone.wait().unwrap();
    assert!(group.is_gone());
    assert_eq!(group.terminate(Duration::from_secs(5)).await, Ended::Empty);
}

#[tokio::test]
async fn a_led_group_is_live_until_terminated_even_when_its_members_ignore_sigterm() {
    let _one = SERIAL.lock().await;
    let (mut child, mut guard) = stubborn("987.6546").await;
    let group = guard.group().unwrap();
    assert_eq!(group.id(), child.id().unwrap());
    assert!(live_groups().contains(&group));
    assert!(group.live_members().await >= 2, "the shell and its sleep");
    assert_eq!(
        guard.terminate(Duration::from_millis(100)).await,
        Ended::Empty
    );
    assert!(
        guard.group().is_none(),
        "disarmed once it was seen to be empty"
    );
    assert!(!live_groups().contains(&group));
    assert!(processes_with("987.6546").is_empty());
    child.wait().await.unwrap();
}

#[tokio::test]
async fn dropping_the_guard_kills_the_group_and_takes_it_off_the_registry() {
    let _one = SERIAL.lock().await;
    let (mut child, guard) = stubborn("987.6547").await;
    let group = guard.group().unwrap();
    drop(guard);
    assert!(!live_groups().contains(&group));
    assert!(eventually(|| processes_with("987.6547").is_empty()).await);
    child.wait().await.unwrap();
}

#[tokio::test]
async fn an_end_on_drop_group_is_ended_by_its_task_and_stays_live_until_it_is() {
    let _one = SERIAL.lock().await;
    let (mut child, guard) = stubborn("987.6548").await;
    let group = guard.group().unwrap();
    let watched = guard.end_on_drop(Duration::from_millis(300));
    assert!(live_groups().contains(&group), "still owned, by its task");
    drop(watched);
    // Its members ignore SIGTERM: they go only with the SIGKILL after the grace.
    assert!(eventually(|| processes_with("987.6548").is_empty()).await);
    assert!(
        eventually(|| !live_groups().contains(&group)).await,
        "the task forgets the group once it saw it empty"
    );
    child.wait().await.unwrap();
}

#[tokio::test]
async fn ending_an_end_on_drop_group_returns_once_it_has_ended() {
    let _one = SERIAL.lock().await;
    let (mut child, guard) = stubborn("987.6551").await;
    let group = guard.group().unwrap();
    let watched = guard.end_on_drop(Duration::from_millis(100));
    watched.end().await;
    // No waiting after it: the members (which ignore SIGTERM) are gone when it returns.
    assert!(processes_with("987.6551").is_empty());
    assert!(!live_groups().contains(&group));
    child.wait().await.unwrap();
}

#[tokio::test]
async fn kill_all_reaches_every_group_a_guard_holds_whoever_holds_it() {
    let _one = SERIAL.lock().await;
    let (mut a, guard_a) = stubborn("987.6549").await;
    let (mut b, guard_b) = stubborn("987.6550").await;
    let watched = guard_b.end_on_drop(Duration::from_secs(60));
    assert!(kill_all_live_groups() >= 2);
    assert!(eventually(|| processes_with("987.6549").is_empty()).await);
    assert!(eventually(|| processes_with("987.6550").is_empty()).await);
    a.wait().await.unwrap();
    b.wait().await.unwrap();
    drop((guard_a, watched));
}
