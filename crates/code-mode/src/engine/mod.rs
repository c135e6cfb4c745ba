//! The QuickJS backend of the code runtime seam ([`QuickJs`]): one interpreter per run on its
//! own thread, bridged to the async host by two channels.
//!
//! Guarantees: the program has no ambient authority (no `require`, modules, filesystem,
//! network, environment, process, timers or clock; only `tools`, `console` and
//! `ToolCallError`); memory, stack, wall time (waiting on tools included), output, tool calls
//! and program size are bounded; the async side never blocks a runtime thread.

mod interpreter;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::FuturesUnordered;

use crate::limits::{Limits, THREAD_STACK_MARGIN};
use crate::outcome::{CodeErrorKind, CodeOutcome, CodeRun};
use crate::runtime::CodeRuntime;
use interpreter::{HostMessage, HostRequest, Stop};

/// How long the host waits past the wall-time limit for an interpreter that does not stop
/// (stuck in native code that never reaches the interrupt handler) before giving up on it.
const BACKSTOP_GRACE: Duration = Duration::from_secs(2);

/// The embedded JavaScript runtime (QuickJS). Programs are plain JavaScript; the SDK shows the
/// tools as TypeScript declarations for documentation only.
#[derive(Clone, Debug, Default)]
pub struct QuickJs {
    _private: (),
}

impl QuickJs {
    /// The runtime.
    pub fn new() -> QuickJs {
        QuickJs { _private: () }
    }
}

#[async_trait]
impl CodeRuntime for QuickJs {
    fn language(&self) -> &str {
        "javascript"
    }

    async fn run(&self, run: CodeRun) -> CodeOutcome {
        run_quickjs(run).await
    }
}

/// Runs one program on a fresh interpreter thread and serves its tool calls.
pub async fn run_quickjs(run: CodeRun) -> CodeOutcome {
    let CodeRun {
        program,
        bindings,
        signal,
        limits,
    } = run;
    if let Err(e) = limits.validate() {
        return CodeOutcome::failure(CodeErrorKind::Exception, e.to_string(), Vec::new());
    }
    if signal.is_aborted() {
        return CodeOutcome::failure(CodeErrorKind::Abort, "the run was aborted", Vec::new());
    }
    if program.len() > limits.max_program_bytes {
        return CodeOutcome::failure(
            CodeErrorKind::Exception,
            format!(
                "the program is {} bytes; the limit is {} (maxProgramBytes limit)",
                program.len(),
                Limits::bytes(limits.max_program_bytes)
            ),
            Vec::new(),
        );
    }
    let deadline = Instant::now() + limits.wall_time;
    let stop = Arc::new(Stop::new(deadline));
    let (req_tx, mut req_rx) = tokio::sync::mpsc::unbounded_channel::<HostRequest>();
    let (rep_tx, rep_rx) = std::sync::mpsc::channel::<HostMessage>();
    let (done_tx, mut done_rx) = tokio::sync::oneshot::channel::<CodeOutcome>();
    let names: Vec<String> = bindings.names().iter().map(|n| n.to_string()).collect();
    let thread_stop = stop.clone();
    let thread_limits = limits.clone();
    let spawned = std::thread::Builder::new()
        .name("dsh-code-mode".into())
        .stack_size(limits.stack_bytes.saturating_add(THREAD_STACK_MARGIN))
        .spawn(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                interpreter::execute(program, names, thread_limits, thread_stop, req_tx, rep_rx)
            }))
            .unwrap_or_else(|p| {
                let f = dsh_core::Failure::from_panic("the code runtime", &*p);
                CodeOutcome::failure(CodeErrorKind::Exception, f.message(), Vec::new())
            });
            let _ = done_tx.send(outcome);
        });
    if let Err(e) = spawned {
        return CodeOutcome::failure(
            CodeErrorKind::Exception,
            format!("the code runtime could not start a thread: {e}"),
            Vec::new(),
        );
    }
    let mut in_flight = FuturesUnordered::new();
    let mut abort_sent = false;
    let backstop = tokio::time::sleep_until((deadline + BACKSTOP_GRACE).into());
    tokio::pin!(backstop);
    loop {
        tokio::select! {
            done = &mut done_rx => {
                return done.unwrap_or_else(|_| CodeOutcome::failure(
                    CodeErrorKind::Exception,
                    "the code runtime stopped without an outcome",
                    Vec::new(),
                ));
            }
            Some(req) = req_rx.recv() => {
                let HostRequest { id, name, args } = req;
                let call = bindings.call(&name, Some(&args));
                in_flight.push(async move { (id, call.await) });
            }
            Some((id, outcome)) = in_flight.next(), if !in_flight.is_empty() => {
                let _ = rep_tx.send(HostMessage::Reply { id, outcome });
            }
            _ = signal.aborted(), if !abort_sent => {
                abort_sent = true;
                stop.abort.store(true, Ordering::Relaxed);
                let _ = rep_tx.send(HostMessage::Wake);
            }
            _ = &mut backstop => {
                stop.abort.store(true, Ordering::Relaxed);
                tracing::warn!("a code runtime thread did not stop at its deadline; it is abandoned");
                return CodeOutcome::failure(
                    CodeErrorKind::Timeout,
                    interpreter::timeout_message(&limits),
                    Vec::new(),
                );
            }
        }
    }
}
