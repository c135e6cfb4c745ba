//! Deny-only guards (spec P3) with live evaluation: a guard registered during a pass is seen in
//! that same pass, unless its layer was emptied in between, which starts a new generation of the
//! layer and ends the pass over it (GRD-08, GRD-09 pin this upstream behaviour).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_core::{AgentId, Guard, ToolExecution};
use parking_lot::Mutex;

use crate::scope::Scope;

#[derive(Default)]
struct Layer {
    /// The layer's guards in registration order, replaced whole on a change (copy on write), so
    /// that a pass holds the list it reads without the lock.
    guards: Arc<[(u64, Arc<dyn Guard>)]>,
    epoch: u64,
}

#[derive(Default)]
struct Table {
    global: Layer,
    scoped: HashMap<AgentId, Layer>,
    owner: HashMap<u64, Scope>,
}

/// All guards of a hook set.
#[derive(Default)]
pub(crate) struct GuardTable {
    table: Mutex<Table>,
    /// Moved on, under the lock, by every registration and removal: a pass that finds it where
    /// it was when it took a layer's list knows that list is still the layer's.
    version: AtomicU64,
}

/// A layer's guards as a pass holds them: the list, the layer's epoch, and the table's version
/// when the list was taken.
type Held = (Arc<[(u64, Arc<dyn Guard>)]>, u64, u64);

impl GuardTable {
    pub(crate) fn insert(&self, id: u64, scope: Scope, guard: Arc<dyn Guard>) {
        let mut t = self.table.lock();
        t.owner.insert(id, scope.clone());
        let layer = match scope {
            Scope::Global => &mut t.global,
            Scope::Agent(a) => t.scoped.entry(a).or_default(),
        };
        let mut guards = layer.guards.to_vec();
        guards.push((id, guard));
        layer.guards = guards.into();
        self.moved_on();
    }

    pub(crate) fn remove(&self, id: u64) {
        let mut t = self.table.lock();
        let Some(scope) = t.owner.remove(&id) else {
            return;
        };
        let layer = match &scope {
            Scope::Global => Some(&mut t.global),
            Scope::Agent(a) => t.scoped.get_mut(a),
        };
        if let Some(layer) = layer {
            let kept: Vec<_> = layer
                .guards
                .iter()
                .filter(|(gid, _)| *gid != id)
                .cloned()
                .collect();
            layer.guards = kept.into();
            if layer.guards.is_empty() {
                layer.epoch += 1;
            }
        }
        self.moved_on();
    }

    /// Called with the table locked.
    fn moved_on(&self) {
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v + 1, Ordering::Release);
    }

    /// A layer's guards, if the layer exists and (when `epoch` is given) is still in it.
    fn hold(&self, scope: &Scope, epoch: Option<u64>) -> Option<Held> {
        let t = self.table.lock();
        let layer = match scope {
            Scope::Global => Some(&t.global),
            Scope::Agent(a) => t.scoped.get(a),
        }?;
        if epoch.is_some_and(|e| e != layer.epoch) {
            return None;
        }
        Some((
            layer.guards.clone(),
            layer.epoch,
            self.version.load(Ordering::Relaxed),
        ))
    }

    /// Runs the guards for an allowed call (spec P3): global first, then the agent's scope chain
    /// from farthest to nearest, registration order within a layer; the first reason wins. A
    /// guard registered while the pass runs is seen by it unless its layer was emptied in
    /// between (GRD-08, GRD-09): the pass takes the layer's list again whenever the table
    /// changed.
    pub(crate) fn evaluate(&self, exec: &ToolExecution, chain: &[AgentId]) -> Option<String> {
        let layers = std::iter::once(Scope::Global)
            .chain(chain.iter().rev().map(|a| Scope::Agent(a.clone())));
        for scope in layers {
            let Some((mut guards, epoch, mut version)) = self.hold(&scope, None) else {
                continue;
            };
            let mut after = 0;
            loop {
                let verdict = match guards.iter().find(|(id, _)| *id > after) {
                    Some((id, guard)) => {
                        after = *id;
                        Some(dsh_core::contained::call(|| guard.check(exec)))
                    }
                    None => None,
                };
                match verdict {
                    Some(Ok(None)) => {}
                    Some(Ok(Some(reason))) => return Some(reason),
                    Some(Err(p)) => {
                        return Some(
                            dsh_core::Failure::from_panic("guard", &*p)
                                .message()
                                .to_owned(),
                        );
                    }
                    None if self.version.load(Ordering::Acquire) == version => break,
                    None => {}
                }
                if self.version.load(Ordering::Acquire) != version {
                    match self.hold(&scope, Some(epoch)) {
                        Some((held, _, v)) => (guards, version) = (held, v),
                        None => break,
                    }
                }
            }
        }
        None
    }
}
