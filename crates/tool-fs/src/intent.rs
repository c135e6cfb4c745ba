//! The filesystem hook points (spec FS1): `fs/write-intent` and `fs/edit-intent`, single-decision
//! waterfalls raised by every mutation before it touches disk, and `fs/observed`, the notice a
//! tool gives after it has seen a file's state (a read, or its own write or edit).
//!
//! Defaults when no listener decides: a write is `Ok(WriteCondition::Unconditional)`, an edit is
//! `Ok(EditCondition::Unconditional)`. The first listener that answers owns the decision; a
//! listener that panics refuses the mutation (fail-closed), it is never skipped.

use std::path::PathBuf;
use std::sync::{Arc, Weak};

use dsh_core::Failure;
use dsh_guard::Waterfall;
use parking_lot::RwLock;

use crate::seam::{EditCondition, WriteCondition};
use crate::version::FileVersion;

/// What a mutation announces: who asks, and for which file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntentQuery {
    /// The session on whose behalf the call runs; `None` when the call has no owner (no agent,
    /// or an agent with no session).
    pub owner: Option<Arc<str>>,
    /// The resolved absolute path.
    pub path: PathBuf,
}

/// The answer to `fs/write-intent`: the condition to write under, or why the write may not run.
pub type WriteDecision = Result<WriteCondition, Failure>;

/// The answer to `fs/edit-intent`: the compare-and-set basis, or why the edit may not run.
pub type EditDecision = Result<EditCondition, Failure>;

/// What a session has seen of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observation {
    /// The file existed with this version.
    Present(FileVersion),
    /// There was no file.
    Absent,
}

/// The `fs/observed` notice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedEvent {
    /// The session that saw it (`None`: nothing is recorded).
    pub owner: Option<Arc<str>>,
    /// The resolved absolute path.
    pub path: PathBuf,
    /// What was seen.
    pub observation: Observation,
}

type ObservedFn = Arc<dyn Fn(&ObservedEvent) -> Result<(), Failure> + Send + Sync>;
/// The listeners in order, each with its id, and the last id handed out.
type ObservedTable = (u64, Arc<[(u64, ObservedFn)]>);

#[derive(Default)]
struct ObservedInner {
    listeners: RwLock<ObservedTable>,
}

/// The `fs/observed` listeners, in registration order.
#[derive(Clone, Default)]
pub struct ObservedListeners {
    inner: Arc<ObservedInner>,
}

/// Removes its `fs/observed` listener when disposed or dropped.
#[must_use = "dropping the handle removes the listener; call `keep()` to keep it"]
pub struct ObservedHandle {
    inner: Weak<ObservedInner>,
    id: u64,
    armed: bool,
}

impl ObservedHandle {
    /// Removes the listener now.
    pub fn dispose(mut self) {
        self.remove();
    }
    /// Keeps the listener for the lifetime of the hooks.
    pub fn keep(mut self) {
        self.armed = false;
    }
    fn remove(&mut self) {
        if !std::mem::take(&mut self.armed) {
            return;
        }
        if let Some(inner) = self.inner.upgrade() {
            let mut g = inner.listeners.write();
            let rest: Vec<(u64, ObservedFn)> =
                g.1.iter().filter(|(i, _)| *i != self.id).cloned().collect();
            g.1 = Arc::from(rest);
        }
    }
}

impl Drop for ObservedHandle {
    fn drop(&mut self) {
        self.remove();
    }
}

impl ObservedListeners {
    /// Adds a listener; an `Err` it returns makes the notifying tool call fail (what was written
    /// stays written).
    pub fn on(
        &self,
        f: impl Fn(&ObservedEvent) -> Result<(), Failure> + Send + Sync + 'static,
    ) -> ObservedHandle {
        let mut g = self.inner.listeners.write();
        g.0 += 1;
        let id = g.0;
        let mut v: Vec<(u64, ObservedFn)> = g.1.to_vec();
        v.push((id, Arc::new(f)));
        g.1 = Arc::from(v);
        ObservedHandle {
            inner: Arc::downgrade(&self.inner),
            id,
            armed: true,
        }
    }

