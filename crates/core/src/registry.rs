//! The tool registry: registration with disposal handles, O(1) lookup by name, schema projection
//! (name, description, parameters only), agent scopes with shadowing and allow/deny restrictions,
//! and fail-closed execution-mode classification (conformance REG, SCH-01..09).
//!
//! Visibility: an agent sees its own scope's tools, then its ancestors', then the global ones; the
//! nearest definition shadows the others. A restriction filters tools a scope *inherits* (from
//! ancestors or globals), never the scope's own, and reaches every nested scope. A tool outside
//! the caller's view is indistinguishable from an unknown one.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::RwLock;

use crate::name_hash::BuildNameHasher;
use serde::Serialize;

use crate::error::CoreError;
use crate::execution::{AgentId, Arguments};
use crate::json::Json;
use crate::tool::ToolDefinition;

mod group;
pub use group::RegistryHold;

/// The tool name reserved for Code Mode's presentation transport.
pub const RUN_CODE: &str = "run_code";

/// Scheduling class of one call (spec S2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum ExecutionMode {
    /// May overlap other parallel calls.
    Parallel,
    /// A barrier: runs alone.
    Exclusive,
}

/// What the model is told about a tool: exactly name, description and parameters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSchema {
    /// The name.
    pub name: Arc<str>,
    /// The description.
    pub description: Arc<str>,
    /// The parameter schema.
    pub parameters: Json,
}

/// An allow or deny list for a scope's inherited tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolFilter {
    /// Only these inherited tools stay visible.
    Allow(Vec<String>),
    /// These inherited tools are hidden.
    Deny(Vec<String>),
}

enum Compiled {
    Allow(HashSet<Arc<str>>),
    Deny(HashSet<Arc<str>>),
}

impl Compiled {
    /// Whether the filter lets `name` through. The reserved `run_code` is never filtered
    /// (CODE-09): restrictions cannot name it, and an allow list does not hide it.
    fn admits(&self, name: &str) -> bool {
        if name == RUN_CODE {
            return true;
        }
        match self {
            Compiled::Allow(s) => s.contains(name),
            Compiled::Deny(s) => !s.contains(name),
        }
    }
}

struct Entry {
    id: u64,
    def: Arc<ToolDefinition>,
}

#[derive(Default)]
struct Layer {
    tools: HashMap<Arc<str>, Entry, BuildNameHasher>,
}

#[derive(Default)]
struct ScopeState {
    parent: Option<AgentId>,
    layer: Layer,
    filters: Vec<(u64, Compiled)>,
}

#[derive(Default)]
struct State {
    global: Layer,
    scopes: HashMap<AgentId, ScopeState, BuildNameHasher>,
    next_id: u64,
    generation: u64,
    /// The tool groups (see [`ToolRegistry::replace_group`]) and the holds deferring them.
    groups: group::Groups,
}

