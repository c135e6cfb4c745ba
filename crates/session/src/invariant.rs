//! Append-time invariant checks (the reference harness's debug assertions): the approval audit
//! trail (conformance APR-41..46) and Code Mode dispatch records (LOG-21..27).
//!
//! Guarantees: [`InvariantChecker::check`] never changes state, so a rejected event leaves no
//! trace (it is not indexed and not appended); each check is O(1).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::deep;
use crate::error::InvariantViolation;
use crate::event::{Event, types};

/// The approval outcomes an `approval/decided` may carry.
pub const APPROVAL_OUTCOMES: [&str; 4] = ["allowed-once", "rejected", "cancelled", "unavailable"];

/// The approval policies an `approval/policy` may carry.
pub const APPROVAL_POLICIES: [&str; 2] = ["ask", "never"];

/// Folds a session's events and rejects those that break the audit and dispatch invariants.
///
/// Feed it every event of a session in order ([`InvariantChecker::observe`]); it can also be fed
/// events of a session no store knows (the reference's bare publication, APR-43 / LOG-25).
#[derive(Clone, Debug, Default)]
pub struct InvariantChecker {
    open_turn: bool,
    /// Open approval questions, keyed by the id's JSON text.
    pending_approvals: HashSet<String>,
    /// subCallId -> rootCallId of every accepted dispatch record.
    dispatch_roots: HashMap<String, String>,
}

fn fail(message: String) -> Result<(), InvariantViolation> {
    Err(InvariantViolation(message))
}

fn id_text(data: &Value) -> String {
    json_text(data.get("id"))
}

/// A value as JSON text (as the reference's `JSON.stringify`), `undefined` when absent.
fn json_text(value: Option<&Value>) -> String {
    value
        .map(deep::to_text)
        .unwrap_or_else(|| "undefined".to_owned())
}

impl InvariantChecker {
    /// A checker for a session with no events.
    pub fn new() -> InvariantChecker {
        InvariantChecker::default()
    }

    /// A checker registered late: replays `events` (validating each, APR-42 / APR-45 / LOG-26 /
    /// LOG-27) and fails on the first one that breaks an invariant.
    pub fn seeded<'a>(
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Result<InvariantChecker, InvariantViolation> {
        let mut checker = InvariantChecker::new();
        for event in events {
            checker.observe(event)?;
        }
        Ok(checker)
    }

    /// Validates `event` against the state so far without recording it.
    pub fn check(&self, event: &Event) -> Result<(), InvariantViolation> {
        if !reads_data(event.event_type()) {
            return Ok(());
        }
        let data = event.data().value();
        match event.event_type() {
            types::APPROVAL_ASKED => {
                if !self.open_turn {
                    return fail("approval/asked appended outside any open turn".to_owned());
                }
                if data
                    .get("toolName")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    return fail("approval/asked toolName must be non-empty".to_owned());
                }
                let id = id_text(data);
                if self.pending_approvals.contains(&id) {
                    return fail(format!("approval/asked repeated open id {id}"));
                }
                Ok(())
            }
            types::APPROVAL_DECIDED => {
                if !self.open_turn {
                    return fail("approval/decided appended outside any open turn".to_owned());
                }
                let id = id_text(data);
                if !self.pending_approvals.contains(&id) {
                    return fail(format!(
                        "approval/decided has no matching approval/asked for id {id}"
                    ));
                }
                let outcome = data.get("outcome");
                if !outcome
                    .and_then(Value::as_str)
                    .is_some_and(|o| APPROVAL_OUTCOMES.contains(&o))
                {
                    return fail(format!(
                        "approval/decided carries unknown outcome {}",
                        json_text(outcome)
                    ));
                }
                Ok(())
            }
            types::APPROVAL_POLICY => {
                let policy = data.get("policy");
                if !policy
                    .and_then(Value::as_str)
                    .is_some_and(|p| APPROVAL_POLICIES.contains(&p))
                {
                    return fail(format!(
                        "approval/policy carries unknown policy {}",
                        json_text(policy)
                    ));
                }
                Ok(())
            }
            t @ (types::CODE_DISPATCH_START | types::CODE_DISPATCH) => {
                if !self.open_turn {
                    return fail(format!("{t} appended outside any open turn"));
                }
                let field = |k: &str| data.get(k).and_then(Value::as_str).unwrap_or_default();
                let (root, parent, child) = (
                    field("rootCallId"),
                    field("parentCallId"),
                    field("subCallId"),
                );
                if root.is_empty() || parent.is_empty() || child.is_empty() {
                    return fail(format!(
                        "{t} must carry non-empty rootCallId, parentCallId, and subCallId"
                    ));
                }
                if self
                    .dispatch_roots
                    .get(child)
                    .is_some_and(|known| known != root)
                {
                    return fail(format!("{t} changed rootCallId for subCallId {child}"));
                }
                if parent != root
                    && self.dispatch_roots.get(parent).map(String::as_str) != Some(root)
                {
                    return fail(format!(
                        "{t} parentCallId {parent} does not belong to rootCallId {root}"
                    ));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Records an event that passed [`InvariantChecker::check`].
    pub fn commit(&mut self, event: &Event) {
        match event.event_type() {
            types::TURN_START => self.open_turn = true,
            types::TURN_END => self.open_turn = false,
            _ => {}
        }
        if !reads_data(event.event_type()) {
            return;
        }
        let data = event.data().value();
        match event.event_type() {
            types::APPROVAL_ASKED => {
                self.pending_approvals.insert(id_text(data));
            }
            types::APPROVAL_DECIDED => {
                self.pending_approvals.remove(&id_text(data));
            }
            types::CODE_DISPATCH_START | types::CODE_DISPATCH => {
                let field = |k: &str| {
                    data.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                self.dispatch_roots
                    .insert(field("subCallId"), field("rootCallId"));
            }
            _ => {}
        }
    }

    /// Checks then records `event`; a rejected event changes nothing.
    pub fn observe(&mut self, event: &Event) -> Result<(), InvariantViolation> {
        self.check(event)?;
        self.commit(event);
        Ok(())
    }
}

/// Whether the checks look inside events of this type (the others never build their data).
fn reads_data(event_type: &str) -> bool {
    matches!(
        event_type,
        types::APPROVAL_ASKED
            | types::APPROVAL_DECIDED
            | types::APPROVAL_POLICY
            | types::CODE_DISPATCH_START
            | types::CODE_DISPATCH
    )
}
