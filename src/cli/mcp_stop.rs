//! How `dsh mcp serve` stops: its calls in progress, and the signals that end it.
//!
//! Guarantees: once a stop begins (SIGINT, SIGTERM or SIGHUP, or the client gone), every call
//! in progress is cancelled as an interrupt cancels it, a call that arrives later is recorded and
//! cancelled before it starts, and the log is closed only once every call has its result
//! recorded ([`InFlight::idle`]), so a stopped gateway leaves a log that checks clean. A second
//! signal exits at once (after killing every process group dsh leads: `bash` commands, MCP
//! servers, hooks), as a second Ctrl-C does for `dsh run`.

use std::collections::HashMap;
use std::sync::Arc;

use super::signals::Stops;
use dsh::core::{AbortController, AbortReason, CancelCause};

/// The gateway's calls in progress, by call id.
#[derive(Default)]
pub(super) struct InFlight {
    state: parking_lot::Mutex<State>,
    /// Woken when the last call in progress ends.
    idle: tokio::sync::Notify,
}

#[derive(Default)]
struct State {
    stopping: bool,
    calls: HashMap<String, AbortController>,
    /// Calls a stop cancelled.
    cancelled: usize,
}

/// A call's place among those in progress; dropping it (the call's task ended) removes it.
pub(super) struct Admitted {
    in_flight: Arc<InFlight>,
    id: String,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut st = self.in_flight.state.lock();
        st.calls.remove(&self.id);
        if st.calls.is_empty() {
            self.in_flight.idle.notify_waiters();
        }
    }
}

/// How an interrupt cancels a call (the same as `dsh run`'s Ctrl-C).
fn interrupt(controller: &AbortController) {
    controller.abort(AbortReason::Cancelled(CancelCause::User));
}

impl InFlight {
    /// Counts call `id` in progress until the returned value is dropped; once a stop has begun
    /// the call is cancelled at once (it is still recorded, with its cancelled result).
    pub(super) fn admit(self: &Arc<Self>, id: &str, controller: &AbortController) -> Admitted {
        let mut st = self.state.lock();
        if st.stopping {
            interrupt(controller);
            st.cancelled += 1;
        }
        st.calls.insert(id.to_owned(), controller.clone());
        Admitted {
            in_flight: self.clone(),
            id: id.to_owned(),
        }
    }

    /// Begins a stop: cancels every call in progress and every later one. Returns how many
    /// were in progress.
    pub(super) fn stop(&self) -> usize {
        let mut st = self.state.lock();
        let first = !st.stopping;
        st.stopping = true;
        let n = st.calls.len();
        if first {
            st.calls.values().for_each(interrupt);
            st.cancelled += n;
        }
        n
    }

    /// How many calls a stop cancelled.
    pub(super) fn cancelled(&self) -> usize {
        self.state.lock().cancelled
    }

    /// Waits until no call is in progress.
    pub(super) async fn idle(&self) {
        loop {
            let woken = self.idle.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.state.lock().calls.is_empty() {
                return;
            }
            woken.await;
        }
    }
}

/// On the first signal: cancels the calls in progress, waits until each is recorded, then
/// answers `stop_transport` (the server then stops serving and the log is closed). On a second
/// signal: kills every process group dsh leads and answers `hard_stop`.
pub(super) fn watch(
    mut stops: Stops,
    in_flight: Arc<InFlight>,
    stop_transport: tokio::sync::oneshot::Sender<&'static str>,
    hard_stop: tokio::sync::oneshot::Sender<()>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let name = stops.next().await;
        let calls = in_flight.stop();
        err_line!(
            "dsh mcp serve: {name}: cancelling {calls} call(s) in progress, then closing the log \
             (a second signal exits at once)"
        );
        let drained = async {
            in_flight.idle().await;
            let _ = stop_transport.send(name);
        };
        tokio::select! {
            () = drained => {}
            _ = stops.next() => {
                dsh::process::kill_all_live_groups();
                let _ = hard_stop.send(());
                return;
            }
        }
        stops.next().await;
        dsh::process::kill_all_live_groups();
        let _ = hard_stop.send(());
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_cancels_the_calls_in_progress_and_later_ones_and_idle_waits_for_them() {
        let in_flight = Arc::new(InFlight::default());
        let (a, b) = (AbortController::new(), AbortController::new());
        let first = in_flight.admit("a", &a);
        assert!(!a.signal().is_aborted());
        assert_eq!(in_flight.stop(), 1);
        assert!(a.signal().is_aborted(), "cancelled by the stop");
        let second = in_flight.admit("b", &b);
        assert!(
            b.signal().is_aborted(),
            "admitted after the stop: cancelled at once"
        );
        assert_eq!(in_flight.stop(), 2, "a second stop cancels nothing more");
        assert_eq!(in_flight.cancelled(), 2);
        let idle = tokio::spawn({
            let in_flight = in_flight.clone();
            async move { in_flight.idle().await }
        });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!idle.is_finished(), "b is still in progress");
        drop(second);
        assert!(idle.await.is_ok());
    }
}
