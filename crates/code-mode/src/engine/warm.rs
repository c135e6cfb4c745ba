//! Interpreter threads made ready before a run needs them.
//!
//! Starting a run costs a thread, a QuickJS runtime and context, and the compile of the
//! prelude (about 3M instructions). A [`Pool`] keeps one thread that has already done all
//! of that and waits for a run: a run given to it starts at once. After its run, a thread
//! throws its interpreter away, prepares a fresh one and offers itself to the pool again, so
//! the next run finds one ready.
//!
//! Guarantees: an interpreter serves exactly one run and is dropped with it (no state of one
//! program reaches another); the run's memory and stack limits, interrupt handler and
//! deadline are applied when the run starts, as on a cold start; a thread is reused only for
//! runs with the stack size it was made with, and never after a panic; at most one thread
//! waits idle, and it ends once the pool is dropped.

use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::thread::Thread;

use parking_lot::Mutex;

use super::interpreter::{self, Prepared, Stop};
use crate::bindings::Bindings;
use crate::limits::{Limits, THREAD_STACK_MARGIN};
use crate::outcome::{CodeErrorKind, CodeOutcome};
use crate::subcall::LocalDriver;

/// One run, as handed to an interpreter thread.
pub(crate) struct Job {
    pub program: String,
    pub bindings: Bindings,
    pub local: Option<LocalDriver>,
    pub limits: Limits,
    pub stop: Arc<Stop>,
    /// The caller's tokio runtime, entered for the run so the thread can poll its tool calls.
    pub tokio: Option<tokio::runtime::Handle>,
    pub done: tokio::sync::oneshot::Sender<CodeOutcome>,
}

/// The thread that waits, with its interpreter prepared, for a run.
struct Idle {
    stack_bytes: usize,
    jobs: mpsc::Sender<Job>,
    thread: Thread,
}

/// At most one interpreter thread waiting for a run.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<Option<Idle>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("idle", &self.idle.lock().is_some())
            .finish()
    }
}

impl Pool {
    /// Starts a thread that prepares an interpreter for runs under `limits` and waits in the
    /// pool. A failure to start it only means the next run starts cold.
    pub(crate) fn prepare(pool: &Arc<Pool>, limits: Limits) {
        let weak = Arc::downgrade(pool);
        let _ = spawn(limits.stack_bytes, move || serve(None, limits, weak));
    }

    /// Gives `job` to an interpreter thread (the waiting one if it was made for the job's stack
    /// size, else a new one) and returns that thread, to wake it on an abort.
    pub(crate) fn start(pool: Option<&Arc<Pool>>, job: Job) -> Result<Thread, CodeOutcome> {
        let mut job = job;
        if let Some(pool) = pool {
            let idle = {
                let mut slot = pool.idle.lock();
                match slot.as_ref() {
                    Some(idle) if idle.stack_bytes == job.limits.stack_bytes => slot.take(),
                    _ => None,
                }
            };
            if let Some(idle) = idle {
                match idle.jobs.send(job) {
                    Ok(()) => return Ok(idle.thread),
                    // The thread is gone (it cannot be, short of a panic): start cold.
                    Err(mpsc::SendError(back)) => job = back,
                }
            }
        }
        let weak = pool.map(Arc::downgrade).unwrap_or_default();
        let limits = job.limits.clone();
        spawn(limits.stack_bytes, move || serve(Some(job), limits, weak)).map_err(|e| {
            CodeOutcome::failure(
                CodeErrorKind::Exception,
                format!("the code runtime could not start a thread: {e}"),
                Vec::new(),
            )
        })
    }

    /// Puts a waiting thread in the pool, unless one waits already.
    fn offer(&self, idle: Idle) -> bool {
        let mut slot = self.idle.lock();
        if slot.is_some() {
            return false;
        }
        *slot = Some(idle);
        true
    }
}

fn spawn(stack_bytes: usize, body: impl FnOnce() + Send + 'static) -> std::io::Result<Thread> {
    std::thread::Builder::new()
        .name("dsh-code-mode".into())
        .stack_size(stack_bytes.saturating_add(THREAD_STACK_MARGIN))
        .spawn(body)
        .map(|handle| handle.thread().clone())
}

