//! [`Session`]: one append-only log (spec L1, L3) over an in-memory or a durable store.
//!
//! Guarantees: seqs are assigned in the order `append` is called; an appended event is frozen
//! (shared behind `Arc`, never changed); append is O(1) amortized whatever the log length; with
//! a durable store an append resolves only once its line is synced; subscribers see each durable
//! event once, in seq order, and a panicking subscriber is contained.

use std::collections::VecDeque;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};
use tokio::sync::oneshot;

use crate::ack::{self, AckRx};
use crate::error::SessionError;
use crate::event::{Event, MAX_DATA_DEPTH};
use crate::framing::Framing;
use crate::header::Header;
use crate::invariant::InvariantChecker;
use crate::queue::WriteQueue;
use crate::sink::LogSink;
use crate::snapshot::{Entry, EventList, Events};
use crate::writer::{self, WriteReq};

type Subscriber = Arc<dyn Fn(u64, &Event) + Send + Sync>;

/// Mutable state, behind one short-held lock.
pub(crate) struct State {
    /// Durable (acknowledged) events.
    log: EventList,
    /// The seq the next append gets.
    next_seq: u64,
    /// Framing over every assigned event.
    framing: Framing,
    invariants: Option<InvariantChecker>,
    /// Durable events not yet shown to subscribers.
    notify: VecDeque<Entry>,
    notifying: bool,
    /// Whether anyone ever subscribed: until then nothing is queued for subscribers.
    watched: bool,
    failed: Option<String>,
    closed: bool,
}

/// What the writer thread shares with the session.
pub(crate) struct Shared {
    header: Header,
    path: Option<PathBuf>,
    state: Mutex<State>,
    subscribers: RwLock<Arc<Vec<(u64, Subscriber)>>>,
    next_subscriber: AtomicU64,
}

impl Shared {
    /// Records durable events and shows them to subscribers, in seq order.
    pub(crate) fn commit(&self, entries: impl IntoIterator<Item = Entry>) {
        let mut st = self.state.lock();
        for entry in entries {
            if st.watched {
                st.log.push(entry.clone());
                st.notify.push_back(entry);
            } else {
                st.log.push(entry);
            }
        }
        if !st.watched {
            return;
        }
        let dispatch = !st.notifying;
        st.notifying = true;
        drop(st);
        if dispatch {
            self.dispatch();
        }
    }

    /// Shows queued events to subscribers until the queue is empty. Only one thread dispatches
    /// at a time; an append made from inside a subscriber is queued and shown after.
    fn dispatch(&self) {
        loop {
            let (seq, event) = {
                let mut st = self.state.lock();
                match st.notify.pop_front() {
                    Some(entry) => entry,
                    None => {
                        st.notifying = false;
                        return;
                    }
                }
            };
            let subscribers = self.subscribers.read().clone();
            for (id, subscriber) in subscribers.iter() {
                let outcome = dsh_core::contained::call(|| subscriber(seq, &event));
                if outcome.is_err() {
                    tracing::warn!(
                        subscriber = id,
                        seq,
                        event_type = event.event_type(),
                        "a session subscriber panicked; the event stays appended"
                    );
                }
            }
        }
    }

    /// Refuses every later append.
    pub(crate) fn poison(&self, reason: String) {
        self.state.lock().failed = Some(reason);
    }
}

struct Inner {
    shared: Arc<Shared>,
    writer: Option<Arc<WriteQueue>>,
}

impl Drop for Inner {
    /// The last handle is gone: the writer thread writes what is queued, then releases the sink.
    fn drop(&mut self) {
        if let Some(queue) = &self.writer {
            queue.hang_up();
        }
    }
}

/// One session's append-only event log. Cheap to clone; clones share the log.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id())
            .field("path", &self.inner.shared.path)
            .field("next_seq", &self.next_seq())
            .finish()
    }
}

/// A subscriber registration; dropping it unsubscribes.
#[must_use = "dropping a Subscription unsubscribes"]
pub struct Subscription {
    shared: Weak<Shared>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            let mut subscribers = shared.subscribers.write();
            let kept: Vec<(u64, Subscriber)> = subscribers
                .iter()
                .filter(|(id, _)| *id != self.id)
                .cloned()
                .collect();
            *subscribers = Arc::new(kept);
        }
    }
}

enum Submitted {
    Ready(Result<u64, SessionError>),
    Waiting(AckRx),
}

/// The parts a session is resumed from.
pub(crate) struct Resume {
    pub header: Header,
    pub path: Option<PathBuf>,
    pub events: Vec<Entry>,
    pub next_seq: u64,
    pub framing: Framing,
    pub invariants: Option<InvariantChecker>,
}

fn fresh_state(next_seq: u64, framing: Framing, invariants: Option<InvariantChecker>) -> State {
    State {
        log: EventList::default(),
        next_seq,
        framing,
        invariants,
        notify: VecDeque::new(),
        notifying: false,
        watched: false,
        failed: None,
        closed: false,
    }
}

