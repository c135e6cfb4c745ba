//! The approval audit seam implemented by the real session log: `dsh_session::Session` is an
//! [`AuditSink`], and an [`AuditSession`] can be resumed from a session's own events.

use std::sync::Arc;

use dsh_core::Json;
use dsh_session::{Event, Session};
use futures::future::BoxFuture;

use crate::approval::{ApprovalPolicy, AuditSession};
use crate::audit::{APPROVAL_POLICY, AuditSink};
use crate::error::GuardError;

impl AuditSink for Session {
    /// Appends `Event::other(event_type, data)`; `Ok` once the session acknowledged it (durable
    /// for a file store). A refused or failed append is [`GuardError::Audit`] with the session's
    /// message; subscriber failures after the commit are contained by the session.
    fn append<'a>(
        &'a self,
        event_type: &'a str,
        data: Json,
    ) -> BoxFuture<'a, Result<(), GuardError>> {
        let appended = Session::append(self, Event::other(event_type, data));
        Box::pin(async move { appended.await.map(|_| ()).map_err(GuardError::audit) })
    }

    fn open_turn(&self) -> Option<u32> {
        Session::open_turn(self)
    }
}

impl AuditSession {
    /// An audit session over `session`, resumed with the policy override its events hold (the
    /// last valid `approval/policy`, found scanning back from the end).
    pub fn from_session(session: Session) -> Arc<AuditSession> {
        let events = session.events();
        let policy = events.iter().rev().find_map(|(_, e)| {
            if e.event_type() != APPROVAL_POLICY {
                return None;
            }
            e.data()
                .value()
                .get("policy")?
                .as_str()?
                .parse::<ApprovalPolicy>()
                .ok()
        });
        AuditSession::resumed(Arc::new(session), policy)
    }
}
