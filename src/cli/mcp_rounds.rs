//! Asking clients on MCP protocol `2026-07-28` and later, which forbids a server's requests:
//! multi round-trip requests (MRTR). When a call of such a client needs an answer (an `ask` of
//! the rules), its `tools/call` is answered with an `InputRequiredResult` holding the same
//! approval form as elicitation and a `requestState`; the client retries the call with its
//! answer and that state, and the call, parked meanwhile at its approval, goes on.
//!
//! Guarantees: the call runs once, whatever the number of rounds (a retry resumes the parked
//! call, never starts another); the state is a random handle to the parked call, kept here,
//! never data the client could forge, and is good for one retry of the same tool (a retry
//! naming another tool, an unknown handle or one already used is refused and changes nothing);
//! only an `accept` with `allow: true` allows the call, once, and anything else denies it; a
//! client that never comes back has the call denied after [`Rounds::ttl`], so the call still
//! gets its one result in the log; a cancel of a round's request cancels the call.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use dsh::guard::ApprovalOutcome;
use rmcp::ErrorData;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest,
    InputRequests, InputRequiredResult, InputResponses,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// The key of the approval form in `inputRequests` and `inputResponses`.
pub(super) const APPROVAL: &str = "approval";

/// An ask of a running call, for its client to answer in the next round.
pub(super) struct Ask {
    /// The approval form.
    pub params: ElicitRequestParams,
    /// Where the answer goes.
    pub answer: oneshot::Sender<ApprovalOutcome>,
}

/// A call in progress between rounds: what the next round awaits.
pub(super) struct Run<T> {
    /// The call, run on a task of its own (it outlives the round that started it).
    pub result: tokio::task::JoinHandle<T>,
    /// The call's asks.
    pub asks: mpsc::Receiver<Ask>,
    /// Cancels the call.
    pub cancel: dsh::core::AbortController,
}

struct Parked<T> {
    tool: String,
    run: Run<T>,
    answer: oneshot::Sender<ApprovalOutcome>,
}

/// The calls parked at an ask, by handle.
pub(super) struct Rounds<T> {
    parked: parking_lot::Mutex<HashMap<String, Parked<T>>>,
    /// How long a parked call waits for its client's retry before its ask is denied.
    pub ttl: Duration,
}

impl<T: Send + 'static> Rounds<T> {
    /// No parked calls; an unanswered ask is denied after `ttl`.
    pub(super) fn new(ttl: Duration) -> Arc<Rounds<T>> {
        Arc::new(Rounds {
            parked: parking_lot::Mutex::new(HashMap::new()),
            ttl,
        })
    }

    /// Parks `run` at `ask` and returns what the round answers: the form and the handle.
    pub(super) fn park(self: &Arc<Self>, tool: &str, run: Run<T>, ask: Ask) -> InputRequiredResult {
        let handle = uuid::Uuid::new_v4().simple().to_string();
        self.parked.lock().insert(
            handle.clone(),
            Parked {
                tool: tool.to_owned(),
                run,
                answer: ask.answer,
            },
        );
        // A client that never retries: the ask is denied, and the call ends with that result.
        let rounds = Arc::downgrade(self);
        let expired = handle.clone();
        let ttl = self.ttl;
        tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            let parked = rounds
                .upgrade()
                .and_then(|r| r.parked.lock().remove(&expired));
            if let Some(parked) = parked {
                tracing::warn!(tool = %parked.tool, "an MCP client did not answer an approval form within {ttl:?}; the call is denied");
                let _ = parked.answer.send(ApprovalOutcome::Unavailable);
            }
        });
        let mut requests = InputRequests::new();
        requests.insert(
            APPROVAL.to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(ask.params)),
        );
        InputRequiredResult::new(Some(requests), Some(handle))
    }

    /// Resumes the call parked under `state` with the client's `responses`, for a retry of
    /// `tool`; refuses an unknown or used handle, or another tool, changing nothing.
    pub(super) fn resume(
        &self,
        state: &str,
        tool: &str,
        responses: Option<&InputResponses>,
    ) -> Result<Run<T>, ErrorData> {
        let mut parked = self.parked.lock();
        match parked.get(state) {
            None => {
                return Err(ErrorData::invalid_params(
                    "requestState names no call waiting for an answer (unknown, already answered, or expired)",
                    None,
                ));
            }
            Some(p) if p.tool != tool => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "requestState belongs to a call of `{}`, not of `{tool}`",
                        p.tool
                    ),
                    None,
                ));
            }
            Some(_) => {}
        }
        let Some(p) = parked.remove(state) else {
            return Err(ErrorData::internal_error("the parked call vanished", None));
        };
        let answer = responses.and_then(|r| r.get(APPROVAL));
        let _ = p.answer.send(outcome_of(answer));
        Ok(p.run)
    }
}

/// What a client's answer to the approval form means: only `accept` with `allow: true`
/// allows the call, once; anything else (decline, cancel, no answer, another shape) denies it.
pub(super) fn outcome_of(answer: Option<&Value>) -> ApprovalOutcome {
    let Some(result) = answer.and_then(|a| serde_json::from_value::<ElicitResult>(a.clone()).ok())
    else {
        return ApprovalOutcome::Rejected;
    };
    allows(&result)
}

/// Whether an elicitation result allows the call (see [`outcome_of`]).
pub(super) fn allows(result: &ElicitResult) -> ApprovalOutcome {
    match result {
        ElicitResult {
            action: ElicitationAction::Accept,
            content,
            ..
        } if content.as_ref().and_then(|c| c.get("allow")) == Some(&Value::Bool(true)) => {
            ApprovalOutcome::AllowedOnce
        }
        _ => ApprovalOutcome::Rejected,
    }
}
