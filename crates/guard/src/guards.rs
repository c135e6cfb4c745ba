//! Deny-only guards (spec P3) with live evaluation: a guard registered during a pass is seen in
//! that same pass, unless its layer was emptied in between, which starts a new generation of the
//! layer and ends the pass over it (GRD-08, GRD-09 pin this upstream behaviour).

use std::collections::HashMap;
use std::sync::Arc;

use dsh_core::{AgentId, Guard, ToolExecution};
use parking_lot::Mutex;

use crate::scope::Scope;

#[derive(Default)]
struct Layer {
    guards: Vec<(u64, Arc<dyn Guard>)>,
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
}

impl GuardTable {
    pub(crate) fn insert(&self, id: u64, scope: Scope, guard: Arc<dyn Guard>) {
        let mut t = self.table.lock();
        t.owner.insert(id, scope.clone());
        let layer = match scope {
            Scope::Global => &mut t.global,
            Scope::Agent(a) => t.scoped.entry(a).or_default(),
        };
        layer.guards.push((id, guard));
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
            layer.guards.retain(|(gid, _)| *gid != id);
            if layer.guards.is_empty() {
                layer.epoch += 1;
            }
        }
    }

    /// The next guard of a layer after `after`, if the layer is still in `epoch`.
    fn next(
        &self,
        scope: &Scope,
        epoch: Option<u64>,
        after: u64,
    ) -> Option<(u64, u64, Arc<dyn Guard>)> {
        let t = self.table.lock();
        let layer = match scope {
            Scope::Global => Some(&t.global),
            Scope::Agent(a) => t.scoped.get(a),
        }?;
        if epoch.is_some_and(|e| e != layer.epoch) {
            return None;
        }
        layer
            .guards
            .iter()
            .find(|(id, _)| *id > after)
            .map(|(id, g)| (layer.epoch, *id, g.clone()))
    }

    pub(crate) fn evaluate(&self, exec: &ToolExecution, chain: &[AgentId]) -> Option<String> {
        let layers = std::iter::once(Scope::Global)
            .chain(chain.iter().rev().map(|a| Scope::Agent(a.clone())));
        for scope in layers {
            let mut epoch = None;
            let mut after = 0;
            while let Some((e, id, guard)) = self.next(&scope, epoch, after) {
                epoch = Some(e);
                after = id;
                let verdict = dsh_core::contained::call(|| guard.check(exec));
                match verdict {
                    Ok(None) => {}
                    Ok(Some(reason)) => return Some(reason),
                    Err(p) => {
                        return Some(
                            dsh_core::Failure::from_panic("guard", &*p)
                                .message()
                                .to_owned(),
                        );
                    }
                }
            }
        }
        None
    }
}
