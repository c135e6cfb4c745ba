//! dsh's side of the session supervisor ([`crate::sandbox`]'s `--serve` mode): one helper
//! process per tool and sandbox mode, started on the first call that needs it, that starts each
//! command dsh sends it and reports its pid and exit.
//!
//! Guarantees: a call whose supervisor dies before the command's exit is reported fails with
//! [`SupervisedError::Died`] (its group is killed by the runner, which knows its pid once it
//! started), and the next call starts a new supervisor; a supervisor that cannot start (or
//! reports that it cannot contain itself) is not tried again by this tool, whose calls then take
//! the per-call helper path, which reports the same setup failure as before. Dropping a
//! [`Call`] tells the supervisor its group needs no more watching.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use rustix::net::{
    AddressFamily, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags,
    SocketType,
};
use tokio::io::Interest;
use tokio::net::UnixDatagram;
use tokio::sync::mpsc;

use crate::config::BashConfig;
use crate::helper::SandboxHelper;
use crate::mode::SandboxMode;
use crate::sandbox::SandboxArgs;
use crate::sandbox::wire::{self, RunRequest};

/// How long a new supervisor may take to say it is ready.
const START_LIMIT: Duration = Duration::from_secs(10);

/// Why a command could not be run through a supervisor.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SupervisedError {
    /// The supervisor is gone (it exited or was killed).
    #[error(
        "the sandbox supervisor exited while the command was running; the command was stopped (the next call starts a new supervisor)"
    )]
    Died,
    /// The supervisor could not start the command.
    #[error("{0}")]
    Spawn(String),
    /// The request could not be sent.
    #[error("cannot send the command to the sandbox supervisor: {0}")]
    Send(#[source] std::io::Error),
}

/// A message from the supervisor about one call.
#[derive(Debug)]
enum Reply {
    Started(u32),
    SpawnFailed(String),
    Exit(Option<i32>, Option<i32>),
}

type Calls = Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Reply>>>>;

/// A running supervisor.
pub(crate) struct Supervisor {
    sock: Arc<UnixDatagram>,
    calls: Calls,
    dead: Arc<AtomicBool>,
    next: AtomicU64,
    tmp_root: tempfile::TempDir,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        // Closing the socket (with `sock`) ends the supervisor and whatever it still watches.
        self.reader.abort();
    }
}

/// Which supervisor a call needs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    mode: SandboxMode,
    roots: Vec<PathBuf>,
}

enum Slot {
    Running(Arc<Supervisor>),
    /// It could not start: this tool's calls of this key go the per-call way.
    Failed,
}

/// A tool's supervisors, one per mode (and set of roots).
#[derive(Default)]
pub(crate) struct Pool {
    slots: tokio::sync::Mutex<Vec<(Key, Slot)>>,
}

impl Pool {
    /// The supervisor for `mode` over `roots`, started if there is none (or the last one
    /// died); `None` when `config` has no helper or the supervisor cannot start.
    pub(crate) async fn get(
        &self,
        config: &BashConfig,
        mode: SandboxMode,
        roots: &[PathBuf],
    ) -> Option<Arc<Supervisor>> {
        let helper = config.helper.as_ref()?;
        let key = Key {
            mode,
            roots: roots.to_vec(),
        };
        let mut slots = self.slots.lock().await;
        if let Some(at) = slots.iter().position(|(k, _)| *k == key) {
            match &slots[at].1 {
                Slot::Running(s) if !s.is_dead() => return Some(s.clone()),
                Slot::Failed => return None,
                Slot::Running(_) => {
                    slots.swap_remove(at);
                }
            }
        }
        match Supervisor::start(config, helper, mode, roots).await {
            Ok(s) => {
                let s = Arc::new(s);
                slots.push((key, Slot::Running(s.clone())));
                Some(s)
            }
            Err(why) => {
                tracing::debug!(%why, ?mode, "no sandbox supervisor: per-call helper");
                slots.push((key, Slot::Failed));
                None
            }
        }
    }
}

