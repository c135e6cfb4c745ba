//! The signals that stop a command that runs calls (`run`, `demo`, `agent`, `chat`, `mcp
//! serve`): SIGINT (Ctrl-C), SIGTERM (a process manager) and SIGHUP (a closed terminal) all
//! mean "stop": the calls in progress are cancelled and recorded, and the log closes clean; a
//! second one exits at once.

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

    /// The next of them to arrive, by name.
    pub(crate) async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.hang_up.recv() => "SIGHUP",
        }
    }
}