impl Session {
    /// A session kept in memory only.
    pub fn in_memory(id: &str) -> Session {
        let cwd = std::env::current_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        Session::in_memory_with_header(Header::new(id, &cwd))
    }

    /// A session kept in memory only, with the given header.
    pub fn in_memory_with_header(header: Header) -> Session {
        let shared = Arc::new(Shared {
            header,
            path: None,
            state: Mutex::new(fresh_state(0, Framing::default(), None)),
            subscribers: RwLock::new(Arc::new(Vec::new())),
            next_subscriber: AtomicU64::new(1),
        });
        Session {
            inner: Arc::new(Inner {
                shared,
                writer: None,
            }),
        }
    }

    /// A new durable session writing to a custom sink. The header line is written first, by the
    /// writer thread; if that fails, every append fails with [`SessionError::Poisoned`].
    pub fn with_sink(header: Header, sink: impl LogSink) -> Result<Session, SessionError> {
        let mut first = Vec::new();
        header.write_line(&mut first);
        let resume = Resume {
            header,
            path: None,
            events: Vec::new(),
            next_seq: 0,
            framing: Framing::default(),
            invariants: None,
        };
        Session::resume(resume, Box::new(sink), 0, Some(first))
    }

    /// Builds a session over existing events and starts its writer thread.
    pub(crate) fn resume(
        resume: Resume,
        sink: Box<dyn LogSink>,
        durable_len: u64,
        first: Option<Vec<u8>>,
    ) -> Result<Session, SessionError> {
        let mut state = fresh_state(resume.next_seq, resume.framing, resume.invariants);
        for entry in resume.events {
            state.log.push(entry);
        }
        let shared = Arc::new(Shared {
            header: resume.header,
            path: resume.path.clone(),
            state: Mutex::new(state),
            subscribers: RwLock::new(Arc::new(Vec::new())),
            next_subscriber: AtomicU64::new(1),
        });
        let tx = writer::spawn(
            sink,
            durable_len,
            first,
            resume.path.clone(),
            shared.clone(),
        )
        .map_err(|e| {
            SessionError::io(
                "start the writer for",
                resume.path.as_deref().unwrap_or(Path::new("(sink)")),
                e,
            )
        })?;
        Ok(Session {
            inner: Arc::new(Inner {
                shared,
                writer: Some(tx),
            }),
        })
    }

    /// The session id (from the header).
    pub fn id(&self) -> &str {
        self.inner.shared.header.id()
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.inner.shared.header
    }

    /// The log file, for a file-backed session.
    pub fn path(&self) -> Option<&Path> {
        self.inner.shared.path.as_deref()
    }

    /// Whether an append is acknowledged only once a sink holds it (a file, a store) rather
    /// than at once (in memory): only then does grouping appends save work.
    pub fn is_durable(&self) -> bool {
        self.inner.writer.is_some()
    }

