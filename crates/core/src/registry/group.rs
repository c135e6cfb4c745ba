//! Tool groups: global tools owned by one source (an MCP server) and replaced as a whole when
//! the source's list changes, and the holds that keep the registry steady while a step runs.
//!
//! Guarantees: a replacement is one write (every reader sees the group's old tools or its new
//! ones, never a mix); while any [`RegistryHold`] lives a replacement waits, and the last hold
//! dropped applies the waiting ones in order (the latest per group wins), so a step that holds
//! the registry offers and resolves one list from its start to its end.

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::{Arc, Weak};

use super::{Entry, RUN_CODE, Shared, State, ToolRegistry};
use crate::error::CoreError;
use crate::tool::ToolDefinition;

/// The groups' bookkeeping, inside the registry's state.
#[derive(Default)]
pub(super) struct Groups {
    /// Each group's tools now registered: name and entry id.
    members: HashMap<Arc<str>, Vec<(Arc<str>, u64)>>,
    /// Replacements waiting for the holds to end, in arrival order (one per group).
    pending: Vec<(Arc<str>, Vec<Arc<ToolDefinition>>)>,
    /// Live holds.
    holds: usize,
}

/// Keeps the registry's tool groups as they are until dropped (see
/// [`ToolRegistry::hold`]).
#[must_use = "the hold ends when dropped"]
pub struct RegistryHold {
    shared: Weak<Shared>,
}

impl std::fmt::Debug for RegistryHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RegistryHold")
    }
}

impl Drop for RegistryHold {
    fn drop(&mut self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let mut st = shared.write();
        st.groups.holds = st.groups.holds.saturating_sub(1);
        if st.groups.holds == 0 {
            for (group, defs) in std::mem::take(&mut st.groups.pending) {
                apply(&mut st, group, defs);
            }
        }
    }
}

impl ToolRegistry {
    /// Holds the tool groups steady: a [`ToolRegistry::replace_group`] made meanwhile waits
    /// until every hold has ended. The step driver holds the registry for each step, so a
    /// step's model request and its calls see one tool list. Holds nest and overlap freely;
    /// nothing waits on them (a replacement is deferred, never blocked on).
    pub fn hold(&self) -> RegistryHold {
        self.shared.write().groups.holds += 1;
        RegistryHold {
            shared: Arc::downgrade(&self.shared),
        }
    }

    /// Makes `defs` the global tools of `group` (a source such as an MCP server), removing
    /// those the group had: at once when nothing holds the registry, else when the last
    /// [`RegistryHold`] ends (a later replacement of the same group supersedes a waiting
    /// one). Returns whether it applied at once.
    ///
    /// Refused, changing nothing: an empty or reserved name, a name twice in `defs`, or a
    /// name of a global tool outside the group. A tool registered under one of the names
    /// while the replacement waited keeps its name; the group's tool of that name is left out.
    ///
    /// ```
    /// # use dsh_core::{ToolDefinition, ToolOutput, ToolRegistry, Json};
    /// let tool = |name: &str| {
    ///     ToolDefinition::builder(name, "A tool.")
    ///         .output(ToolOutput::string())
    ///         .execute(|_ctx| async { Ok(Json::string("ok")) })
    ///         .build()
    /// };
    /// let registry = ToolRegistry::new();
    /// registry.replace_group("server", vec![tool("a")?, tool("b")?])?;
    /// let step = registry.hold();
    /// assert!(!registry.replace_group("server", vec![tool("c")?])?, "waits for the step");
    /// assert_eq!(registry.names(None), ["a", "b"]);
    /// drop(step);
    /// assert_eq!(registry.names(None), ["c"]);
    /// # Ok::<(), dsh_core::CoreError>(())
    /// ```
    pub fn replace_group(&self, group: &str, defs: Vec<ToolDefinition>) -> Result<bool, CoreError> {
        let mut st = self.shared.write();
        let own: HashSet<&str> = st
            .groups
            .members
            .get(group)
            .map(|m| m.iter().map(|(n, _)| &**n).collect())
            .unwrap_or_default();
        let mut names = HashSet::new();
        for def in &defs {
            let name = def.name();
            if name.is_empty() {
                return Err(CoreError::EmptyName);
            }
            if name == RUN_CODE {
                return Err(CoreError::Reserved(RUN_CODE.into()));
            }
            if !names.insert(name) || (st.global.tools.contains_key(name) && !own.contains(name)) {
                return Err(CoreError::AlreadyRegistered(name.to_owned()));
            }
        }
        let group: Arc<str> = Arc::from(group);
        let defs: Vec<Arc<ToolDefinition>> = defs.into_iter().map(Arc::new).collect();
        if st.groups.holds > 0 {
            st.groups.pending.retain(|(g, _)| *g != group);
            st.groups.pending.push((group, defs));
            return Ok(false);
        }
        apply(&mut st, group, defs);
        Ok(true)
    }
}