/// Receives one message into `buf` (`Ok(0)`: the other end is closed).
async fn recv(sock: &UnixDatagram, buf: &mut [u8]) -> std::io::Result<usize> {
    sock.async_io(Interest::READABLE, || {
        rustix::net::recv(sock, &mut *buf, RecvFlags::empty())
            .map(|(n, _)| n)
            .map_err(std::io::Error::from)
    })
    .await
}

impl Supervisor {
    async fn start(
        config: &BashConfig,
        helper: &SandboxHelper,
        mode: SandboxMode,
        roots: &[PathBuf],
    ) -> Result<Supervisor, String> {
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| format!("socketpair: {e}"))?;
        rustix::io::ioctl_fionbio(&ours, true).map_err(|e| format!("socket: {e}"))?;
        let parent = config.temp_parent.clone();
        let tmp_root = tokio::task::spawn_blocking(move || {
            tempfile::Builder::new()
                .prefix("dsh-bash-session-")
                .tempdir_in(parent)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("session temp dir: {e}"))?;
        let mut args = SandboxArgs::new(mode, Vec::new());
        args.serve = true;
        args.roots = roots.to_vec();
        args.tmp = Some(tmp_root.path().to_path_buf());
        args.max_file_size = config.max_file_size;
        args.simulate_no_landlock = config.simulate_no_landlock;
        args.parent_pid = Some(std::process::id());
        // Not awaited: it lives as long as the socket; when it exits, tokio reaps it.
        let mut supervisor = tokio::process::Command::new(helper.program());
        // The commands it starts inherit its environment: dsh's own variables stay out.
        for var in dsh_process::WITHHELD_ENV {
            supervisor.env_remove(var);
        }
        let _process = supervisor
            .args(helper.command_args(&args))
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", helper.program().display()))?;
        // A `SOCK_SEQPACKET` socket, registered with tokio through the datagram type (the
        // closest in kind: one message per receive); it is only read and written with
        // `recv`/`send`/`sendmsg` below, which do not care which type wraps it.
        let sock = UnixDatagram::from_std(std::os::unix::net::UnixDatagram::from(ours))
            .map_err(|e| e.to_string())?;
        let sock = Arc::new(sock);
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(START_LIMIT, recv(&sock, &mut buf))
            .await
            .map_err(|_| "the sandbox supervisor did not start in time".to_owned())?
            .map_err(|e| e.to_string())?;
        let fields = wire::decode(&buf[..n]).unwrap_or_default();
        match fields.as_slice() {
            [b"ready", _deny_unix_sockets] => {}
            [b"fail", why] => return Err(String::from_utf8_lossy(why).into_owned()),
            _ => return Err("the sandbox supervisor did not start".to_owned()),
        }
        let calls: Calls = Arc::default();
        let dead = Arc::new(AtomicBool::new(false));
        let reader = tokio::spawn(read_replies(sock.clone(), calls.clone(), dead.clone()));
        Ok(Supervisor {
            sock,
            calls,
            dead,
            next: AtomicU64::new(1),
            tmp_root,
            reader,
        })
    }

    fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// The session's temp root, under which each call makes its own dir.
    pub(crate) fn tmp_root(&self) -> &std::path::Path {
        self.tmp_root.path()
    }

