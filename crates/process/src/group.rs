//! A process group: counting its live members (from `/proc`) and ending it with `SIGTERM`, a
//! grace period, then `SIGKILL` until no member is left.
//!
//! Guarantees: [`ProcessGroup::terminate`] and [`ProcessGroup::kill`] return only when the group
//! has no live member (or a bounded number of `SIGKILL` rounds failed, reported as
//! [`Ended::Stuck`]). A group number cannot be reused while any member lives, so signalling a
//! group that still has one never reaches a stranger.

use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};

/// A process group, named by its id (the pid of the child that leads it: started with
/// `process_group(0)`, or by [`lead`](crate::lead)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProcessGroup {
    pgid: i32,
}

/// How a group ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// No member was left (or none ever was).
    Empty,
    /// Members survived every `SIGKILL` round (e.g. stuck in uninterruptible sleep): how many.
    Stuck(usize),
}

impl ProcessGroup {
    /// The group whose id is `pgid` (its leader's pid); `None` for 0 and 1, which name no group
    /// a child of this process can lead (and `kill(-1)` would signal every process).
    pub fn new(pgid: u32) -> Option<ProcessGroup> {
        i32::try_from(pgid)
            .ok()
            .filter(|p| *p > 1)
            .map(|pgid| ProcessGroup { pgid })
    }

    /// The group's id.
    pub fn id(self) -> u32 {
        self.pgid.unsigned_abs()
    }

    /// Sends `sig` to every member; a group with no member is not an error.
    pub(crate) fn signal(self, sig: Signal) {
        if let Some(pid) = Pid::from_raw(self.pgid) {
            let _ = kill_process_group(pid, sig);
        }
    }

    /// Live (non-zombie) members, read from `/proc` (blocking: call on a blocking thread).
    pub fn live_members_blocking(self) -> usize {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return 0;
        };
        dir.filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
            })
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter_map(|stat| parse_stat(&stat))
            .filter(|(state, pgrp)| *pgrp == self.pgid && *state != 'Z' && *state != 'X')
            .count()
    }

    /// Live members, counted on a blocking thread (on this one when the runtime cannot give one,
    /// as while it shuts down).
    pub async fn live_members(self) -> usize {
        match tokio::task::spawn_blocking(move || self.live_members_blocking()).await {
            Ok(n) => n,
            Err(_) => self.live_members_blocking(),
        }
    }

    /// Whether no process, not even a zombie, is in the group (`kill(-pgid, 0)` answers
    /// `ESRCH`): then there is nothing to end, and no `/proc` scan is needed. `false` when
    /// anything is left, or when the kernel will not say.
    pub fn is_gone(self) -> bool {
        match Pid::from_raw(self.pgid) {
            Some(pid) => {
                rustix::process::test_kill_process_group(pid) == Err(rustix::io::Errno::SRCH)
            }
            None => true,
        }
    }

    /// `SIGTERM` (and `SIGCONT`, so a stopped member acts on it), up to `grace` for the members
    /// to leave, then [`kill`](Self::kill).
    ///
    /// The usual case, a group that left nothing behind, costs one `kill(-pgid, 0)`: the group
    /// is already gone and nothing is scanned or signalled.
    pub async fn terminate(self, grace: Duration) -> Ended {
        if self.is_gone() || self.live_members().await == 0 {
            return Ended::Empty;
        }
        self.signal(Signal::TERM);
        self.signal(Signal::CONT);
        let until = tokio::time::Instant::now() + grace;
        // Most members die at once on SIGTERM: look again soon, then every 20 ms.
        let mut pause = Duration::from_millis(1);
        while tokio::time::Instant::now() < until {
            tokio::time::sleep(pause.min(until - tokio::time::Instant::now())).await;
            pause = (pause * 2).min(Duration::from_millis(20));
            if self.is_gone() || self.live_members().await == 0 {
                return Ended::Empty;
            }
        }
        self.kill().await
    }

    /// `SIGKILL` rounds until no member is left (at most about two seconds).
    pub async fn kill(self) -> Ended {
        let mut left = 0;
        for round in 0..100 {
            self.signal(Signal::KILL);
            // The first look comes soon: SIGKILL takes effect at once unless a member is stuck.
            let pause = if round == 0 { 1 } else { 20 };
            tokio::time::sleep(Duration::from_millis(pause)).await;
            if self.is_gone() {
                return Ended::Empty;
            }
            left = self.live_members().await;
            if left == 0 {
                return Ended::Empty;
            }
        }
        Ended::Stuck(left)
    }
}

/// `(state, pgrp)` from a `/proc/<pid>/stat` line; the command name may hold spaces and parens,
/// so fields are counted after its last `)`.
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn stat_lines_parse_whatever_the_command_name(
            comm in "[ -~]{0,16}", state in "[RSDZTX]", pgrp in 1i32..1_000_000,
        ) {
            let line = format!("123 ({comm}) {state} 1 {pgrp} 5 0 -1 4194560 0 0");
            let want = state.chars().next().map(|c| (c, pgrp));
            proptest::prop_assert_eq!(parse_stat(&line), want);
        }
    }

    #[test]
    fn no_group_is_named_by_0_or_1() {
        assert_eq!(ProcessGroup::new(0), None);
        assert_eq!(ProcessGroup::new(1), None);
        assert_eq!(ProcessGroup::new(u32::MAX), None);
        assert_eq!(ProcessGroup::new(42).map(ProcessGroup::id), Some(42));
    }
}