impl State {
    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.generation += 1;
        self.next_id
    }

    /// The scope chain of `agent`, nearest first (bounded against cycles).
    fn chain<'s>(&'s self, agent: Option<&'s AgentId>) -> Vec<&'s ScopeState> {
        let mut out: Vec<&'s ScopeState> = Vec::new();
        let mut cur = agent;
        while let Some(a) = cur {
            let Some(s) = self.scopes.get(a) else { break };
            if out.len() >= 64
                || out
                    .iter()
                    .any(|x| std::ptr::eq(*x as *const ScopeState, s as *const ScopeState))
            {
                break;
            }
            out.push(s);
            cur = s.parent.as_ref();
        }
        out
    }

    fn lookup<'s>(
        &'s self,
        name: &str,
        agent: Option<&'s AgentId>,
    ) -> Option<&'s Arc<ToolDefinition>> {
        let chain = self.chain(agent);
        let layers = chain
            .iter()
            .map(|s| &s.layer)
            .chain(std::iter::once(&self.global));
        for (level, layer) in layers.enumerate() {
            if let Some(e) = layer.tools.get(name) {
                let admitted = chain[..level.min(chain.len())]
                    .iter()
                    .all(|s| s.filters.iter().all(|(_, f)| f.admits(name)));
                return admitted.then_some(&e.def);
            }
        }
        None
    }

    fn visible<'s>(&'s self, agent: Option<&'s AgentId>) -> Vec<(u64, &'s Arc<ToolDefinition>)> {
        let chain = self.chain(agent);
        let mut seen: HashSet<&str> = HashSet::new();
        let mut out = Vec::new();
        let layers = chain
            .iter()
            .map(|s| &s.layer)
            .chain(std::iter::once(&self.global));
        for (level, layer) in layers.enumerate() {
            for (name, e) in &layer.tools {
                if !seen.insert(name) {
                    continue;
                }
                let admitted = chain[..level.min(chain.len())]
                    .iter()
                    .all(|s| s.filters.iter().all(|(_, f)| f.admits(name)));
                if admitted {
                    out.push((e.id, &e.def));
                }
            }
        }
        out.sort_by_key(|(id, _)| *id);
        out
    }

    /// Names a scope inherits (ancestors' and globals), for restriction checks.
    fn inherited_names(&self, agent: &AgentId) -> Vec<Arc<str>> {
        let chain = self.chain(Some(agent));
        let mut names: Vec<Arc<str>> = chain
            .iter()
            .skip(1)
            .flat_map(|s| s.layer.tools.keys().cloned())
            .chain(self.global.tools.keys().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

struct Shared {
    state: RwLock<State>,
    /// `state.generation` as of the last write's end, read without the lock (a call asks for
    /// it at dispatch to reuse the definition it resolved).
    generation: AtomicU64,
}

impl Shared {
    /// The state, for writing: the generation it leaves is published when the guard drops.
    fn write(&self) -> StateWrite<'_> {
        StateWrite {
            guard: self.state.write(),
            published: &self.generation,
        }
    }
}

/// The registry's state held for writing; see [`Shared::write`].
struct StateWrite<'a> {
    guard: parking_lot::RwLockWriteGuard<'a, State>,
    published: &'a AtomicU64,
}

impl std::ops::Deref for StateWrite<'_> {
    type Target = State;

    fn deref(&self) -> &State {
        &self.guard
    }
}

impl std::ops::DerefMut for StateWrite<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

impl Drop for StateWrite<'_> {
    fn drop(&mut self) {
        // Published before the lock is let go: a reader that sees the old generation reads as
        // if it came just before this write.
        self.published
            .store(self.guard.generation, Ordering::Release);
    }
}

/// The tool registry. Cloning gives another handle to the same registry.
#[derive(Clone)]
pub struct ToolRegistry {
    shared: Arc<Shared>,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        ToolRegistry::new()
    }
}

#[derive(Clone)]
enum Key {
    Tool {
        scope: Option<AgentId>,
        name: Arc<str>,
        id: u64,
    },
    Scope(AgentId),
    Filter {
        scope: AgentId,
        id: u64,
    },
}

/// Removes what it names when dropped or disposed (a tool, a scope, a restriction).
///
/// Dropping it unregisters at once, and `let _ = registry.register(tool)?` drops it: keep the
/// handle in a variable that lives as long as the tool should, call [`Registration::keep`], or
/// register with [`ToolRegistry::add`], which returns no handle and keeps the tool for the
/// registry's lifetime.
#[must_use = "dropping a Registration unregisters the tool at once (`let _ =` drops it too): bind it to a named variable, call `.keep()`, or use `ToolRegistry::add` for a permanent registration"]
pub struct Registration {
    shared: Weak<Shared>,
    key: Option<Key>,
}

impl Registration {
    /// Removes it now.
    pub fn dispose(mut self) {
        self.remove();
    }
    /// Keeps it registered for the registry's lifetime.
    pub fn keep(mut self) {
        self.key = None;
    }
    fn remove(&mut self) {
        let (Some(shared), Some(key)) = (self.shared.upgrade(), self.key.take()) else {
            return;
        };
        let mut st = shared.write();
        st.generation += 1;
        match key {
            Key::Tool { scope, name, id } => {
                let layer = match &scope {
                    None => Some(&mut st.global),
                    Some(a) => st.scopes.get_mut(a).map(|s| &mut s.layer),
                };
                if let Some(layer) = layer
                    && layer.tools.get(&name).is_some_and(|e| e.id == id)
                {
                    layer.tools.remove(&name);
                }
            }
            Key::Scope(a) => {
                st.scopes.remove(&a);
            }
            Key::Filter { scope, id } => {
                if let Some(s) = st.scopes.get_mut(&scope) {
                    s.filters.retain(|(fid, _)| *fid != id);
                }
            }
        }
    }
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match &self.key {
            None => "kept",
            Some(Key::Tool { .. }) => "tool",
            Some(Key::Scope(_)) => "scope",
            Some(Key::Filter { .. }) => "restriction",
        };
        write!(f, "Registration({what})")
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.remove();
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> ToolRegistry {
        ToolRegistry {
            shared: Arc::new(Shared {
                state: RwLock::new(State::default()),
                generation: AtomicU64::new(0),
            }),
        }
    }

