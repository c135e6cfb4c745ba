//! The QuickJS backend of the code runtime seam ([`QuickJs`]): one interpreter per run on its
//! own thread, which polls the run's tool calls itself (inside the caller's tokio runtime
//! context, and claiming the sub-call coordinator when the bindings have one), while the async
//! side only waits for the outcome, forwards an abort and keeps the backstop.
//!
//! Guarantees: the program has no ambient authority (no `require`, modules, filesystem,
//! network, environment, process, timers or clock; only `tools`, `console` and
//! `ToolCallError`); memory, stack, wall time (waiting on tools included), output, tool calls
//! and program size are bounded; the async side never blocks a runtime thread.

mod arena;
mod interpreter;
mod lossless;
mod plain;
mod prelude;
mod trap;
mod warm;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use std::thread::Thread;

use async_trait::async_trait;

use crate::limits::Limits;
use crate::outcome::{CodeErrorKind, CodeOutcome, CodeRun};
use crate::runtime::CodeRuntime;
use interpreter::Stop;

/// How long the host waits past the wall-time limit for an interpreter that does not stop
/// (stuck in native code that never reaches the interrupt handler) before giving up on it.
const BACKSTOP_GRACE: Duration = Duration::from_secs(2);

/// The embedded JavaScript runtime (QuickJS). Programs are plain JavaScript; the SDK shows the
/// tools as TypeScript declarations for documentation only.
///
/// It keeps one interpreter thread ready ahead of the next run (its runtime and context made,
/// the prelude compiled, nothing of any program in it), so a run does not wait for that start;
/// each run still gets an interpreter of its own. Clones share that thread.
#[derive(Clone, Debug)]
pub struct QuickJs {
    pool: Arc<warm::Pool>,
}

impl Default for QuickJs {
    fn default() -> Self {
        QuickJs::new()
    }
}

impl QuickJs {
    /// The runtime, with an interpreter being prepared for its first run (under the default
    /// [`Limits`]' memory and stack sizes; a run with another stack size starts cold).
    pub fn new() -> QuickJs {
        let pool = Arc::new(warm::Pool::default());
        warm::Pool::prepare(&pool, Limits::default());
        QuickJs { pool }
    }
}

#[async_trait]
impl CodeRuntime for QuickJs {
    fn language(&self) -> &str {
        "javascript"
    }

    async fn run(&self, run: CodeRun) -> CodeOutcome {
        run_on(Some(&self.pool), run).await
    }
}

/// Runs one program on a fresh interpreter thread and serves its tool calls (a cold start:
/// [`QuickJs`] keeps an interpreter ready instead).
pub async fn run_quickjs(run: CodeRun) -> CodeOutcome {
    run_on(None, run).await
}

/// Runs one program on the pool's prepared interpreter thread if it fits, else on a new one.
async fn run_on(pool: Option<&Arc<warm::Pool>>, run: CodeRun) -> CodeOutcome {
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
    let stop = Arc::new(Stop::new(deadline, signal.clone()));
    let (done_tx, mut done_rx) = tokio::sync::oneshot::channel::<CodeOutcome>();
    // The interpreter thread polls the tool calls inside this runtime's context, so it can
    // run the sub-call coordinator itself.
    let tokio_runtime = tokio::runtime::Handle::try_current().ok();
    let local = tokio_runtime.as_ref().and_then(|_| bindings.claim_local());
    let job = warm::Job {
        program,
        bindings,
        local,
        limits: limits.clone(),
        stop: stop.clone(),
        tokio: tokio_runtime,
        done: done_tx,
    };
    let engine = match warm::Pool::start(pool, job) {
        Ok(thread) => thread,
        Err(outcome) => return outcome,
    };
    let _gone = HostGone {
        stop: stop.clone(),
        engine: engine.clone(),
    };
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
            _ = signal.aborted(), if !abort_sent => {
                abort_sent = true;
                stop.abort.store(true, Ordering::Release);
                engine.unpark();
            }
            _ = &mut backstop => {
                stop.abort.store(true, Ordering::Release);
                engine.unpark();
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

/// Tells the interpreter thread, when the async side of its run ends (returned or dropped),
/// that nobody waits for it any more.
struct HostGone {
    stop: Arc<Stop>,
    engine: Thread,
}

impl Drop for HostGone {
    fn drop(&mut self) {
        self.stop.host_gone.store(true, Ordering::Release);
        self.engine.unpark();
    }
}
