//! The next-step inbox: contexts and steering waiting for the next step of a turn.
//!
//! Guarantees: items leave in the order they came; an [`Inbox`] is shared (cloning it gives a
//! handle to the same queue), so the agent loop, a tool body or a hook may steer while a step
//! runs and the driver takes everything at the next step's start; nothing is dropped by the
//! driver except a rejected step's prompt (the rest goes back to the front, in order).

use std::sync::Arc;

use dsh_core::ContextMessage;
use parking_lot::Mutex;

/// A shared queue of messages for the next step (see the module docs).
#[derive(Clone, Default)]
pub struct Inbox(Arc<Mutex<Vec<ContextMessage>>>);

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox").field("len", &self.len()).finish()
    }
}

impl Inbox {
    /// An empty inbox.
    pub fn new() -> Inbox {
        Inbox::default()
    }

    /// Queues a message at the back.
    pub fn push(&self, message: ContextMessage) {
        self.0.lock().push(message);
    }

    /// Takes every queued message, in order.
    pub fn take(&self) -> Vec<ContextMessage> {
        std::mem::take(&mut *self.0.lock())
    }

    /// Puts messages back at the front, before anything queued since they were taken.
    pub fn restore(&self, messages: Vec<ContextMessage>) {
        if messages.is_empty() {
            return;
        }
        let mut queue = self.0.lock();
        let later = std::mem::replace(&mut *queue, messages);
        queue.extend(later);
    }

    /// Removes the queued message with id `id`, if one waits; returns it and where it was.
    pub fn remove(&self, id: &str) -> Option<(usize, ContextMessage)> {
        let mut queue = self.0.lock();
        let at = queue.iter().position(|m| &*m.id == id)?;
        Some((at, queue.remove(at)))
    }

    /// Removes every queued message.
    pub fn clear(&self) {
        self.0.lock().clear();
    }

    /// How many messages wait.
    pub fn len(&self) -> usize {
        self.0.lock().len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.0.lock().is_empty()
    }

    /// A copy of what waits, in order.
    pub fn snapshot(&self) -> Vec<ContextMessage> {
        self.0.lock().clone()
    }
}
