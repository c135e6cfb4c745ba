//! The groups this process leads: started as group leaders ([`lead`]), owned by a guard that
//! kills the group when dropped ([`KillOnDrop`]) or ends it gracefully on a task of its own
//! ([`EndOnDrop`]), and one registry of every group whose guard is still armed, so a process
//! about to exit at once kills them all first ([`kill_all_live_groups`]).
//!
//! Guarantees: a group is in the registry from the moment its guard is made until the guard saw
//! it empty (disarmed) or killed it; [`kill_all_live_groups`] sends `SIGKILL` to every group in
//! it, whoever started it (a `bash` command, an MCP server, a hook). An [`EndOnDrop`] group is in
//! the registry through its whole graceful end, and is killed at once if the runtime goes
//! away first.

use std::time::Duration;

use rustix::process::Signal;

use crate::group::{Ended, ProcessGroup};

/// Every process group a guard of this process holds armed (a multiset: a group's id can be
/// held twice only if it was adopted twice, and each guard removes one).
static LIVE: parking_lot::Mutex<Vec<ProcessGroup>> = parking_lot::Mutex::new(Vec::new());

/// Sends `SIGKILL` to every process group a guard of this process holds and that has not been
/// seen to end; returns how many. For a process about to exit without unwinding (a second
/// Ctrl-C): nothing it started may outlive it. The guards stay armed (their own drop, if it
/// comes, signals a group that is gone, which is harmless).
pub fn kill_all_live_groups() -> usize {
    let groups: Vec<ProcessGroup> = LIVE.lock().clone();
    for group in &groups {
        group.signal(Signal::KILL);
    }
    groups.len()
}

/// The process groups a guard of this process holds and that have not been seen to end.
pub fn live_groups() -> Vec<ProcessGroup> {
    LIVE.lock().clone()
}

/// Starts `command` as the leader of a process group of its own (`process_group(0)`: the child
/// and everything it starts, unless one leaves the group), owned from the start by a
/// [`KillOnDrop`]. The group is in the registry before this returns. Whatever else `command`
/// says (pipes, `kill_on_drop`, ...) is the caller's.
///
/// # Errors
///
/// The spawn's own error (the program missing, not executable, ...).
pub fn lead(
    command: &mut tokio::process::Command,
) -> std::io::Result<(tokio::process::Child, KillOnDrop)> {
    let child = command.process_group(0).spawn()?;
    let guard = KillOnDrop {
        group: child.id().and_then(ProcessGroup::new).map(register),
    };
    Ok((child, guard))
}

fn register(group: ProcessGroup) -> ProcessGroup {
    LIVE.lock().push(group);
    group
}

fn forget(group: ProcessGroup) {
    let mut live = LIVE.lock();
    if let Some(at) = live.iter().position(|g| *g == group) {
        live.swap_remove(at);
    }
}

/// Owns a process group: sends it `SIGKILL` when dropped, unless disarmed (the group was seen
/// to end). While armed, the group is one of [`kill_all_live_groups`]'s.
#[derive(Debug)]
pub struct KillOnDrop {
    group: Option<ProcessGroup>,
}

impl KillOnDrop {
    /// Takes ownership of `group`, led by a child started elsewhere (by a supervisor process,
    /// say), and puts it in the registry.
    pub fn new(group: ProcessGroup) -> KillOnDrop {
        KillOnDrop {
            group: Some(register(group)),
        }
    }

    /// The group, while the guard is armed.
    pub fn group(&self) -> Option<ProcessGroup> {
        self.group
    }

    /// The group ended on its own terms: nothing to do on drop, and it leaves the registry.
    pub fn disarm(&mut self) {
        if let Some(g) = self.group.take() {
            forget(g);
        }
    }

    /// [`ProcessGroup::terminate`]: `SIGTERM`, up to `grace`, then `SIGKILL` until no member is
    /// left; disarmed when none is. Nothing to do when already disarmed.
    pub async fn terminate(&mut self, grace: Duration) -> Ended {
        match self.group {
            Some(g) => self.settle(g.terminate(grace).await),
            None => Ended::Empty,
        }
    }

    /// [`ProcessGroup::kill`]: `SIGKILL` until no member is left; disarmed when none is.
    pub async fn kill(&mut self) -> Ended {
        match self.group {
            Some(g) => self.settle(g.kill().await),
            None => Ended::Empty,
        }
    }

    fn settle(&mut self, ended: Ended) -> Ended {
        if ended == Ended::Empty {
            self.disarm();
        }
        ended
    }

    /// Hands the group to a task of the current runtime that ends it once the returned guard is
    /// dropped: [`terminate`](Self::terminate) with `grace`. The group stays in the registry
    /// until it has ended; if the runtime shuts down first (the task dropped), it gets `SIGKILL`
    /// at once. Outside a runtime, the returned guard kills the group when dropped.
    pub fn end_on_drop(self, grace: Duration) -> EndOnDrop {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return EndOnDrop {
                inner: Inner::Kill { _guard: self },
            };
        };
        let (end, ended) = tokio::sync::oneshot::channel::<()>();
        let (finished, done) = tokio::sync::oneshot::channel::<()>();
        let mut owned = self;
        runtime.spawn(async move {
            // However the wait ends (the guard dropped, or the sender with it), end the group.
            let _ = ended.await;
            owned.terminate(grace).await;
            let _ = finished.send(());
            // Dropped here: `SIGKILL` once more unless it was seen empty.
        });
        EndOnDrop {
            inner: Inner::Watched { _end: end, done },
        }
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

/// Owns a process group watched by a task (see [`KillOnDrop::end_on_drop`]): dropping it starts
/// the group's graceful end, which goes on without the caller; [`EndOnDrop::end`] starts it and
/// waits for it.
#[derive(Debug)]
pub struct EndOnDrop {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    /// Dropping the sender tells the watching task to end the group; `done` resolves once it
    /// has (or the task was dropped with the runtime, which killed the group).
    Watched {
        _end: tokio::sync::oneshot::Sender<()>,
        done: tokio::sync::oneshot::Receiver<()>,
    },
    /// No runtime to end it on: killed when dropped.
    Kill { _guard: KillOnDrop },
}

impl EndOnDrop {
    /// Ends the group as dropping the guard does, and returns once it has ended.
    pub async fn end(self) {
        match self.inner {
            Inner::Watched { _end, done } => {
                drop(_end);
                let _ = done.await;
            }
            Inner::Kill { _guard } => drop(_guard),
        }
    }
}
