//! Single-decision waterfalls (`fs/write-intent`, `fs/edit-intent`, `tools/code-dispatch-log`):
//! listeners in order, each deciding or delegating; the first that decides owns the answer; the
//! innermost default is supplied by the caller. Synchronous and contained: a panicking listener
//! never unwinds into the caller. With [`Waterfall::decide`] it is skipped as if it had delegated
//! (logged); with [`Waterfall::decide_or`] its panic becomes the caller's fail-closed answer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use dsh_core::Failure;
use parking_lot::RwLock;

use crate::handle::ListenerHandle;

/// The rest of a single-decision waterfall.
pub struct DecideNext<'a, Q, A> {
    rest: &'a [(u64, Listener<Q, A>)],
    default: &'a dyn Fn(&Q) -> A,
    on_panic: Option<&'a PanicAnswer<'a, Q, A>>,
}

/// Turns a listener's panic into the waterfall's answer (fail closed).
pub type PanicAnswer<'a, Q, A> = dyn Fn(&Q, Failure) -> A + 'a;

/// A listener: decide, or call `next.run(q)`.
pub type Listener<Q, A> = Arc<dyn Fn(&Q, DecideNext<'_, Q, A>) -> A + Send + Sync>;

impl<Q, A> DecideNext<'_, Q, A> {
    /// Asks the rest of the waterfall.
    pub fn run(self, q: &Q) -> A {
        let mut rest = self.rest;
        loop {
            match rest.split_first() {
                None => return (self.default)(q),
                Some(((_, l), tail)) => {
                    let next = DecideNext {
                        rest: tail,
                        default: self.default,
                        on_panic: self.on_panic,
                    };
                    match dsh_core::contained::call(|| l(q, next)) {
                        Ok(a) => return a,
                        Err(p) => {
                            let failure = Failure::from_panic("waterfall listener", &*p);
                            if let Some(f) = self.on_panic {
                                tracing::warn!(error = %failure, "a waterfall listener panicked; the question fails closed");
                                return f(q, failure);
                            }
                            tracing::warn!(error = %failure, "a waterfall listener panicked; it is skipped");
                            rest = tail;
                        }
                    }
                }
            }
        }
    }
}

/// Listeners with their ids, outermost first.
type Chain<Q, A> = Arc<[(u64, Listener<Q, A>)]>;

struct Inner<Q, A> {
    /// The last id handed out, and the listeners in order.
    listeners: RwLock<(u64, Chain<Q, A>)>,
    /// How many listeners there are, set under the write lock: a question with none is
    /// answered by its default without the lock (the usual case of some points).
    count: AtomicUsize,
}

/// A named single-decision waterfall.
pub struct Waterfall<Q, A> {
    inner: Arc<Inner<Q, A>>,
}

impl<Q, A> Clone for Waterfall<Q, A> {
    fn clone(&self) -> Self {
        Waterfall {
            inner: self.inner.clone(),
        }
    }
}

impl<Q: 'static, A: 'static> Default for Waterfall<Q, A> {
    fn default() -> Self {
        Waterfall::new()
    }
}

/// Removes its listener when disposed or dropped (the crate's shared [`ListenerHandle`]).
pub type WaterfallHandle = ListenerHandle;

impl<Q: 'static, A: 'static> Waterfall<Q, A> {
    /// An empty waterfall.
    pub fn new() -> Self {
        Waterfall {
            inner: Arc::new(Inner {
                listeners: RwLock::new((0, Arc::from(Vec::new()))),
                count: AtomicUsize::new(0),
            }),
        }
    }

    fn add(&self, l: Listener<Q, A>, front: bool) -> WaterfallHandle {
        let id = {
            let mut g = self.inner.listeners.write();
            g.0 += 1;
            let id = g.0;
            let mut v: Vec<(u64, Listener<Q, A>)> = g.1.to_vec();
            if front {
                v.insert(0, (id, l));
            } else {
                v.push((id, l));
            }
            self.inner.count.store(v.len(), Ordering::Release);
            g.1 = Arc::from(v);
            id
        };
        let weak: Weak<Inner<Q, A>> = Arc::downgrade(&self.inner);
        ListenerHandle::new(move || {
            if let Some(inner) = weak.upgrade() {
                let mut g = inner.listeners.write();
                let v: Vec<(u64, Listener<Q, A>)> =
                    g.1.iter().filter(|(i, _)| *i != id).cloned().collect();
                inner.count.store(v.len(), Ordering::Release);
                g.1 = Arc::from(v);
            }
        })
    }

    /// Adds a listener after the existing ones.
    pub fn on(
        &self,
        l: impl Fn(&Q, DecideNext<'_, Q, A>) -> A + Send + Sync + 'static,
    ) -> WaterfallHandle {
        self.add(Arc::new(l), false)
    }

    /// Adds a listener in front of the existing ones.
    pub fn prepend(
        &self,
        l: impl Fn(&Q, DecideNext<'_, Q, A>) -> A + Send + Sync + 'static,
    ) -> WaterfallHandle {
        self.add(Arc::new(l), true)
    }

    /// Asks the waterfall; `default` answers when every listener delegates. A listener that
    /// panics is skipped as if it had delegated (fail-open: prefer [`Waterfall::decide_or`]
    /// where the answer guards something).
    pub fn decide(&self, q: &Q, default: &dyn Fn(&Q) -> A) -> A {
        if self.is_empty() {
            return default(q);
        }
        let snapshot = self.inner.listeners.read().1.clone();
        DecideNext {
            rest: &snapshot,
            default,
            on_panic: None,
        }
        .run(q)
    }

    /// Asks the waterfall like [`Waterfall::decide`], but a listener that panics ends the
    /// question with `on_panic(q, failure)` (fail-closed: e.g. a refusal carrying the failure).
    /// The listeners asked are those registered when the question started.
    pub fn decide_or(
        &self,
        q: &Q,
        default: &dyn Fn(&Q) -> A,
        on_panic: &dyn Fn(&Q, Failure) -> A,
    ) -> A {
        if self.is_empty() {
            return default(q);
        }
        let snapshot = self.inner.listeners.read().1.clone();
        DecideNext {
            rest: &snapshot,
            default,
            on_panic: Some(on_panic),
        }
        .run(q)
    }

    /// How many listeners are registered.
    pub fn len(&self) -> usize {
        self.inner.count.load(Ordering::Acquire)
    }

    /// Whether no listener is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