    /// Appends an event and returns its seq.
    ///
    /// The seq is assigned when `append` is CALLED (so seqs follow call order even if the
    /// futures are awaited in another order). The future resolves once the event is durable
    /// (for a file store: written and synced, in a group commit) and every subscriber has seen
    /// it. Awaiting it is what asks a durable session to write now: an event whose future
    /// nobody awaits yet is written with the next awaited one, or 2 ms after it was appended. An event rejected by the invariant checks, a malformed chunk run, or data nested
    /// deeper than the JSON limit is refused and not appended.
    pub fn append(
        &self,
        event: Event,
    ) -> impl Future<Output = Result<u64, SessionError>> + Send + 'static {
        let submitted = self.submit(event);
        async move {
            match submitted {
                Submitted::Ready(result) => result,
                Submitted::Waiting(rx) => rx.await,
            }
        }
    }

    /// Appends an event like [`Session::append`], saying at once whether it was refused (the
    /// refusals `append` reports without waiting: a malformed event, one the invariant checks
    /// reject, a closed or failed session); the future returned resolves with its seq once it
    /// is durable.
    ///
    /// Unlike polling `append`'s future once to learn the same, this does not count as
    /// waiting for the event: a durable session writes an event nobody waits for with the next
    /// append somebody does wait for (one sync for both), or shortly after
    /// (`crate::queue::Rules::unawaited`, 2 ms). Dropping the future does not withdraw the
    /// event; a failure to write it fails the next append, and every one after it.
    pub fn enqueue(
        &self,
        event: Event,
    ) -> Result<impl Future<Output = Result<u64, SessionError>> + Send + 'static, SessionError>
    {
        let submitted = match self.submit(event) {
            Submitted::Ready(Err(e)) => return Err(e),
            accepted => accepted,
        };
        Ok(async move {
            match submitted {
                Submitted::Ready(result) => result,
                Submitted::Waiting(rx) => rx.await,
            }
        })
    }

    fn submit(&self, event: Event) -> Submitted {
        if let Some(message) = event.shape_error() {
            return Submitted::Ready(Err(SessionError::InvalidEvent(message)));
        }
        if event.data_depth() > MAX_DATA_DEPTH {
            return Submitted::Ready(Err(SessionError::InvalidEvent(format!(
                "{} data nests deeper than {MAX_DATA_DEPTH} levels (a log line holds at most {})",
                event.event_type(),
                dsh_core::json::MAX_DEPTH
            ))));
        }
        let line = self.inner.writer.as_ref().map(|_| {
            let mut line = Vec::new();
            event.write_line(&mut line);
            line
        });
        let shared = &self.inner.shared;
        let mut st = shared.state.lock();
        if let Some(reason) = &st.failed {
            return Submitted::Ready(Err(SessionError::Poisoned(reason.clone())));
        }
        if st.closed {
            return Submitted::Ready(Err(SessionError::Closed));
        }
        if let Some(checker) = &st.invariants
            && let Err(violation) = checker.check(&event)
        {
            return Submitted::Ready(Err(violation.into()));
        }
        let seq = st.next_seq;
        st.next_seq += event.seq_span();
        st.framing.apply(&event);
        if let Some(checker) = st.invariants.as_mut() {
            checker.commit(&event);
        }
        match (&self.inner.writer, line) {
            (Some(queue), Some(line)) => {
                let (ack, rx) = ack::channel(queue);
                let req = WriteReq {
                    seq,
                    event,
                    line,
                    ack,
                };
                if queue.push(req).is_err() {
                    st.failed = Some("the session's writer thread stopped".to_owned());
                    return Submitted::Ready(Err(SessionError::Closed));
                }
                Submitted::Waiting(rx)
            }
            _ if !st.watched => {
                st.log.push((seq, event));
                Submitted::Ready(Ok(seq))
            }
            _ => {
                st.log.push((seq, event.clone()));
                st.notify.push_back((seq, event));
                let dispatch = !st.notifying;
                st.notifying = true;
                drop(st);
                if dispatch {
                    shared.dispatch();
                }
                Submitted::Ready(Ok(seq))
            }
        }
    }

    /// The seq the next append will get (counting appends not yet durable).
    pub fn next_seq(&self) -> u64 {
        self.inner.shared.state.lock().next_seq
    }

    /// A frozen snapshot of the durable events, in seq order (cheap: shares the events).
    pub fn events(&self) -> Events {
        self.inner.shared.state.lock().log.snapshot()
    }

    /// The open turn, if any (counting appends not yet durable).
    pub fn open_turn(&self) -> Option<u32> {
        let turn = self.inner.shared.state.lock().framing.turn;
        turn.map(|t| u32::try_from(t).unwrap_or(u32::MAX))
    }

    /// The open step as `(turn, step)`, if any (counting appends not yet durable).
    pub fn open_step(&self) -> Option<(u32, u32)> {
        let step = self.inner.shared.state.lock().framing.step;
        step.map(|(t, s)| {
            (
                u32::try_from(t).unwrap_or(u32::MAX),
                u32::try_from(s).unwrap_or(u32::MAX),
            )
        })
    }

    /// Calls `f(seq, event)` for every event that becomes durable from now on, in seq order,
    /// on the thread that made it durable (the writer thread for a file store). A panic in `f`
    /// is caught and logged. `f` must not block on this session's appends.
    pub fn subscribe(&self, f: impl Fn(u64, &Event) + Send + Sync + 'static) -> Subscription {
        let shared = &self.inner.shared;
        let id = shared.next_subscriber.fetch_add(1, Ordering::Relaxed);
        {
            let mut subscribers = shared.subscribers.write();
            let mut list: Vec<(u64, Subscriber)> = subscribers.iter().cloned().collect();
            list.push((id, Arc::new(f)));
            *subscribers = Arc::new(list);
        }
        // From here on every event made durable is queued for the subscribers.
        shared.state.lock().watched = true;
        Subscription {
            shared: Arc::downgrade(shared),
            id,
        }
    }

    /// Turns on the append-time invariant checks (approval audit, code dispatch). The durable
    /// events already in the log are replayed first (call this when no append is in flight); if
    /// one of them breaks an invariant, the checks are not enabled and that violation is
    /// returned. From then on each append is checked in O(1) before it gets a seq.
    pub fn enable_invariants(&self) -> Result<(), SessionError> {
        let mut st = self.inner.shared.state.lock();
        let snapshot = st.log.snapshot();
        let checker = InvariantChecker::seeded(snapshot.iter().map(|(_, e)| e))?;
        st.invariants = Some(checker);
        Ok(())
    }

    /// Stops accepting appends, waits until every queued append is durable, and releases the
    /// file and its lock. Later appends fail with [`SessionError::Closed`].
    pub async fn close(&self) -> Result<(), SessionError> {
        let rx = {
            let mut st = self.inner.shared.state.lock();
            if st.closed {
                None
            } else {
                st.closed = true;
                match &self.inner.writer {
                    Some(queue) => {
                        let (ack, rx) = oneshot::channel();
                        queue.close(ack);
                        Some(rx)
                    }
                    None => None,
                }
            }
        };
        if let Some(rx) = rx {
            let _ = rx.await;
        }
        let failed = self.inner.shared.state.lock().failed.clone();
        match failed {
            Some(reason) => Err(SessionError::Poisoned(reason)),
            None => Ok(()),
        }
    }
}