/// Swaps `group`'s tools for `defs`, in one write.
fn apply(st: &mut State, group: Arc<str>, defs: Vec<Arc<ToolDefinition>>) {
    st.generation += 1;
    for (name, id) in st.groups.members.remove(&group).unwrap_or_default() {
        if st.global.tools.get(&name).is_some_and(|e| e.id == id) {
            st.global.tools.remove(&name);
        }
    }
    let mut members = Vec::with_capacity(defs.len());
    for def in defs {
        let name: Arc<str> = Arc::from(def.name());
        if st.global.tools.contains_key(&name) {
            continue;
        }
        let id = st.fresh_id();
        st.global.tools.insert(name.clone(), Entry { id, def });
        members.push((name, id));
    }
    st.groups.members.insert(group, members);
}

#[cfg(test)]
mod tests {
    use crate::{Json, ToolDefinition, ToolOutput, ToolRegistry};

    fn tool(name: &str) -> ToolDefinition {
        described(name, "A tool.")
    }

    fn described(name: &str, description: &str) -> ToolDefinition {
        ToolDefinition::builder(name, description)
            .output(ToolOutput::string())
            .execute(|_ctx| async { Ok(Json::string("ok")) })
            .build()
            .unwrap()
    }

    #[test]
    fn holds_nest_and_the_last_one_applies_the_latest_replacement_of_each_group() {
        let registry = ToolRegistry::new();
        registry.add(tool("own")).unwrap();
        registry.replace_group("s", vec![tool("a")]).unwrap();
        let outer = registry.hold();
        let inner = registry.hold();
        let before = registry.generation();
        assert!(!registry.replace_group("s", vec![tool("b")]).unwrap());
        assert!(!registry.replace_group("s", vec![tool("c")]).unwrap());
        drop(inner);
        assert_eq!(registry.names(None), ["own", "a"], "one hold still lives");
        assert_eq!(
            registry.generation(),
            before,
            "nothing changed under the hold"
        );
        drop(outer);
        assert_eq!(registry.names(None), ["own", "c"], "the latest wins");
    }

    #[test]
    fn a_name_taken_outside_the_group_is_refused_and_changes_nothing() {
        let registry = ToolRegistry::new();
        registry.add(tool("own")).unwrap();
        registry.replace_group("s", vec![tool("a")]).unwrap();
        let refused = registry.replace_group("s", vec![tool("b"), tool("own")]);
        assert!(refused.is_err(), "{refused:?}");
        let twice = registry.replace_group("s", vec![tool("b"), tool("b")]);
        assert!(twice.is_err(), "{twice:?}");
        assert_eq!(registry.names(None), ["own", "a"]);
        // The group's own names are its to keep.
        registry
            .replace_group("s", vec![tool("a"), tool("b")])
            .unwrap();
        assert_eq!(registry.names(None), ["own", "a", "b"]);
    }

    #[test]
    fn a_tool_registered_while_a_replacement_waited_keeps_its_name() {
        let registry = ToolRegistry::new();
        let step = registry.hold();
        registry
            .replace_group("s", vec![tool("x"), tool("y")])
            .unwrap();
        registry.add(described("x", "Not the group's.")).unwrap();
        drop(step);
        assert_eq!(registry.names(None), ["x", "y"]);
        let x = registry.get("x", None).unwrap();
        assert_eq!(x.description(), "Not the group's.");
    }
}
