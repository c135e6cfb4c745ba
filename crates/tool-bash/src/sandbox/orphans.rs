//! Processes that left their command's process group (`setsid`, `setpgid`: only a
//! `danger-full-access` command may, the contained modes' seccomp filter refuses both) and
//! outlived the shell that started them.
//!
//! The supervisor is the child subreaper of everything it starts (`PR_SET_CHILD_SUBREAPER`), so
//! a process whose parent exits becomes the supervisor's child instead of init's. Any child of
//! the supervisor that is not a command's shell is such an adopted process:
//! - once dead, it is reaped (a process adopted while still in a live command's group ends with
//!   that group, and would otherwise stay a zombie of the supervisor);
//! - while no command of the session is running, a live one is ended (`SIGKILL`, with its own
//!   group when it leads one): no command is left that could still be using it;
//! - when dsh is gone, every one of them is ended with the groups.
//!
//! The per-call helper (the path taken when no supervisor can start, or for a command too long
//! for its socket) is the subreaper of its one command the same way, and ends what it adopted
//! once the command has exited ([`end_adopted`]).
//!
//! Only the supervisor's children are touched, never a process of another parent, and never a
//! command's shell (its own thread waits for it).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use rustix::process::{Pid, Signal, WaitOptions, getpid, kill_process, kill_process_group};

/// The commands' shells not yet waited for: never reaped nor signalled here.
#[derive(Default)]
pub(crate) struct Shells {
    pids: Mutex<HashSet<i32>>,
    /// Set when a shell exits (its orphans are adopted then) and when a sweep ended something
    /// (their own children are adopted next): the next sweep has work.
    dirty: AtomicBool,
}

impl Shells {
    /// A command's shell was started.
    pub(crate) fn started(&self, pid: i32) {
        self.pids.lock().insert(pid);
    }

    /// A command's shell was waited for.
    pub(crate) fn ended(&self, pid: i32) {
        self.pids.lock().remove(&pid);
        self.dirty.store(true, Ordering::Release);
    }
}

/// Makes this process the child subreaper of its descendants. Without it (an old kernel) an
/// escaped process goes to init, as it did before.
pub(crate) fn adopt() {
    let _ = rustix::process::set_child_subreaper(Some(getpid()));
}

/// Ends every adopted process and waits (a little) until none is left: the per-call helper's
/// last act, once its command has exited. A process adopted as each one ends (its own child,
/// in a session of its own) is ended in the next round.
pub(crate) fn end_adopted() {
    let shells = Arc::new(Shells::default());
    for _ in 0..100 {
        if sweep(&shells, true, true) == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Reaps the adopted children that are dead and, when `idle` (no command running) or at dsh's
/// end, ends the live ones. Does nothing unless something may have changed since the last
/// sweep, except at dsh's end (`force`). Returns how many adopted children it saw.
pub(crate) fn sweep(shells: &Arc<Shells>, idle: bool, force: bool) -> usize {
    if !force && !shells.dirty.swap(false, Ordering::AcqRel) {
        return 0;
    }
    let me = getpid().as_raw_nonzero().get();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut seen = 0;
    let mut look_again = false;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Some(stat) = Stat::read(pid) else {
            continue;
        };
        if stat.ppid != me || shells.pids.lock().contains(&pid) {
            continue;
        }
        let Some(p) = Pid::from_raw(pid) else {
            continue;
        };
        seen += 1;
        if stat.state == b'Z' {
            let _ = rustix::process::waitpid(Some(p), WaitOptions::NOHANG);
        } else if idle || force {
            let _ = if stat.pgrp == pid {
                kill_process_group(p, Signal::KILL)
            } else {
                kill_process(p, Signal::KILL)
            };
            // Reaped, and its own children (adopted in turn) looked at, on the next sweep.
            look_again = true;
        } else {
            // Spared while a command runs: looked at again until the session is idle (the
            // command that ends last may not be the one whose shell exit marked the work).
            look_again = true;
        }
    }
    if look_again {
        shells.dirty.store(true, Ordering::Release);
    }
    seen
}

/// What `/proc/<pid>/stat` says of a process: its state, parent and group.
struct Stat {
    state: u8,
    ppid: i32,
    pgrp: i32,
}

impl Stat {
    fn read(pid: i32) -> Option<Stat> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name is in parentheses and may hold anything: the fields after it start
        // past the last `)`.
        let rest = &text[text.rfind(')')? + 1..];
        let mut fields = rest.split_ascii_whitespace();
        let state = *fields.next()?.as_bytes().first()?;
        let ppid = fields.next()?.parse().ok()?;
        let pgrp = fields.next()?.parse().ok()?;
        Some(Stat { state, ppid, pgrp })
    }
}
