//! The session supervisor: the helper started once per session and sandbox mode
//! (`--serve`), which starts each command dsh asks for, so that a call costs one `exec` (the
//! shell's) rather than two (the helper's, then the shell's).
//!
//! It talks to dsh over the `SOCK_SEQPACKET` socket it gets as its stdin (messages in
//! [`super::wire`]). At start it applies to itself every containment step of its mode but the
//! seccomp filter — the file-size limit, `no_new_privs`, capabilities, Landlock (writable: the
//! roots in `workspace-write`, and the session's temp root under which each call gets its own
//! dir) — all inherited by every command. The seccomp filter of a contained mode refuses
//! `setpgid`, which starting each command in a group of its own needs, so the supervisor does
//! not carry it: each command's child process, between `fork` and `exec`, first makes its own
//! group and then installs the filter (the crate's one `unsafe` block, in
//! `in_child`'s caller), so a contained command still costs one `exec`, the shell's.
//!
//! Guarantees: each command runs in a new process group and its exit status is reported; when
//! dsh goes (the socket reaches end-of-file, or this process is re-parented, even after a
//! `SIGKILL` of dsh), every group it started and dsh did not report finished is sent `SIGKILL`
//! before this process exits. A process that left its command's group and outlived its shell
//! is adopted by this process and ended once no command is running, or when dsh goes
//! ([`super::orphans`]). It takes no signal of the groups it starts (it leads a group of
//! its own).

use std::collections::HashMap;
use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendFlags};
use rustix::process::{Pid, Signal, kill_process_group};

use seccompiler::BpfProgram;

use super::orphans::{self, Shells};
use super::wire::{self, RunRequest};
use super::{SandboxArgs, net_filter, restrict};

/// How often the supervisor checks that dsh is still its parent (the socket's end-of-file is
/// the usual sign; this catches a dsh whose socket end was inherited by something else).
const PARENT_POLL: Duration = Duration::from_millis(200);

/// The groups started and not yet reported finished, by call number.
type Live = Arc<Mutex<HashMap<u64, i32>>>;

/// Sends one message to dsh (fails quietly: dsh gone is noticed by the reader).
fn send(msg: &[u8]) {
    let _ = rustix::net::send(std::io::stdin().as_fd(), msg, SendFlags::NOSIGNAL);
}

/// `SIGKILL` to every group in `live` and to every process that left its group (see
/// [`orphans`]), then exit.
fn end_all(live: &Live, shells: &Arc<Shells>, code: i32) -> ! {
    let groups = live.lock();
    let _ = orphans::sweep(shells, true, true);
    for pgid in groups.values() {
        if let Some(pid) = Pid::from_raw(*pgid) {
            let _ = kill_process_group(pid, Signal::KILL);
        }
    }
    std::process::exit(code)
}

