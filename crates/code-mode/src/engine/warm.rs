//! Interpreter threads made ready before a run needs them.
//!
//! Starting a run costs a thread, a QuickJS runtime and context, and the compile of the
//! prelude (about 3M instructions). A [`Pool`] keeps up to [`READY`] threads that have done
//! (or are doing) all of that and wait for a run: a run given to one starts without that
//! cost, or waits only for what is left of it. A run that takes the last waiting thread has a
//! new one started, which prepares while the run runs; after its run, a thread throws its
//! interpreter away and, if the pool has room, waits in it again while it prepares a fresh
//! one. Back-to-back runs thus alternate between two threads, each preparing while the other
//! runs.
//!
//! Guarantees: an interpreter serves exactly one run and is dropped with it (no state of one
//! program reaches another); the run's memory and stack limits, interrupt handler and
//! deadline are applied when the run starts, as on a cold start; a thread is reused only for
//! runs with the stack size it was made with, and never after a panic; at most [`READY`]
//! threads wait, and they end once the pool is dropped.

use std::collections::VecDeque;
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

/// How many threads may wait in the pool.
pub(crate) const READY: usize = 2;

/// The interpreter threads waiting for a run, the longest-waiting first.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<VecDeque<Idle>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("idle", &self.idle.lock().len())
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
            let stack_bytes = job.limits.stack_bytes;
            let (idle, last) = {
                let mut idle = pool.idle.lock();
                let taken = idle
                    .iter()
                    .position(|i| i.stack_bytes == stack_bytes)
                    .and_then(|at| idle.remove(at));
                let last = !idle.iter().any(|i| i.stack_bytes == stack_bytes);
                (taken, last)
            };
            if let Some(idle) = idle {
                // The next run of this size finds a thread prepared while this one runs.
                if last {
                    Pool::prepare(pool, job.limits.clone());
                }
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

    /// Puts a waiting thread in the pool, unless it is full.
    fn offer(&self, idle: Idle) -> bool {
        let mut waiting = self.idle.lock();
        if waiting.len() >= READY {
            return false;
        }
        waiting.push_back(idle);
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
/// while the pool lives and has room, wait in the pool while it prepares a fresh interpreter
/// and run the job that comes (which may come before the interpreter is ready: it then waits
/// for the rest of the preparation, never for more than a cold start).
fn serve(first: Option<Job>, limits: Limits, pool: Weak<Pool>) {
    if let Some(job) = first
        && !run(None, job)
    {
        return;
    }
    let stack_bytes = limits.stack_bytes;
    let mut limits = limits;
    loop {
        if pool.strong_count() == 0 {
            return;
        }
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
        // A failed preparation is retried, and reported, by the run that comes.
        let prepared = Prepared::new(&limits).ok();
        // The pool holds the only sender: once the pool is dropped, this wait ends.
        let Ok(job) = next.recv() else {
            return;
        };
        limits = job.limits.clone();
        if !run(prepared, job) {
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
    let result = dsh_core::contained::call(|| {
        let prepared = match prepared {
            Some(p) => p,
            None => match Prepared::new(&limits) {
                Ok(p) => p,
                Err(outcome) => return (outcome, None),
            },
        };
        let (outcome, spent) =
            interpreter::execute(prepared, program, bindings, local, limits, stop);
        (outcome, Some(spent))
    });
    let (outcome, spent) = match result {
        Ok(done) => done,
        Err(p) => {
            let f = dsh_core::Failure::from_panic("the code runtime", &*p);
            let outcome = CodeOutcome::failure(CodeErrorKind::Exception, f.message(), Vec::new());
            let _ = done.send(outcome);
            return false;
        }
    };
    // The outcome goes first; the run's interpreter is freed after, off the caller's wait.
    let _ = done.send(outcome);
    dsh_core::contained::call(move || drop(spent)).is_ok()
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

    /// The threads waiting in the pool, once there are `n`.
    fn waiting(pool: &Pool, n: usize) -> Vec<ThreadId> {
        let give_up = Instant::now() + Duration::from_secs(20);
        loop {
            let ids: Vec<ThreadId> = pool.idle.lock().iter().map(|i| i.thread.id()).collect();
            if ids.len() == n {
                return ids;
            }
            assert!(
                Instant::now() < give_up,
                "{n} threads never waited: {ids:?}"
            );
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
    fn back_to_back_runs_take_turns_on_two_prepared_threads_and_spawn_none() {
        let pool = Arc::new(Pool::default());
        Pool::prepare(&pool, Limits::default());
        let first = waiting(&pool, 1)[0];
        let mut used = Vec::new();
        for n in 0..4_i64 {
            let (job, outcome) = job(&format!("return {n} + 1"), Limits::default());
            used.push(Pool::start(Some(&pool), job).unwrap().id());
            let o = outcome.blocking_recv().unwrap();
            assert_eq!(o.error, None);
            assert_eq!(o.value, Some(Json::from(n + 1)));
            // The thread that ran waits again beside the one prepared during the run (which
            // of the two offered itself first depends on how the threads were scheduled).
            let ids = waiting(&pool, READY);
            assert!(ids.contains(&used[used.len() - 1]), "{ids:?} {used:?}");
        }
        assert_eq!(
            used[0], first,
            "the first run took the thread prepared ahead"
        );
        let mut threads = used.clone();
        threads.sort_by_key(|t| format!("{t:?}"));
        threads.dedup();
        assert_eq!(threads.len(), 2, "two threads for four runs: {used:?}");
    }

    #[test]
    fn a_run_with_another_stack_size_starts_cold_and_leaves_the_prepared_thread() {
        let pool = Arc::new(Pool::default());
        Pool::prepare(&pool, Limits::default());
        let ready = waiting(&pool, 1)[0];
        let limits = Limits {
            stack_bytes: 1 << 20,
            ..Limits::default()
        };
        let (first, outcome) = job("return 'cold'", limits.clone());
        let cold = Pool::start(Some(&pool), first).unwrap().id();
        assert_ne!(cold, ready);
        assert_eq!(
            outcome.blocking_recv().unwrap().value,
            Some(Json::string("cold"))
        );
        // The cold thread then waits too, for runs of its own stack size.
        assert_eq!(waiting(&pool, 2), vec![ready, cold]);
        let (second, outcome) = job("return 'warm'", limits);
        assert_eq!(Pool::start(Some(&pool), second).unwrap().id(), cold);
        assert_eq!(
            outcome.blocking_recv().unwrap().value,
            Some(Json::string("warm"))
        );
    }
}
