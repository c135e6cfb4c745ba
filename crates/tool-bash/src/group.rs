//! The command's process group: counting its live members (from `/proc`) and ending it with
//! `SIGTERM`, a grace period, then `SIGKILL` until no member is left.
//!
//! Guarantees: [`ProcessGroup::terminate`] returns only when the group has no live member (or a
//! bounded number of `SIGKILL` rounds failed, reported); dropping a [`KillOnDrop`] sends
//! `SIGKILL` to the group, so an abandoned call leaves nothing running. A group number cannot be
//! reused while any member lives, so signalling it never reaches a stranger.

use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};

/// A process group led by a child spawned with `process_group(0)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessGroup {
    pgid: i32,
}

/// How a group ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// No member was left (or none ever was).
    Empty,
    /// Members survived every `SIGKILL` round (e.g. stuck in uninterruptible sleep).
    Stuck(usize),
}

impl ProcessGroup {
    /// The group whose id is `pgid` (the leader's pid).
    pub fn new(pgid: u32) -> Option<ProcessGroup> {
        i32::try_from(pgid)
            .ok()
            .filter(|p| *p > 1)
            .map(|pgid| ProcessGroup { pgid })
    }

    /// Sends `sig` to every member; a group with no member is not an error.
    pub fn signal(&self, sig: Signal) {
        if let Some(pid) = Pid::from_raw(self.pgid) {
            let _ = kill_process_group(pid, sig);
        }
    }

    /// Live (non-zombie) members, read from `/proc` (blocking: call on a blocking thread).
    pub fn live_members_blocking(&self) -> usize {
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

    /// Whether no process, not even a zombie, is in the group (`kill(-pgid, 0)` answers
    /// `ESRCH`): then there is nothing to end, and no `/proc` scan is needed. `false` when
    /// anything is left, or when the kernel will not say.
    pub fn is_gone(&self) -> bool {
        match Pid::from_raw(self.pgid) {
            Some(pid) => {
                rustix::process::test_kill_process_group(pid) == Err(rustix::io::Errno::SRCH)
            }
            None => true,
        }
    }

    /// Live members, counted on a blocking thread.
    pub async fn live_members(&self) -> usize {
        let g = *self;
        tokio::task::spawn_blocking(move || g.live_members_blocking())
            .await
            .unwrap_or(0)
    }

    /// `SIGTERM`, up to `grace` for the members to leave, then `SIGKILL` until none is left.
    ///
    /// The usual case, a command that left nothing behind, costs one `kill(-pgid, 0)`: the
    /// group is already gone and nothing is scanned or signalled.
    pub async fn terminate(&self, grace: Duration) -> Ended {
        if self.is_gone() || self.live_members().await == 0 {
            return Ended::Empty;
        }
        self.signal(Signal::TERM);
        // A stopped member would never act on SIGTERM.
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
    pub async fn kill(&self) -> Ended {
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
pub fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// Every process group a command of this process leads and that has not ended, so that a
/// process about to exit at once (a second Ctrl-C) can end them all first.
static LIVE: parking_lot::Mutex<Vec<i32>> = parking_lot::Mutex::new(Vec::new());

/// Sends `SIGKILL` to every process group a `bash` call of this process started and that has
/// not ended yet; returns how many. For a process about to exit without unwinding (a second
/// Ctrl-C): nothing it started may outlive it.
pub fn kill_all_live_groups() -> usize {
    let groups: Vec<i32> = LIVE.lock().clone();
    for pgid in &groups {
        ProcessGroup { pgid: *pgid }.signal(Signal::KILL);
    }
    groups.len()
}

/// Sends `SIGKILL` to the group when dropped, unless disarmed (the group already ended). While
/// armed, the group is one of [`kill_all_live_groups`]'s.
pub struct KillOnDrop {
    group: Option<ProcessGroup>,
}

impl KillOnDrop {
    /// Arms the guard for `group`.
    pub fn new(group: ProcessGroup) -> KillOnDrop {
        LIVE.lock().push(group.pgid);
        KillOnDrop { group: Some(group) }
    }
    /// The group ended on its own terms: nothing to do on drop.
    pub fn disarm(&mut self) {
        if let Some(g) = self.group.take() {
            forget(g);
        }
    }
}

fn forget(g: ProcessGroup) {
    let mut live = LIVE.lock();
    if let Some(at) = live.iter().position(|p| *p == g.pgid) {
        live.swap_remove(at);
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(g) = self.group.take() {
            g.signal(Signal::KILL);
            forget(g);
        }
    }
}
