//! What the `dsh` program does when it panics. A panic the pipeline contains (a tool body, a
//! listener, a guard, a renderer: `dsh_core::contained`) is that one call's failure, as in the
//! libraries, and the run goes on. Any other panic is a bug in dsh, on whatever thread it
//! happens (a runtime worker running a spawned task, a blocking thread, the log's writer
//! thread, the main thread), and the program ends on it instead of waiting for work the
//! panicked code will never finish.
//!
//! Guarantees: [`install`] keeps the standard panic message (and its backtrace when
//! `RUST_BACKTRACE` asks) and records the first panic nothing contains; [`block_on`] stops waiting for the
//! command as soon as one is recorded and returns exit 1 with one sentence naming the thread,
//! the place and the message, and saying that a session log left open is repaired the next
//! time it is opened. Nothing is aborted: `main` still shuts the runtime down and returns.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::Exit;

/// The first panic not yet reported, and the wake-up of whoever waits for one.
struct Watch {
    first: Mutex<Option<String>>,
    wake: Notify,
}

static WATCH: Watch = Watch {
    first: Mutex::new(None),
    wake: Notify::const_new(),
};

impl Watch {
    fn record(&self, what: String) {
        let mut first = self.first.lock();
        if first.is_none() {
            *first = Some(what);
            // A permit is kept when nobody waits yet: the wake-up is never lost.
            self.wake.notify_one();
        }
    }

    /// The first panic recorded since the last call, if any.
    fn take(&self) -> Option<String> {
        self.first.lock().take()
    }

    /// Waits until a panic is recorded.
    async fn panicked(&self) {
        loop {
            if self.first.lock().is_some() {
                return;
            }
            self.wake.notified().await;
        }
    }
}

/// Records every panic of the process from now on, after the standard message is printed.
pub fn install() {
    let standard = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        standard(info);
        // About to be contained: the failure of one call, not the end of the program.
        if dsh::core::contained::active() {
            return;
        }
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("an unnamed thread");
        let place = info
            .location()
            .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        WATCH.record(format!("thread '{thread}' panicked{place}: {message}"));
    }));
}

/// The exit of a program that panicked.
fn panicked(what: &str) -> Exit {
    Exit::internal(format!(
        "internal error, dsh stopped: {what}. This is a bug in dsh; a session log left open is \
         repaired the next time it is opened (or with `dsh repair LOG`)"
    ))
}

/// Runs `command` on `rt` until it ends or anything in the process panics, whichever comes
/// first (a panic on the main thread, inside `command` itself, included). A panic recorded
/// while `command` ran is reported even if `command` then ended.
pub fn block_on<F>(rt: &tokio::runtime::Runtime, command: F) -> Result<i32, Exit>
where
    F: Future<Output = Result<i32, Exit>>,
{
    let guarded = async {
        tokio::select! {
            biased;
            () = WATCH.panicked() => None,
            outcome = command => Some(outcome),
        }
    };
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(guarded)));
    match (WATCH.take(), outcome) {
        (Some(what), _) => Err(panicked(&what)),
        (None, Ok(Some(outcome))) => outcome,
        // Unwound without the hook (it was not installed): still an internal error.
        (None, _) => Err(panicked("a panic with no record")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn runtime() -> Arc<tokio::runtime::Runtime> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("a runtime: {e}"));
        Arc::new(rt)
    }

    /// `block_on(command)` on its own thread, within 10 s (a hang fails the test instead of
    /// hanging it).
    fn ended<F>(rt: &Arc<tokio::runtime::Runtime>, command: F) -> Result<i32, Exit>
    where
        F: Future<Output = Result<i32, Exit>> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::channel();
        let on = rt.clone();
        std::thread::spawn(move || {
            let _ = tx.send(block_on(&on, command));
        });
        rx.recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("dsh would hang: the command still waits after a panic"))
    }

    fn message(outcome: Result<i32, Exit>) -> String {
        match outcome {
            Ok(code) => panic!("exit {code}, not the panic"),
            Err(exit) => {
                assert_eq!(exit.code, 1);
                exit.message.unwrap_or_default()
            }
        }
    }

    /// One test holds the process-wide hook, for every way a panic can meet the command.
    #[test]
    fn a_panic_nothing_contains_ends_the_command_with_exit_1_and_one_sentence_a_contained_one_does_not()
     {
        install();
        let rt = runtime();

        // A spawned task's internal invariant breaks before it wakes the command, which would
        // wait for it forever.
        let done = Arc::new(Notify::new());
        let wake = done.clone();
        let broken = Arc::new(std::sync::atomic::AtomicBool::new(true));
        rt.spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(
                !broken.load(std::sync::atomic::Ordering::Relaxed),
                "the pool's invariant broke"
            );
            wake.notify_one();
        });
        let m = message(ended(&rt, async move {
            done.notified().await;
            Ok(0)
        }));
        assert!(
            m.starts_with("internal error, dsh stopped: thread 'tokio-")
                && m.contains("' panicked at src/cli/panics.rs:")
                && m.contains(": the pool's invariant broke. This is a bug in dsh")
                && m.contains("dsh repair"),
            "{m}"
        );

        // A plain thread (the log's writer is one).
        let m = message(ended(&rt, async {
            std::thread::Builder::new()
                .name("dsh-session-writer".into())
                .spawn(|| panic!("the writer fell over"))
                .map_err(|e| Exit::internal(e.to_string()))?;
            std::future::pending::<()>().await;
            Ok(0)
        }));
        assert!(
            m.contains("thread 'dsh-session-writer' panicked")
                && m.contains("the writer fell over"),
            "{m}"
        );

        // The command itself, on the thread that runs it (`main`'s, in the program).
        let m = message(ended(&rt, async {
            let text = String::from("the command's own bug");
            if !text.is_empty() {
                panic!("{text}");
            }
            Ok(0)
        }));
        assert!(m.contains("the command's own bug"), "{m}");

        // A panic the pipeline contains (a tool body's, a listener's) is not the program's
        // end: the command goes on and ends as it would have.
        let contained = ended(&rt, async {
            let failed = dsh::core::contained::future(std::pin::pin!(async {
                tokio::task::yield_now().await;
                panic!("a tool body's bug");
            }))
            .await;
            Ok(if failed.is_err() { 7 } else { 0 })
        });
        assert!(
            matches!(contained, Ok(7)),
            "{:?}",
            contained.map_err(|e| e.message)
        );

        // A command that ends on its own, nothing panicking: its outcome as it was.
        assert!(matches!(ended(&rt, async { Ok(130) }), Ok(130)));
    }
}
