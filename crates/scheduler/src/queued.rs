//! Events a driver writes without waiting for each: one sync for several, where waiting for
//! each paid one sync each in a durable session (a step of one call wrote five events, each
//! awaited on its own, around its call's two).
//!
//! Guarantees:
//! - an event is refused at once exactly as [`Session::append`] refuses it (a malformed event,
//!   an invariant check, a closed or failed session), so a refusal stops the driver where it
//!   did before;
//! - queued events keep their order: each gets its seq when it is queued, and the log is
//!   written in seq order, so whatever waits for a later event (a call's `tool/call`, which the
//!   step waits for before any policy or body runs) waits for these too;
//! - [`Queued::settle`] returns once every event queued so far is durable, or with the first
//!   write failure among them (a failed write fails every later append of the session, so the
//!   last event's acknowledgement carries it); [`Queued::settle_visible`] does so only when a
//!   model-visible event is among them, which is what a driver must do before a model is sent a
//!   history holding it (the log replays exactly what the model saw);
//! - an event not waited for is still written, with the next append somebody waits for or
//!   shortly after (`dsh-session`'s unawaited rule), and a failure to write it is logged by the
//!   session and fails the next append.

use std::future::Future;
use std::pin::Pin;

use dsh_session::{Event, Session, SessionError};

use crate::error::SchedulerError;

/// An append's acknowledgement, kept to be awaited later.
pub(crate) type Ack = Pin<Box<dyn Future<Output = Result<u64, SessionError>> + Send>>;

/// The events queued since the last settle (see the module docs).
#[derive(Default)]
pub(crate) struct Queued {
    /// The last queued event's acknowledgement: it resolves after every earlier one.
    last: Option<Ack>,
    /// Whether a model-visible event (a user or context message) is among them.
    visible: bool,
}

impl Queued {
    /// Queues a framing event (a turn's or step's start or end, an assistant message, which
    /// only a step's calls act on and which their `tool/call`s follow).
    pub(crate) fn push(&mut self, session: &Session, event: Event) -> Result<(), SchedulerError> {
        self.last = Some(Box::pin(session.enqueue(event)?));
        Ok(())
    }

    /// Queues an event the model is shown as history (a user or context message).
    pub(crate) fn push_visible(
        &mut self,
        session: &Session,
        event: Event,
    ) -> Result<(), SchedulerError> {
        self.push(session, event)?;
        self.visible = true;
        Ok(())
    }

    /// Waits until everything queued is durable.
    pub(crate) async fn settle(&mut self) -> Result<(), SchedulerError> {
        self.visible = false;
        match self.last.take() {
            Some(ack) => ack.await.map(drop).map_err(SchedulerError::from),
            None => Ok(()),
        }
    }

    /// Waits until everything queued is durable if a model-visible event is among it.
    pub(crate) async fn settle_visible(&mut self) -> Result<(), SchedulerError> {
        if self.visible {
            self.settle().await
        } else {
            Ok(())
        }
    }
}