/// An interpreter thread's life: run `first` (if given) on an interpreter made for it, then,
/// while the pool lives and has room, prepare a fresh interpreter, wait in the pool and run
/// the job that comes.
fn serve(first: Option<Job>, limits: Limits, pool: Weak<Pool>) {
    if let Some(job) = first {
        if !run(None, job) {
            return;
        }
    }
    let stack_bytes = limits.stack_bytes;
    let mut limits = limits;
    loop {
        if pool.strong_count() == 0 {
            return;
        }
        let prepared = Prepared::new(&limits);
        let Ok(prepared) = prepared else {
            return;
        };
        let (jobs, next) = mpsc::channel();
        let idle = Idle {
            stack_bytes,
            jobs,
            thread: std::thread::current(),
        };
        let offered = pool.upgrade().is_some_and(|p| p.offer(idle));
        if !offered {
            return;
        }
        // The pool holds the only sender: once the pool is dropped, this wait ends.
        let Ok(job) = next.recv() else {
            return;
        };
        limits = job.limits.clone();
        if !run(Some(prepared), job) {
            return;
        }
    }
}

/// Runs one job on `prepared` (or on an interpreter made now) and sends its outcome. False if
/// the run panicked (the thread is then not reused).
fn run(prepared: Option<Prepared>, job: Job) -> bool {
    let Job {
        program,
        bindings,
        local,
        limits,
        stop,
        tokio,
        done,
    } = job;
    let _entered = tokio.as_ref().map(|h| h.enter());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let prepared = match prepared {
            Some(p) => p,
            None => match Prepared::new(&limits) {
                Ok(p) => p,
                Err(outcome) => return outcome,
            },
        };
        interpreter::execute(prepared, program, bindings, local, limits, stop)
    }));
    let clean = result.is_ok();
    let outcome = result.unwrap_or_else(|p| {
        let f = dsh_core::Failure::from_panic("the code runtime", &*p);
        CodeOutcome::failure(CodeErrorKind::Exception, f.message(), Vec::new())
    });
    let _ = done.send(outcome);
    clean
}

#[cfg(test)]
mod tests {
    use std::thread::ThreadId;
    use std::time::{Duration, Instant};

    use dsh_core::{Json, Signal};
    use futures::FutureExt;
    use futures::future::BoxFuture;

    use super::*;
    use crate::bindings::Host;
    use crate::outcome::ToolCallError;

    struct NoHost;

    impl Host for NoHost {
        fn call(&self, name: &str, _: Json) -> BoxFuture<'static, Result<Json, ToolCallError>> {
            let e = ToolCallError::new(name, "no tools here");
            async move { Err(e) }.boxed()
        }
    }

    /// The thread waiting in the pool, once there is one.
    fn idle_thread(pool: &Pool) -> ThreadId {
        let give_up = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(id) = pool.idle.lock().as_ref().map(|i| i.thread.id()) {
                return id;
            }
            assert!(Instant::now() < give_up, "no interpreter became ready");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn job(program: &str, limits: Limits) -> (Job, tokio::sync::oneshot::Receiver<CodeOutcome>) {
        let (done, outcome) = tokio::sync::oneshot::channel();
        let stop = Arc::new(Stop::new(
            Instant::now() + limits.wall_time,
            Signal::never(),
        ));
        let job = Job {
            program: program.to_owned(),
            bindings: Bindings::new([], Arc::new(NoHost)),
            local: None,
            limits,
            stop,
            tokio: None,
            done,
        };
        (job, outcome)
    }

    #[test]
    fn a_run_starts_on_the_prepared_thread_which_then_prepares_again() {
        let pool = Arc::new(Pool::default());
        Pool::prepare(&pool, Limits::default());
        let ready = idle_thread(&pool);
        for n in 0..3_i64 {
            let (job, outcome) = job(&format!("return {n} + 1"), Limits::default());
            let thread = Pool::start(Some(&pool), job).unwrap();
            assert_eq!(thread.id(), ready, "the run took the waiting thread");
            let o = outcome.blocking_recv().unwrap();
            assert_eq!(o.error, None);
            assert_eq!(o.value, Some(Json::from(n + 1)));
            // The same thread, with a fresh interpreter, waits for the next run.
            assert_eq!(idle_thread(&pool), ready);
        }
    }

    #[test]
    fn a_run_with_another_stack_size_starts_cold_and_leaves_the_prepared_thread() {
        let pool = Arc::new(Pool::default());
        Pool::prepare(&pool, Limits::default());
        let ready = idle_thread(&pool);
        let limits = Limits {
            stack_bytes: 1 << 20,
            ..Limits::default()
        };
        let (job, outcome) = job("return 'cold'", limits);
        let thread = Pool::start(Some(&pool), job).unwrap();
        assert_ne!(thread.id(), ready);
        let o = outcome.blocking_recv().unwrap();
        assert_eq!(o.value, Some(Json::string("cold")));
        assert_eq!(idle_thread(&pool), ready);
    }
}
