//! Runs one hook command: `sh -c <command>` in the workspace, the input on stdin, stdout and
//! stderr collected (capped), under the hook's timeout and the call's cancellation signal.
//!
//! Guarantees: a hook that overruns its timeout, or whose call is cancelled, is killed with its
//! whole process group (it runs as a group leader, the group owned through `dsh-process`, so a
//! dropped run and dsh's exit at once kill it too) and then dropped (`kill_on_drop`); a hook
//! that never reads stdin, or writes more than the caps, can never stall the call beyond its
//! timeout; nothing here blocks an async thread.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_core::Signal;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::protocol::Exit;

/// Bytes of stdout kept (a hook's JSON answer is small).
pub const STDOUT_CAP: usize = 1 << 20;
/// Bytes of stderr kept.
pub const STDERR_CAP: usize = 64 << 10;

/// What a run produced.
#[derive(Debug)]
pub struct RunOutput {
    /// How the process ended.
    pub exit: Exit,
    /// Its stdout (lossy UTF-8, at most [`STDOUT_CAP`] bytes).
    pub stdout: String,
    /// Its stderr (lossy UTF-8, at most [`STDERR_CAP`] bytes).
    pub stderr: String,
    /// Wall time from spawn to the end.
    pub duration: Duration,
}

/// Where and how a command runs.
pub struct RunSpec<'a> {
    /// The shell command.
    pub command: &'a str,
    /// Its working directory (also `CLAUDE_PROJECT_DIR`).
    pub cwd: &'a Path,
    /// The stdin bytes (shared by every hook of one point).
    pub stdin: Arc<[u8]>,
    /// The time limit.
    pub timeout: Duration,
    /// The call's signal: a cancelled call kills its hooks.
    pub signal: &'a Signal,
}

async fn read_capped<R: AsyncRead + Unpin>(reader: Option<R>, cap: usize) -> Vec<u8> {
    let Some(mut reader) = reader else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                // Past the cap, keep draining so the hook never blocks on a full pipe.
            }
        }
    }
    kept
}

fn exit_of(status: std::io::Result<std::process::ExitStatus>) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(sig)) => Exit::Failed(format!("killed by signal {sig}")),
            (None, None) => Exit::Failed("ended without an exit status".to_owned()),
        },
        Err(e) => Exit::Failed(format!("could not wait for the hook: {e}")),
    }
}

/// Runs the command to completion, timeout or cancellation.
pub async fn run(spec: RunSpec<'_>) -> RunOutput {
    let started = Instant::now();
    let mut cmd = Command::new("sh");
    for var in dsh_process::WITHHELD_ENV {
        cmd.env_remove(var);
    }
    cmd.arg("-c")
        .arg(spec.command)
        .current_dir(spec.cwd)
        .env("CLAUDE_PROJECT_DIR", spec.cwd)
        .env("DSH_PROJECT_DIR", spec.cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // The hook leads a group of its own, owned by `group` (`dsh-process`): killed whole if the
    // run is dropped or dsh exits at once.
    let (mut child, mut group) = match dsh_process::lead(&mut cmd) {
        Ok(c) => c,
        Err(e) => {
            return RunOutput {
                exit: Exit::Failed(format!("could not start the hook: {e}")),
                stdout: String::new(),
                stderr: String::new(),
                duration: started.elapsed(),
            };
        }
    };
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let input = spec.stdin;
    let finished = {
        let work = async {
            let write = async move {
                if let Some(mut w) = stdin {
                    // A hook that does not read its input closes the pipe: not an error.
                    let _ = w.write_all(&input).await;
                    let _ = w.shutdown().await;
                }
            };
            let (_, out, err) = tokio::join!(
                write,
                read_capped(stdout, STDOUT_CAP),
                read_capped(stderr, STDERR_CAP)
            );
            let status = child.wait().await;
            (exit_of(status), out, err)
        };
        tokio::select! {
            done = work => Ok(done),
            _ = tokio::time::sleep(spec.timeout) => {
                Err(format!("timed out after {}", seconds(spec.timeout)))
            }
            reason = spec.signal.aborted() => {
                Err(format!("stopped because the call was aborted: {reason}"))
            }
        }
    };
    match finished {
        Ok((exit, out, err)) => {
            // The hook ended on its own terms: what it left running in the background is its
            // own business, as before it was owned here.
            group.disarm();
            RunOutput {
                exit,
                stdout: String::from_utf8_lossy(&out).into_owned(),
                stderr: String::from_utf8_lossy(&err).into_owned(),
                duration: started.elapsed(),
            }
        }
        Err(why) => {
            // The whole group goes (`SIGKILL`), then the leader is reaped by `kill_on_drop`.
            drop(group);
            drop(child);
            RunOutput {
                exit: Exit::Failed(why),
                stdout: String::new(),
                stderr: String::new(),
                duration: started.elapsed(),
            }
        }
    }
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}s", s as u64)
    } else {
        format!("{s:.3}s")
    }
}
