//! Unit test of the process group teardown's fast path (the group type is private to the crate).

use std::time::Duration;

use dsh_test_support::processes_with;

use crate::group::{Ended, ProcessGroup};

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

/// The fast path of the teardown: a group whose every member was reaped is gone (nothing to
/// scan or signal), one with a member left is not, and ending that member leaves it gone.
#[tokio::test]
async fn a_group_is_gone_only_once_no_member_is_left() {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
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
    assert!(gone("987.6545").await);

    let mut alone = std::process::Command::new("true")
        .process_group(0)
        .spawn()
        .unwrap();
    let group = ProcessGroup::new(alone.id()).unwrap();
    alone.wait().unwrap();
    assert!(group.is_gone());
    assert_eq!(group.terminate(Duration::from_secs(5)).await, Ended::Empty);
}
