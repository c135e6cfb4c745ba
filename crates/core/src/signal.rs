//! The cancellation signal: cheap to clone, carries the FIRST abort reason, and fusible (a fused
//! signal fires when either source fires; fusion is one-way, the sources never see the child).
//!
//! Guarantees: `abort` is idempotent and only the first reason is kept; a signal fused from an
//! already-aborted source is aborted at once with that source's reason; waiting never misses an
//! abort that happened before or during the wait.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::deadline::TimeoutReason;

/// Why a signal fired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AbortReason {
    /// A deadline fired.
    Timeout(TimeoutReason),
    /// Someone cancelled.
    Cancelled(CancelCause),
}

/// Who cancelled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CancelCause {
    /// The user interrupted.
    User,
    /// A parent (an outer call or turn) was cancelled.
    Parent,
    /// The owner was disposed.
    Disposed,
    /// Anything else, described.
    Other(Arc<str>),
}

impl CancelCause {
    /// The reference's `kind` string.
    pub fn kind(&self) -> &str {
        match self {
            CancelCause::User => "user",
            CancelCause::Parent => "parent",
            CancelCause::Disposed => "disposed",
            CancelCause::Other(s) => s,
        }
    }
}

impl fmt::Display for AbortReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AbortReason::Timeout(t) => write!(f, "{t}"),
            AbortReason::Cancelled(c) => write!(f, "cancelled ({})", c.kind()),
        }
    }
}

struct State {
    reason: Option<AbortReason>,
    children: Vec<Weak<Inner>>,
}

struct Inner {
    state: Mutex<State>,
    notify: Notify,
    /// Whether `state.reason` is set: set once, under the lock, after the reason, so a check
    /// ([`Signal::is_aborted`], several times a call) reads one word instead of taking the lock.
    fired: AtomicBool,
}

impl Inner {
    fn new() -> Arc<Inner> {
        Arc::new(Inner {
            state: Mutex::new(State {
                reason: None,
                children: Vec::new(),
            }),
            notify: Notify::new(),
            fired: AtomicBool::new(false),
        })
    }

    /// Sets the reason if none is set yet and fires every live descendant that has none, walking
    /// the descendants iteratively (a long chain of derived signals cannot overflow the stack).
    fn abort(&self, reason: AbortReason) -> bool {
        let Some(children) = self.fire(&reason) else {
            return false;
        };
        let mut pending: Vec<Weak<Inner>> = children;
        while let Some(child) = pending.pop() {
            if let Some(c) = child.upgrade()
                && let Some(more) = c.fire(&reason)
            {
                pending.extend(more);
            }
        }
        true
    }

    /// Sets the reason and wakes waiters; returns the children to fire, or `None` if it had fired.
    fn fire(&self, reason: &AbortReason) -> Option<Vec<Weak<Inner>>> {
        let children = {
            let mut st = self.state.lock();
            if st.reason.is_some() {
                return None;
            }
            st.reason = Some(reason.clone());
            self.fired.store(true, Ordering::Release);
            std::mem::take(&mut st.children)
        };
        self.notify.notify_waiters();
        Some(children)
    }

    /// Registers `child` to fire with this signal; returns the reason if already fired.
    fn adopt(&self, child: &Arc<Inner>) -> Option<AbortReason> {
        let mut st = self.state.lock();
        if let Some(r) = &st.reason {
            return Some(r.clone());
        }
        if st.children.len() == st.children.capacity() && st.children.len() >= 8 {
            st.children.retain(|w| w.strong_count() > 0);
        }
        st.children.push(Arc::downgrade(child));
        None
    }
}

/// A cancellation signal. Clones share one state; identity is observable with [`Signal::same`].
#[derive(Clone)]
pub struct Signal(Arc<Inner>);

/// The handle that fires a [`Signal`].
#[derive(Clone)]
pub struct AbortController(Arc<Inner>);

impl AbortController {
    /// A new controller with a live signal.
    pub fn new() -> AbortController {
        AbortController(Inner::new())
    }

    /// The signal this controller fires.
    pub fn signal(&self) -> Signal {
        Signal(self.0.clone())
    }

    /// Fires the signal; returns false if it had already fired (the first reason is kept).
    pub fn abort(&self, reason: AbortReason) -> bool {
        self.0.abort(reason)
    }

    /// Fires the signal as a user cancellation.
    pub fn cancel(&self) -> bool {
        self.abort(AbortReason::Cancelled(CancelCause::User))
    }
}

impl Default for AbortController {
    fn default() -> Self {
        AbortController::new()
    }
}

impl Signal {
    /// A signal that never fires.
    pub fn never() -> Signal {
        Signal(Inner::new())
    }

    /// An already-aborted signal.
    pub fn aborted_with(reason: AbortReason) -> Signal {
        let s = Signal::never();
        s.0.abort(reason);
        s
    }

    /// Whether the signal has fired.
    pub fn is_aborted(&self) -> bool {
        // Release/Acquire: once this reads true, `reason` reads the reason set before it.
        self.0.fired.load(Ordering::Acquire)
    }

    /// The first abort reason, if fired.
    pub fn reason(&self) -> Option<AbortReason> {
        self.0.state.lock().reason.clone()
    }

    /// Whether two handles are the same signal.
    pub fn same(a: &Signal, b: &Signal) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// A new signal that fires when `a` or `b` fires, with the first reason. The sources are
    /// not affected by the child.
    pub fn any(a: &Signal, b: &Signal) -> Signal {
        let child = Inner::new();
        for src in [a, b] {
            if let Some(r) = src.0.adopt(&child) {
                child.abort(r);
                break;
            }
        }
        Signal(child)
    }

    /// A child signal that fires when this one does, plus a controller that fires only the child.
    pub fn child(&self) -> (Signal, AbortController) {
        let ctl = AbortController::new();
        if let Some(r) = self.0.adopt(&ctl.0) {
            ctl.0.abort(r);
        }
        (ctl.signal(), ctl)
    }

    /// Waits until the signal fires and returns its reason.
    pub async fn aborted(&self) -> AbortReason {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = self.reason() {
                return r;
            }
            notified.await;
        }
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason() {
            Some(r) => write!(f, "Signal(aborted: {r})"),
            None => f.write_str("Signal(live)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_reason_wins() {
        let c = AbortController::new();
        assert!(c.abort(AbortReason::Cancelled(CancelCause::Parent)));
        assert!(!c.cancel());
        assert_eq!(
            c.signal().reason(),
            Some(AbortReason::Cancelled(CancelCause::Parent))
        );
    }

    #[test]
    fn fusion_is_one_way() {
        let a = AbortController::new();
        let b = AbortController::new();
        let fused = Signal::any(&a.signal(), &b.signal());
        b.cancel();
        assert!(fused.is_aborted());
        assert!(!a.signal().is_aborted());
    }

    #[test]
    fn fusing_an_aborted_source_aborts_at_once() {
        let a = Signal::aborted_with(AbortReason::Cancelled(CancelCause::User));
        let fused = Signal::any(&Signal::never(), &a);
        assert_eq!(fused.reason(), a.reason());
    }

    #[tokio::test]
    async fn waiting_sees_an_abort_from_another_task() {
        let c = AbortController::new();
        let s = c.signal();
        let t = tokio::spawn(async move { s.aborted().await });
        tokio::task::yield_now().await;
        c.cancel();
        let r = t.await;
        assert!(matches!(r, Ok(AbortReason::Cancelled(CancelCause::User))));
    }
}