    fn handle(&self, key: Key) -> Registration {
        Registration {
            shared: Arc::downgrade(&self.shared),
            key: Some(key),
        }
    }

    /// A counter that changes whenever tools, scopes or restrictions change.
    pub fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    /// Registers a global tool for the registry's lifetime: the permanent registration, with no
    /// handle to lose. Use [`ToolRegistry::register`] for one that a handle can remove.
    ///
    /// ```
    /// # use dsh_core::{ToolDefinition, ToolOutput, ToolRegistry, Json};
    /// let registry = ToolRegistry::new();
    /// let tool = ToolDefinition::builder("ping", "Answers pong.")
    ///     .output(ToolOutput::string())
    ///     .execute(|_ctx| async { Ok(Json::string("pong")) })
    ///     .build()?;
    /// registry.add(tool)?;
    /// assert!(registry.get("ping", None).is_some());
    /// # Ok::<(), dsh_core::CoreError>(())
    /// ```
    pub fn add(&self, def: ToolDefinition) -> Result<(), CoreError> {
        self.register(def).map(Registration::keep)
    }

    /// Registers a global tool until the returned handle is disposed or dropped (a scoped
    /// registration). Dropping the handle, `let _ =` included, unregisters the tool at once;
    /// [`ToolRegistry::add`] registers for good.
    pub fn register(&self, def: ToolDefinition) -> Result<Registration, CoreError> {
        if def.name() == RUN_CODE {
            return Err(CoreError::Reserved(RUN_CODE.into()));
        }
        self.insert(None, def)
    }

    /// Registers the reserved `run_code` tool (for the Code Mode crate only).
    #[doc(hidden)]
    pub fn register_reserved(&self, def: ToolDefinition) -> Result<Registration, CoreError> {
        self.insert(None, def)
    }

    /// Registers a tool in an agent's scope (creating the scope if needed); it shadows any
    /// inherited tool of the same name for that agent and its descendants.
    pub fn register_scoped(
        &self,
        agent: &AgentId,
        def: ToolDefinition,
    ) -> Result<Registration, CoreError> {
        if def.name() == RUN_CODE {
            return Err(CoreError::Reserved(RUN_CODE.into()));
        }
        self.insert(Some(agent.clone()), def)
    }

    fn insert(
        &self,
        scope: Option<AgentId>,
        def: ToolDefinition,
    ) -> Result<Registration, CoreError> {
        if def.name().is_empty() {
            return Err(CoreError::EmptyName);
        }
        let name: Arc<str> = Arc::from(def.name());
        let mut st = self.shared.write();
        let id = st.fresh_id();
        let layer = match &scope {
            None => &mut st.global,
            Some(a) => &mut st.scopes.entry(a.clone()).or_default().layer,
        };
        if layer.tools.contains_key(&name) {
            return Err(match scope {
                None => CoreError::AlreadyRegistered(name.to_string()),
                Some(_) => CoreError::AlreadyRegisteredInScope(name.to_string()),
            });
        }
        layer.tools.insert(
            name.clone(),
            Entry {
                id,
                def: Arc::new(def),
            },
        );
        drop(st);
        Ok(self.handle(Key::Tool { scope, name, id }))
    }

    /// Declares an agent's scope with an optional parent scope; disposing the handle removes the
    /// scope with its tools and restrictions.
    pub fn declare_scope(&self, agent: &AgentId, parent: Option<&AgentId>) -> Registration {
        let mut st = self.shared.write();
        st.generation += 1;
        st.scopes.entry(agent.clone()).or_default().parent = parent.cloned();
        drop(st);
        self.handle(Key::Scope(agent.clone()))
    }

