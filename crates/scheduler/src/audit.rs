//! The approval audit seam over the real session log: [`SessionAudit`] is the guard crate's
//! [`AuditSink`] for a `dsh_session::Session`, and [`audit_session`] resumes an
//! [`AuditSession`] from a session's own events. It lives here, the first layer that knows both
//! the guard crate and the session crate, so `dsh-guard` depends on `dsh-core` only.

use std::sync::Arc;

use dsh_core::Json;
use dsh_guard::{APPROVAL_POLICY, ApprovalPolicy, AuditSession, AuditSink, GuardError};
use dsh_session::{Event, Session};
use futures::future::BoxFuture;

/// A session log as the approval audit sink.
#[derive(Clone)]
pub struct SessionAudit(pub Session);

impl AuditSink for SessionAudit {
    /// Appends `Event::other(event_type, data)`; `Ok` once the session acknowledged it (durable
    /// for a file store). A refused or failed append is [`GuardError::Audit`] with the session's
    /// error as its source; subscriber failures after the commit are contained by the session.
    fn append<'a>(
        &'a self,
        event_type: &'a str,
        data: Json,
    ) -> BoxFuture<'a, Result<(), GuardError>> {
        let appended = self.0.append(Event::other(event_type, data));
        Box::pin(async move { appended.await.map(|_| ()).map_err(GuardError::audit_caused) })
    }

    fn open_turn(&self) -> Option<u32> {
        self.0.open_turn()
    }
}

/// An audit session over `session`, resumed with the policy override its events hold (the last
/// valid `approval/policy`, found scanning back from the end).
pub fn audit_session(session: Session) -> Arc<AuditSession> {
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
    AuditSession::resumed(Arc::new(SessionAudit(session)), policy)
}
