//! The seam to the session log: [`AuditSink`] appends the approval audit events and says whether
//! a turn is open, so this crate never needs the session's internals.
//!
//! Contract: `append` returns `Ok` only once the event is committed to the log; an `Err` means
//! the log did not grow. Failures of the session's own observers after the commit are the
//! session's to contain: they never turn a committed append into an error.

use std::sync::Arc;

use dsh_core::Json;
use futures::future::BoxFuture;

use crate::error::GuardError;

/// Where approval audit events go: one session's append-only log.
pub trait AuditSink: Send + Sync {
    /// Appends one event `{type: event_type, data}`; `Ok` once committed.
    fn append<'a>(
        &'a self,
        event_type: &'a str,
        data: Json,
    ) -> BoxFuture<'a, Result<(), GuardError>>;
    /// The number of the turn currently open (a `turn/start` not yet closed by `turn/end`).
    fn open_turn(&self) -> Option<u32>;
}

impl<T: AuditSink + ?Sized> AuditSink for Arc<T> {
    fn append<'a>(
        &'a self,
        event_type: &'a str,
        data: Json,
    ) -> BoxFuture<'a, Result<(), GuardError>> {
        (**self).append(event_type, data)
    }
    fn open_turn(&self) -> Option<u32> {
        (**self).open_turn()
    }
}

/// Event type of the question (`{id, toolName, callId?, reason?}`).
pub const APPROVAL_ASKED: &str = "approval/asked";
/// Event type of the answer (`{id, outcome}`).
pub const APPROVAL_DECIDED: &str = "approval/decided";
/// Event type of a session policy switch (`{policy}`).
pub const APPROVAL_POLICY: &str = "approval/policy";