    /// Restricts the tools an agent's scope inherits. Filters combine by intersection and are
    /// lifted independently by disposing their handles.
    pub fn restrict(
        &self,
        agent: Option<&AgentId>,
        filter: ToolFilter,
    ) -> Result<Registration, CoreError> {
        let agent = agent.ok_or(CoreError::RestrictNeedsScope)?;
        let names = match &filter {
            ToolFilter::Allow(n) | ToolFilter::Deny(n) => n,
        };
        if names.is_empty() {
            return Err(CoreError::RestrictNoOp);
        }
        if names.iter().any(|n| n == RUN_CODE) {
            return Err(CoreError::RestrictReserved(RUN_CODE.into()));
        }
        let mut st = self.shared.write();
        let known = st.inherited_names(agent);
        let unknown: Vec<&String> = names
            .iter()
            .filter(|n| !known.iter().any(|k| &**k == n.as_str()))
            .collect();
        if !unknown.is_empty() {
            let quoted: Vec<String> = unknown.iter().map(|n| format!("\"{n}\"")).collect();
            let known_list = if known.is_empty() {
                "(none)".to_owned()
            } else {
                known
                    .iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let noun = if unknown.len() == 1 { "tool" } else { "tools" };
            return Err(CoreError::RestrictUnknown(format!(
                "unknown global {noun} {}; known global tools: {known_list}",
                quoted.join(", ")
            )));
        }
        let set: HashSet<Arc<str>> = names.iter().map(|n| Arc::from(n.as_str())).collect();
        let compiled = match filter {
            ToolFilter::Allow(_) => Compiled::Allow(set),
            ToolFilter::Deny(_) => Compiled::Deny(set),
        };
        let id = st.fresh_id();
        st.scopes
            .entry(agent.clone())
            .or_default()
            .filters
            .push((id, compiled));
        drop(st);
        Ok(self.handle(Key::Filter {
            scope: agent.clone(),
            id,
        }))
    }

    /// The scope chain of `agent`, nearest first: the agent, its parent scope, and so on. An
    /// agent without a declared scope is a chain of itself alone; no agent is an empty chain.
    pub fn scope_chain(&self, agent: Option<&AgentId>) -> Vec<AgentId> {
        if agent.is_none() {
            return Vec::new();
        }
        let st = self.shared.state.read();
        let mut out: Vec<AgentId> = Vec::new();
        let mut cur = agent.cloned();
        while let Some(a) = cur {
            if out.len() >= 64 || out.contains(&a) {
                break;
            }
            cur = st.scopes.get(&a).and_then(|s| s.parent.clone());
            out.push(a);
        }
        out
    }

    /// The definition `name` resolves to for `agent` (or the global view for `None`).
    pub fn get(&self, name: &str, agent: Option<&AgentId>) -> Option<Arc<ToolDefinition>> {
        self.shared.state.read().lookup(name, agent).cloned()
    }

    /// [`ToolRegistry::get`] together with the [`ToolRegistry::generation`] it was resolved
    /// under (read atomically): while the generation is unchanged, the same lookup resolves the
    /// same definition.
    pub fn get_at(
        &self,
        name: &str,
        agent: Option<&AgentId>,
    ) -> (Option<Arc<ToolDefinition>>, u64) {
        let st = self.shared.state.read();
        (st.lookup(name, agent).cloned(), st.generation)
    }

    /// The schemas `agent` sees, in registration order: exactly name, description, parameters.
    pub fn schemas(&self, agent: Option<&AgentId>) -> Vec<ToolSchema> {
        let st = self.shared.state.read();
        st.visible(agent)
            .into_iter()
            .map(|(_, d)| ToolSchema {
                name: d.name.clone(),
                description: d.description.clone(),
                parameters: d.parameters.clone(),
            })
            .collect()
    }

    /// The names `agent` sees, in registration order.
    pub fn names(&self, agent: Option<&AgentId>) -> Vec<String> {
        self.schemas(agent)
            .into_iter()
            .map(|s| s.name.to_string())
            .collect()
    }

    /// Classifies one call: `Parallel` only when the visible tool's classifier says exactly yes
    /// for these arguments; unknown tools, bad arguments and panics are `Exclusive`.
    pub fn execution_mode(
        &self,
        name: &str,
        agent: Option<&AgentId>,
        args: &Arguments,
    ) -> ExecutionMode {
        match self.get(name, agent) {
            Some(def) if def.is_concurrency_safe(args) => ExecutionMode::Parallel,
            _ => ExecutionMode::Exclusive,
        }
    }
}
