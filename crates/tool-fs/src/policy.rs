//! The read-before-write observation policy (spec FS2): it answers `fs/write-intent` and
//! `fs/edit-intent` from what the asking SESSION has observed, keyed by session id and resolved
//! path (never by a memory address), and records observations from `fs/observed`.
//!
//! Unseen or known-absent file: a write may only create. Seen file: a write or edit may only
//! replace the version seen. An edit of an unseen file is `FS_NOT_OBSERVED`, of a known-absent one
//! `FS_NOT_FOUND`. The policy always decides (it never delegates), so it is meant to be the only
//! decider; state lives in the listeners and is released when the policy is unloaded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_core::Failure;
use dsh_guard::WaterfallHandle;
use parking_lot::RwLock;

use crate::codes::{FS_NOT_FOUND, FS_NOT_OBSERVED};
use crate::intent::{
    EditDecision, FsHooks, IntentQuery, Observation, ObservedHandle, WriteDecision,
};
use crate::seam::{EditCondition, WriteCondition};

#[derive(Default)]
struct State {
    sessions: RwLock<HashMap<Arc<str>, HashMap<PathBuf, Observation>>>,
}

impl State {
    fn get(&self, owner: &str, path: &Path) -> Option<Observation> {
        self.sessions.read().get(owner)?.get(path).copied()
    }
    fn record(&self, owner: &str, path: &Path, obs: Observation) {
        let mut g = self.sessions.write();
        match g.get_mut(owner) {
            Some(m) => {
                m.insert(path.to_path_buf(), obs);
            }
            None => {
                g.insert(Arc::from(owner), HashMap::from([(path.to_path_buf(), obs)]));
            }
        }
    }
}

/// The mounted policy: its three listeners and its state. Unloading (or dropping) it removes the
/// listeners and releases every observation.
#[must_use = "dropping the policy unloads it; call `keep()` to keep it for the hooks' lifetime"]
pub struct ObservationPolicy {
    state: Arc<State>,
    write: Option<WaterfallHandle>,
    edit: Option<WaterfallHandle>,
    observed: Option<ObservedHandle>,
}

fn decide_write(state: &State, q: &IntentQuery) -> WriteDecision {
    let Some(owner) = &q.owner else {
        return Ok(WriteCondition::CreateIfAbsent);
    };
    Ok(match state.get(owner, &q.path) {
        Some(Observation::Present(v)) => WriteCondition::ReplaceIfVersion(v),
        Some(Observation::Absent) | None => WriteCondition::CreateIfAbsent,
    })
}

fn decide_edit(state: &State, q: &IntentQuery) -> EditDecision {
    let shown = q.path.display();
    let seen = q.owner.as_deref().and_then(|o| state.get(o, &q.path));
    match seen {
        Some(Observation::Present(v)) => Ok(EditCondition::IfVersion(v)),
        Some(Observation::Absent) => Err(Failure::fs(
            FS_NOT_FOUND,
            format!("cannot edit \"{shown}\": not found"),
        )),
        None => Err(Failure::fs(
            FS_NOT_OBSERVED,
            format!("edit requires reading \"{shown}\" first"),
        )),
    }
}

impl ObservationPolicy {
    /// Mounts the policy on `hooks`: one listener on each of `fs/write-intent`, `fs/edit-intent`
    /// and `fs/observed`. It exposes no service beyond this handle.
    pub fn mount(hooks: &FsHooks) -> ObservationPolicy {
        let state = Arc::new(State::default());
        let s = state.clone();
        let write = hooks.write_intent().on(move |q, _next| decide_write(&s, q));
        let s = state.clone();
        let edit = hooks.edit_intent().on(move |q, _next| decide_edit(&s, q));
        let s = state.clone();
        let observed = hooks.observed().on(move |e| {
            if let Some(owner) = &e.owner {
                s.record(owner, &e.path, e.observation);
            }
            Ok(())
        });
        ObservationPolicy {
            state,
            write: Some(write),
            edit: Some(edit),
            observed: Some(observed),
        }
    }

    /// Records what `session` observed of `path` (a resolved absolute path).
    pub fn record(&self, session: &str, path: &Path, observation: Observation) {
        self.state.record(session, path, observation);
    }

    /// Rebuilds a resumed session's observations from its tool results' `meta`, in log order
    /// (spec FS3): the host passes the metas, this crate reads what they recorded.
    pub fn replay<'a>(
        &self,
        session: &str,
        metas: impl IntoIterator<Item = &'a serde_json::Value>,
    ) {
        self.restore(
            session,
            metas
                .into_iter()
                .filter_map(crate::replay::observation_from_meta),
        );
    }

    /// Rebuilds a resumed session's observations, in log order (a later pair for the same path
    /// replaces an earlier one). The caller reconstructs the pairs from the tool results' meta
    /// with [`crate::observation_from_meta`].
    pub fn restore(
        &self,
        session: &str,
        observations: impl IntoIterator<Item = (PathBuf, Observation)>,
    ) {
        for (path, obs) in observations {
            self.state.record(session, &path, obs);
        }
    }

    /// What `session` has observed of `path`.
    pub fn observation(&self, session: &str, path: &Path) -> Option<Observation> {
        self.state.get(session, path)
    }

    /// Forgets everything `session` observed (when the session ends).
    pub fn forget_session(&self, session: &str) {
        self.state.sessions.write().remove(session);
    }

    /// Removes the listeners and releases the state.
    pub fn unload(self) {
        drop(self);
    }

    /// Keeps the policy mounted for the lifetime of the hooks (its state stays reachable only
    /// through the listeners).
    pub fn keep(mut self) {
        for h in [self.write.take(), self.edit.take()].into_iter().flatten() {
            h.keep();
        }
        if let Some(h) = self.observed.take() {
            h.keep();
        }
    }
}
