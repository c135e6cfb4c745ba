//! # dsh-process
//!
//! The process groups dsh leads, in one place: every process dsh starts to do work for it (a
//! `bash` command, a stdio MCP server, a user command hook) leads a process group of its own,
//! so that it and everything it starts can be ended together, and that group is owned by a
//! guard in one registry of live groups.
//!
//! - [`lead`]: start a command as a group leader, owned from the start by a [`KillOnDrop`].
//! - [`ProcessGroup`]: a group by its id: its live members (from `/proc`), and ending it whole
//!   ([`ProcessGroup::terminate`]: `SIGTERM` and `SIGCONT`, a grace period, then `SIGKILL`
//!   until no member is left; [`ProcessGroup::kill`]).
//! - [`KillOnDrop`]: owns a group (one [`lead`] started, or one led by a child another process
//!   started, [`KillOnDrop::new`]): `SIGKILL` when dropped unless it was seen to end;
//!   [`KillOnDrop::end_on_drop`] turns it into an [`EndOnDrop`], whose drop ends the group
//!   gracefully on a task of its own (and with `SIGKILL` if the runtime goes first).
//! - [`kill_all_live_groups`]: `SIGKILL` to every group a guard still holds, for a process
//!   about to exit at once (a second Ctrl-C); [`live_groups`] lists them.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! use std::time::Duration;
//! use dsh_process::{Ended, lead, live_groups};
//!
//! let mut command = tokio::process::Command::new("sh");
//! command.args(["-c", "sleep 30 & wait"]);
//! let (_child, mut guard) = lead(&mut command)?;
//! let group = guard.group().expect("a child that just started has a pid");
//! assert!(live_groups().contains(&group));
//! assert_eq!(guard.terminate(Duration::from_millis(500)).await, Ended::Empty);
//! assert!(!live_groups().contains(&group));
//! # Ok(()) }
//! ```
//!
//! It deliberately does NOT: follow a process that leaves its group (`setsid`, `setpgid`: the
//! `bash` tool's seccomp filter refuses those to a contained command, and its supervisor, their
//! subreaper, ends them in `danger-full-access`), decide when a group
//! should end (its owners do), or wait for a child's exit status (the owner holds the child).
//! Linux only: members are counted from `/proc`.
//!
//! Guarantees: a group is in the registry from the moment its guard is made until the guard
//! saw it empty or killed it, so [`kill_all_live_groups`] reaches every group any component of
//! the process still owns; a group with a live member keeps its id, so signalling it never
//! reaches a stranger. (A registered group whose members all ended on their own and that no
//! owner looked at since could, in theory, see its id reused by a new group after the system's
//! pids wrap around; owners disarm a guard as soon as they see its group empty.)
//!
//! No `unsafe`: the signals go through `rustix`.

mod group;
mod live;
mod withheld;

pub use group::{Ended, ProcessGroup};
pub use live::{EndOnDrop, KillOnDrop, kill_all_live_groups, lead, live_groups};
pub use withheld::WITHHELD_ENV;
