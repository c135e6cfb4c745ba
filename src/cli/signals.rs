//! The signals that stop a command that runs calls (`run`, `demo`, `agent`, `chat`, `mcp
//! serve`): SIGINT (Ctrl-C), SIGTERM (a process manager) and SIGHUP (a closed terminal) all
//! mean "stop": the calls in progress are cancelled and recorded, and the log closes clean; a
//! second one exits at once, after killing every process group dsh leads (`dsh::process`).
//!
//! They are handled from the moment the harness starts being built ([`while_starting`]): an
//! MCP server can take seconds to start, and a signal that killed dsh meanwhile left it, and
//! whatever it had started, running.

use std::future::Future;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The signals that stop dsh (SIGINT, SIGTERM, SIGHUP), handled from when this is made (from
/// then on they no longer kill the process outright).
pub(crate) struct Stops {
    interrupt: Signal,
    terminate: Signal,
    hang_up: Signal,
}

impl Stops {
    /// Installs the handlers of SIGINT, SIGTERM and SIGHUP.
    pub(crate) fn install() -> std::io::Result<Stops> {
        Ok(Stops {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hang_up: signal(SignalKind::hangup())?,
        })
    }

    /// Takes every signal that arrived since the last look without waiting; the name of a
    /// SIGTERM or SIGHUP among them (they end a conversation), a SIGINT being dropped (it only
    /// cancelled the turn it came in). Only `dsh chat` (feature `agent`) looks between turns.
    #[cfg(feature = "agent")]
    pub(crate) fn take_ending(&mut self) -> Option<&'static str> {
        use futures::FutureExt as _;
        let _ = self.interrupt.recv().now_or_never();
        let hang_up = self
            .hang_up
            .recv()
            .now_or_never()
            .flatten()
            .map(|()| "SIGHUP");
        let terminate = self
            .terminate
            .recv()
            .now_or_never()
            .flatten()
            .map(|()| "SIGTERM");
        terminate.or(hang_up)
    }

    /// The next of them to arrive, by name.
    pub(crate) async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.hang_up.recv() => "SIGHUP",
        }
    }
}

/// How long the process groups started before a stop (MCP servers) have to end (`SIGTERM`, a
/// grace, `SIGKILL` rounds) before they are killed at once.
const START_STOP_LIMIT: Duration = Duration::from_secs(5);

/// Runs `start` (the harness being built: the policy's MCP servers starting) with the stop
/// signals handled. A signal meanwhile abandons the start: what it started ends (its process
/// groups get `SIGTERM`, a grace, then `SIGKILL`) and its name is returned once every group dsh
/// leads is gone; a second signal kills them at once. Nothing ran yet, so there is nothing
/// else to stop. Once `start` is done the command installs its own handlers; as anywhere
/// between two handlers' waits, a signal in that moment is not acted on (from the first
/// installation on, a signal no longer kills dsh outright).
pub(crate) async fn while_starting<T>(start: impl Future<Output = T>) -> Result<T, &'static str> {
    let Ok(mut stops) = Stops::install() else {
        // The command's own installation says why, if it fails again.
        return Ok(start.await);
    };
    let first = tokio::select! {
        started = start => return Ok(started),
        name = stops.next() => name,
    };
    err_line!(
        "dsh: {first}: stopping what was started so far, then exiting (a second signal exits at \
         once)"
    );
    let ended = async {
        while !dsh::process::live_groups().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        () = ended => {}
        _ = stops.next() => {
            dsh::process::kill_all_live_groups();
        }
        () = tokio::time::sleep(START_STOP_LIMIT) => {
            dsh::process::kill_all_live_groups();
        }
    }
    Err(first)
}