    /// Asks the supervisor to start `argv` (with `arg0`, in `cwd`, with `env` added) with
    /// `stdout` and `stderr` as its output, and waits until it started.
    pub(crate) async fn run(
        self: &Arc<Self>,
        cwd: PathBuf,
        arg0: Option<OsString>,
        env: Vec<(OsString, OsString)>,
        argv: Vec<OsString>,
        outputs: [OwnedFd; 2],
    ) -> Result<Call, SupervisedError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let msg = RunRequest {
            id,
            cwd: cwd.into_os_string(),
            arg0: arg0.unwrap_or_default(),
            env,
            argv,
        }
        .encode();
        let (tx, rx) = mpsc::unbounded_channel();
        self.calls.lock().insert(id, tx);
        let mut call = Call {
            id,
            sup: self.clone(),
            rx,
            pid: 0,
        };
        if self.is_dead() {
            return Err(SupervisedError::Died);
        }
        let fds = [outputs[0].as_fd(), outputs[1].as_fd()];
        let sock = &*self.sock;
        let sent = sock
            .async_io(Interest::WRITABLE, || {
                let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
                let mut control = SendAncillaryBuffer::new(&mut space);
                control.push(SendAncillaryMessage::ScmRights(&fds));
                rustix::net::sendmsg(
                    sock,
                    &[IoSlice::new(&msg)],
                    &mut control,
                    SendFlags::NOSIGNAL,
                )
                .map_err(std::io::Error::from)
            })
            .await;
        match sent {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::PIPE.raw_os_error()) => {
                return Err(SupervisedError::Died);
            }
            Err(e) => return Err(SupervisedError::Send(e)),
        }
        // The supervisor holds its own copies now; ours must close, or the output never ends.
        drop(outputs);
        match call.rx.recv().await {
            Some(Reply::Started(pid)) => {
                call.pid = pid;
                Ok(call)
            }
            Some(Reply::SpawnFailed(why)) => Err(SupervisedError::Spawn(why)),
            Some(Reply::Exit(..)) | None => Err(SupervisedError::Died),
        }
    }
}

/// Reads the supervisor's replies and hands each to its call, until the socket closes; then
/// the supervisor is dead and every waiting call hears so (its sender is dropped).
async fn read_replies(sock: Arc<UnixDatagram>, calls: Calls, dead: Arc<AtomicBool>) {
    let mut buf = vec![0u8; 4096];
    loop {
        let n = match recv(&sock, &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let Some(fields) = wire::decode(&buf[..n]) else {
            continue;
        };
        let (id, reply) = match fields.as_slice() {
            [b"started", id, pid] => (wire::number(id), wire::number(pid).map(Reply::Started)),
            [b"spawn-failed", id, why] => (
                wire::number(id),
                Some(Reply::SpawnFailed(
                    String::from_utf8_lossy(why).into_owned(),
                )),
            ),
            [b"exit", id, code, signal] => (
                wire::number(id),
                Some(Reply::Exit(wire::number(code), wire::number(signal))),
            ),
            _ => (None, None),
        };
        if let (Some(id), Some(reply)) = (id, reply)
            && let Some(tx) = calls.lock().get(&id)
        {
            let _ = tx.send(reply);
        }
    }
    dead.store(true, Ordering::Release);
    calls.lock().clear();
}

/// A command the supervisor started.
pub(crate) struct Call {
    id: u64,
    sup: Arc<Supervisor>,
    rx: mpsc::UnboundedReceiver<Reply>,
    pid: u32,
}

impl Call {
    /// The command's pid (its group's id).
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits for the command's exit: `(code, signal)`, or `None` when the supervisor died.
    pub(crate) async fn exit(&mut self) -> Option<(Option<i32>, Option<i32>)> {
        loop {
            match self.rx.recv().await? {
                Reply::Exit(code, signal) => return Some((code, signal)),
                Reply::Started(_) | Reply::SpawnFailed(_) => {}
            }
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.sup.calls.lock().remove(&self.id);
        // Started: the group is ended (or being ended by the runner), no more watching. Not
        // known to have started (the wait was abandoned): the supervisor kills the group if it
        // did start. The socket does not block; a message that does not fit is lost, and the
        // supervisor then keeps the group on its list (it `SIGKILL`s it at its end).
        let word: &[u8] = if self.pid == 0 { b"kill" } else { b"done" };
        let id = self.id.to_string();
        let _ = rustix::net::send(
            &*self.sup.sock,
            &wire::encode([word, id.as_bytes()]),
            SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
        );
    }
}