/// The supervisor's whole life (see the module doc). Never returns.
pub fn serve(args: &SandboxArgs) -> ! {
    // The filter is compiled once, here, so that each command's child only installs it.
    let filter = restrict(args).and_then(|(_, choice)| {
        choice
            .map(|c| {
                let program = net_filter::build(c.deny_chmod, c.deny_unix_sockets)
                    .map_err(|e| super::SetupError::new("build the network filter", e))?;
                Ok((c, Arc::new(program)))
            })
            .transpose()
    });
    let (choice, program) = match filter {
        Ok(Some((choice, program))) => (Some(choice), Some(program)),
        Ok(None) => (None, None),
        Err(e) => {
            send(&wire::encode([b"fail".as_slice(), e.message.as_bytes()]));
            super::fail(&e.message)
        }
    };
    let deny_unix = choice.is_some_and(|f| f.deny_unix_sockets);
    send(&wire::encode([
        b"ready".as_slice(),
        if deny_unix { b"1" } else { b"0" },
    ]));
    let live: Live = Arc::new(Mutex::new(HashMap::new()));
    let shells = Arc::new(Shells::default());
    orphans::adopt();
    let parent = args
        .parent_pid
        .unwrap_or_else(std::os::unix::process::parent_id);
    {
        let (live, shells) = (live.clone(), shells.clone());
        std::thread::spawn(move || {
            loop {
                if std::os::unix::process::parent_id() != parent {
                    end_all(&live, &shells, 0);
                }
                {
                    // Held through the sweep: no command starts meanwhile, so "no command
                    // running" stays true and a shell just forked is never taken for an orphan.
                    let groups = live.lock();
                    let _ = orphans::sweep(&shells, groups.is_empty(), false);
                }
                std::thread::sleep(PARENT_POLL);
            }
        });
    }
    let mut buf = vec![0u8; wire::MAX_MESSAGE];
    loop {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let got = rustix::net::recvmsg(
            std::io::stdin().as_fd(),
            &mut [IoSliceMut::new(&mut buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        );
        let got = match got {
            Ok(g) => g,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => end_all(&live, &shells, 1),
        };
        if got.bytes == 0 {
            // dsh closed its end: it is gone (or done with this mode).
            end_all(&live, &shells, 0);
        }
        let mut fds: Vec<OwnedFd> = Vec::new();
        for msg in control.drain() {
            if let RecvAncillaryMessage::ScmRights(rights) = msg {
                fds.extend(rights);
            }
        }
        if got
            .flags
            .intersects(ReturnFlags::TRUNC | ReturnFlags::CTRUNC)
        {
            continue;
        }
        let Some(fields) = wire::decode(&buf[..got.bytes]) else {
            continue;
        };
        match fields.split_first() {
            Some((&b"run", rest)) => {
                if let Some(req) = RunRequest::decode(rest) {
                    start(req, fds, &live, &shells, program.as_ref());
                }
            }
            Some((&b"done", [id])) => {
                if let Some(id) = wire::number::<u64>(id) {
                    live.lock().remove(&id);
                }
            }
            Some((&b"kill", [id])) => {
                let pgid = wire::number::<u64>(id).and_then(|id| live.lock().remove(&id));
                if let Some(pid) = pgid.and_then(Pid::from_raw) {
                    let _ = kill_process_group(pid, Signal::KILL);
                }
            }
            _ => {}
        }
    }
}

/// Starts one command with the two descriptors as its stdout and stderr, in a process group of
/// its own and under `filter` (a contained mode's seccomp program), reports its pid, and leaves
/// a thread to report its exit.
fn start(
    req: RunRequest,
    fds: Vec<OwnedFd>,
    live: &Live,
    shells: &Arc<Shells>,
    filter: Option<&Arc<BpfProgram>>,
) {
    let id = req.id.to_string();
    let refuse = |why: &str| {
        send(&wire::encode([
            b"spawn-failed".as_slice(),
            id.as_bytes(),
            why.as_bytes(),
        ]))
    };
    let (Ok([stdout, stderr]), Some((program, rest))) =
        (<[OwnedFd; 2]>::try_from(fds), req.argv.split_first())
    else {
        return refuse("malformed request");
    };
    let mut cmd = Command::new(program);
    if !req.arg0.is_empty() {
        cmd.arg0(&req.arg0);
    }
    cmd.args(rest)
        .current_dir(&req.cwd)
        .envs(req.env)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    match filter {
        Some(program) => {
            let program = program.clone();
            // SAFETY: `pre_exec` requires the closure to be safe to run in the child between
            // `fork` and `exec`, where only async-signal-safe work is allowed (another thread of
            // this process may have held a lock, the allocator's included, when it forked).
            // `in_child` makes three system calls (`setpgid`, `prctl`, `seccomp`) on memory
            // that was allocated before the fork and is only read: the compiled program behind
            // the `Arc`, which the closure owns, so it outlives the child's use of it. It takes
            // no lock, allocates nothing (an error is an `io::Error` holding an errno), and
            // touches no state shared with other threads.
            #[allow(unsafe_code)]
            unsafe {
                cmd.pre_exec(move || in_child(&program));
            }
        }
        None => {
            cmd.process_group(0);
        }
    }
    // Held across the spawn, so that a parent-death sweep cannot miss this group.
    let mut groups = live.lock();
    let spawned = cmd.spawn();
    // The pipes' write ends must close here, or dsh would never see the output end.
    drop(cmd);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            drop(groups);
            let under = if filter.is_some() {
                " in its own process group under the seccomp filter"
            } else {
                ""
            };
            return refuse(&format!(
                "cannot start {}{under}: {e}",
                program.to_string_lossy()
            ));
        }
    };
    let pid = child.id();
    let Ok(pgid) = i32::try_from(pid) else {
        drop(groups);
        let _ = child.kill();
        return refuse("pid out of range");
    };
    groups.insert(req.id, pgid);
    shells.started(pgid);
    drop(groups);
    send(&wire::encode([
        b"started".as_slice(),
        id.as_bytes(),
        pid.to_string().as_bytes(),
    ]));
    let (live, shells) = (live.clone(), shells.clone());
    std::thread::spawn(move || {
        let (code, signal) = match child.wait() {
            Ok(s) => (s.code(), s.signal()),
            Err(_) => (None, None),
        };
        shells.ended(pgid);
        let gone = Pid::from_raw(pgid).is_none_or(|p| {
            rustix::process::test_kill_process_group(p) == Err(rustix::io::Errno::SRCH)
        });
        if gone {
            live.lock().remove(&req.id);
        }
        let code = code.map(|c| c.to_string()).unwrap_or_default();
        let signal = signal.map(|s| s.to_string()).unwrap_or_default();
        send(&wire::encode([
            b"exit".as_slice(),
            id.as_bytes(),
            code.as_bytes(),
            signal.as_bytes(),
        ]));
    });
}

/// Runs in a contained command's child between `fork` and `exec` (see the proof at its one
/// caller): a process group of its own, then the seccomp filter, in that order, because the
/// filter refuses `setpgid` from then on, to the shell and everything it starts.
fn in_child(program: &BpfProgram) -> std::io::Result<()> {
    rustix::process::setpgid(None, None).map_err(std::io::Error::from)?;
    match seccompiler::apply_filter(program) {
        Ok(()) => Ok(()),
        Err(seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e)) => Err(e),
        Err(_) => Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
    }
}
