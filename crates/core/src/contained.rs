//! Panics the pipeline contains: a listener, guard, renderer or tool body that panics fails its
//! own call (or its own listener's verdict) and nothing else. Every place dsh catches such a
//! panic goes through [`call`] or [`future`], which mark the thread while the caught code runs,
//! so a process-wide panic hook can tell a panic about to be contained ([`active`]) from one
//! nothing catches (which in the `dsh` program ends the program: see `src/cli/panics.rs`).
//!
//! Guarantees: [`active`] is true exactly while the current thread runs code inside [`call`] or
//! polls a future inside [`future`] (nesting counted), including while a panic raised there
//! runs the panic hook; both return the panic's payload instead of unwinding further.

use std::cell::Cell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

thread_local! {
    /// How many containing scopes the current thread is inside.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Leaves the scope when dropped (the depth is right even if the payload's drop panics).
struct Scope;

impl Scope {
    #[inline]
    fn enter() -> Scope {
        DEPTH.with(|d| d.set(d.get().saturating_add(1)));
        Scope
    }
}

impl Drop for Scope {
    #[inline]
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Whether a panic raised now on this thread will be contained by a caller (the panic hook
/// runs before the unwinding reaches it).
pub fn active() -> bool {
    DEPTH.with(Cell::get) > 0
}

/// Runs `f`, containing a panic: `Err` holds its payload. The caller owns what `f` touched and
/// treats a panic as the failure of that one piece of work (which is why unwind safety is
/// asserted here).
#[inline]
pub fn call<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    let _scope = Scope::enter();
    std::panic::catch_unwind(AssertUnwindSafe(f))
}

/// Runs the pinned `fut`, containing a panic raised while it is polled: `Err` holds its
/// payload, and the future is not polled again. Pinned by the caller (`std::pin::pin!`), it is
/// neither moved nor boxed here.
#[inline]
pub fn future<F: Future + ?Sized>(fut: Pin<&mut F>) -> Contained<'_, F> {
    Contained { fut: Some(fut) }
}

/// The future of [`future`].
#[must_use = "a future does nothing unless polled"]
pub struct Contained<'a, F: ?Sized> {
    /// `None` once it has panicked.
    fut: Option<Pin<&'a mut F>>,
}

impl<F: Future + ?Sized> Future for Contained<'_, F> {
    type Output = std::thread::Result<F::Output>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(fut) = self.fut.as_mut() else {
            return Poll::Ready(Err(Box::new("a contained future polled after it panicked")));
        };
        match call(|| fut.as_mut().poll(cx)) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => {
                self.fut = None;
                Poll::Ready(Err(payload))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_call_is_contained_and_seen_as_contained_by_the_hook() {
        assert!(!active());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let out = {
            let seen = seen.clone();
            call(move || {
                let inner = call(|| {
                    if let Ok(mut s) = seen.lock() {
                        s.push(active());
                    }
                    panic!("inner");
                });
                assert!(inner.is_err(), "the inner panic is contained");
                // Still inside the outer scope once the inner one is left.
                active()
            })
        };
        assert_eq!(out.ok(), Some(true));
        assert_eq!(seen.lock().map(|s| s.clone()).ok(), Some(vec![true]));
        assert!(!active(), "left every scope");
    }

    #[test]
    fn a_future_is_marked_while_polled_and_its_panic_is_contained() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("a runtime: {e}"));
        rt.block_on(async {
            let marked = future(std::pin::pin!(async {
                let before = active();
                tokio::task::yield_now().await;
                (before, active())
            }))
            .await;
            assert_eq!(marked.ok(), Some((true, true)), "marked on every poll");
            assert!(!active(), "not marked between polls");
            let failed = future(std::pin::pin!(async {
                tokio::task::yield_now().await;
                panic!("in a body");
            }))
            .await;
            let payload = failed.err().and_then(|p| p.downcast_ref::<&str>().copied());
            assert_eq!(payload, Some("in a body"));
        });
    }
}