    /// Notifies every listener (each runs even if an earlier one failed; a panic is a failure);
    /// returns the first failure.
    pub fn emit(&self, event: &ObservedEvent) -> Result<(), Failure> {
        let snapshot = self.inner.listeners.read().1.clone();
        let mut first = None;
        for (_, l) in snapshot.iter() {
            let outcome = dsh_core::contained::call(|| l(event))
                .unwrap_or_else(|p| Err(Failure::from_panic("fs/observed listener", &*p)));
            if let Err(f) = outcome {
                first.get_or_insert(f);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// How many listeners are registered.
    pub fn len(&self) -> usize {
        self.inner.listeners.read().1.len()
    }

    /// Whether none is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The filesystem hook points of one tool set. Cloning gives another handle to the same hooks.
#[derive(Clone, Default)]
pub struct FsHooks {
    write_intent: Waterfall<IntentQuery, WriteDecision>,
    edit_intent: Waterfall<IntentQuery, EditDecision>,
    observed: ObservedListeners,
    read_gate: std::sync::Arc<parking_lot::RwLock<Option<ReadGate>>>,
}

/// Says whether a tool may read this file right now: `Some(reason)` (the rule that refuses it)
/// when reading the file by itself would be refused. The second argument is the subject a
/// person approved for this call, if one did: an `ask` rule lets exactly that subject through
/// (the file the person saw), never another one (a link swapped in since). The host installs it
/// over its permission rules, so a deny on reading a file holds for every tool that reads files
/// (`grep` passes no approved subject: its approval was for a pattern, not a file).
pub type ReadGate = std::sync::Arc<
    dyn Fn(&dsh_core::PermissionSubject, Option<&dsh_core::PermissionSubject>) -> Option<String>
        + Send
        + Sync,
>;

impl FsHooks {
    /// Empty hooks: every write unconditional, every edit unconditional, nothing recorded.
    pub fn new() -> FsHooks {
        FsHooks::default()
    }

    /// `fs/write-intent`.
    pub fn write_intent(&self) -> &Waterfall<IntentQuery, WriteDecision> {
        &self.write_intent
    }

    /// `fs/edit-intent`.
    pub fn edit_intent(&self) -> &Waterfall<IntentQuery, EditDecision> {
        &self.edit_intent
    }

    /// `fs/observed`.
    pub fn observed(&self) -> &ObservedListeners {
        &self.observed
    }

    /// Installs the gate of reads made on a tool's own initiative (see [`ReadGate`]); it
    /// replaces any earlier one.
    pub fn set_read_gate(&self, gate: ReadGate) {
        *self.read_gate.write() = Some(gate);
    }

    /// Why reading this file is refused, if it is (a gate that panics refuses).
    pub fn read_refused(
        &self,
        subject: &dsh_core::PermissionSubject,
        approved: Option<&dsh_core::PermissionSubject>,
    ) -> Option<String> {
        let gate = self.read_gate.read().clone()?;
        dsh_core::contained::call(|| gate(subject, approved))
            .unwrap_or_else(|_| Some("the read gate failed".to_owned()))
    }

    /// Whether a gate is installed.
    pub fn has_read_gate(&self) -> bool {
        self.read_gate.read().is_some()
    }

    /// Asks `fs/write-intent`; `Ok(Unconditional)` when no listener decides, a refusal when a
    /// listener panics.
    pub fn decide_write(&self, q: &IntentQuery) -> WriteDecision {
        self.write_intent
            .decide_or(q, &|_| Ok(WriteCondition::Unconditional), &|q, f| {
                Err(refusal("fs/write-intent", q, &f))
            })
    }

    /// Asks `fs/edit-intent`; `Ok(Unconditional)` when no listener decides, a refusal when a
    /// listener panics.
    pub fn decide_edit(&self, q: &IntentQuery) -> EditDecision {
        self.edit_intent
            .decide_or(q, &|_| Ok(EditCondition::Unconditional), &|q, f| {
                Err(refusal("fs/edit-intent", q, &f))
            })
    }
}

fn refusal(point: &str, q: &IntentQuery, f: &Failure) -> Failure {
    Failure::new(format!(
        "{point} for \"{}\" failed, so the change was refused: {}",
        q.path.display(),
        f.message()
    ))
}
