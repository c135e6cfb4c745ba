//! The hook points of one pipeline and their ordering rules (spec P1, D1, F1, F4): registration
//! returns a handle that removes exactly that hook when disposed or dropped.
//!
//! Ordering: the first-registered hook is outermost; `prepend` puts a hook in front of all
//! existing ones. A scoped hook sees only calls of its agent (and agents nested under it).
//! Concurrency: registration and removal are safe while calls run. A call takes a snapshot
//! ([`CallHooks`]) when it starts and keeps that set of listeners, wrappers and observers to the
//! end, whatever is registered or removed meanwhile. Guards are the exception, see `guards.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use dsh_core::{
    AgentId, ExecuteWrapper, Guard, PostExecuteHook, PreExecuteHook, PreExecuteObserver, PreNext,
    PreToolDecision, ResultObserver, ToolExecution,
};
use parking_lot::{Mutex, RwLock};

use crate::guards::GuardTable;
use crate::scope::Scope;

struct Slot<T: ?Sized> {
    id: u64,
    scope: Scope,
    item: Arc<T>,
}

struct Ordered<T: ?Sized> {
    slots: Vec<Slot<T>>,
}

impl<T: ?Sized> Default for Ordered<T> {
    fn default() -> Self {
        Ordered { slots: Vec::new() }
    }
}

impl<T: ?Sized> Ordered<T> {
    fn insert(&mut self, id: u64, scope: Scope, item: Arc<T>, front: bool) {
        let slot = Slot { id, scope, item };
        if front {
            self.slots.insert(0, slot);
        } else {
            self.slots.push(slot);
        }
    }
    fn remove(&mut self, id: u64) -> bool {
        let before = self.slots.len();
        self.slots.retain(|s| s.id != id);
        before != self.slots.len()
    }
    fn for_chain(&self, chain: &[AgentId]) -> Arc<[Arc<T>]> {
        self.slots
            .iter()
            .filter(|s| s.scope.reaches(chain))
            .map(|s| s.item.clone())
            .collect::<Vec<_>>()
            .into()
    }
}

#[derive(Default)]
struct State {
    pre: Ordered<dyn PreExecuteHook>,
    pre_observers: Ordered<dyn PreExecuteObserver>,
    wrappers: Ordered<dyn ExecuteWrapper>,
    post: Ordered<dyn PostExecuteHook>,
    observers: Ordered<dyn ResultObserver>,
    next_id: u64,
    /// Bumped on every change of the four ordered lists.
    generation: u64,
}

/// Snapshots by scope chain, valid for one generation of the lists.
#[derive(Default)]
struct Cache {
    generation: u64,
    /// The snapshot for calls with no agent (the usual case), kept apart from the map.
    global: Option<Arc<CallHooks>>,
    by_chain: HashMap<Vec<AgentId>, Arc<CallHooks>>,
}

impl Cache {
    fn invalidate(&mut self, generation: u64) {
        if generation > self.generation {
            self.generation = generation;
            self.global = None;
            self.by_chain.clear();
        }
    }

    fn get(&self, chain: &[AgentId]) -> Option<&Arc<CallHooks>> {
        if chain.is_empty() {
            self.global.as_ref()
        } else {
            self.by_chain.get(chain)
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Point {
    Pre,
    PreObserver,
    Wrapper,
    Post,
    Observer,
    Guard,
}

pub(crate) struct Inner {
    state: RwLock<State>,
    pub(crate) guards: GuardTable,
    cache: Mutex<Cache>,
}

/// The hook points of a pipeline. Cloning gives another handle to the same set.
#[derive(Clone)]
pub struct Hooks {
    inner: Arc<Inner>,
}

/// The hooks one call runs with, fixed when the call starts (outermost first).
pub struct CallHooks {
    /// `tools/pre-execute` listeners.
    pub pre: Arc<[Arc<dyn PreExecuteHook>]>,
    /// `tools/execute` wrappers.
    pub wrappers: Arc<[Arc<dyn ExecuteWrapper>]>,
    /// `tools/post-execute` listeners.
    pub post: Arc<[Arc<dyn PostExecuteHook>]>,
    /// `tools/result` observers.
    pub observers: Arc<[Arc<dyn ResultObserver>]>,
}

/// Removes exactly the hook it was returned for, when disposed or dropped.
#[must_use = "dropping this handle removes the listener at once (`let _ =` drops it too): bind it to a named variable or call `.keep()`"]
pub struct HookHandle {
    inner: Weak<Inner>,
    point: Point,
    id: u64,
    armed: bool,
}

impl HookHandle {
    /// Removes the hook now.
    pub fn dispose(mut self) {
        self.remove();
    }
    /// Keeps the hook for the lifetime of the hook set.
    pub fn keep(mut self) {
        self.armed = false;
    }
    fn remove(&mut self) {
        if !std::mem::take(&mut self.armed) {
            return;
        }
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        if self.point == Point::Guard {
            inner.guards.remove(self.id);
            return;
        }
        let generation = {
            let mut st = inner.state.write();
            let removed = match self.point {
                Point::Pre => st.pre.remove(self.id),
                Point::PreObserver => st.pre_observers.remove(self.id),
                Point::Wrapper => st.wrappers.remove(self.id),
                Point::Post => st.post.remove(self.id),
                Point::Observer => st.observers.remove(self.id),
                Point::Guard => false,
            };
            if !removed {
                return;
            }
            st.generation += 1;
            st.generation
        };
        inner.cache.lock().invalidate(generation);
    }
}

impl Drop for HookHandle {
    fn drop(&mut self) {
        self.remove();
    }
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks::new()
    }
}

impl Hooks {
    /// An empty set of hooks.
    pub fn new() -> Hooks {
        Hooks {
            inner: Arc::new(Inner {
                state: RwLock::new(State::default()),
                guards: GuardTable::default(),
                cache: Mutex::new(Cache::default()),
            }),
        }
    }

    fn add(&self, point: Point, f: impl FnOnce(&mut State, u64)) -> HookHandle {
        let (id, generation) = {
            let mut st = self.inner.state.write();
            st.next_id += 1;
            st.generation += 1;
            let id = st.next_id;
            f(&mut st, id);
            (id, st.generation)
        };
        self.inner.cache.lock().invalidate(generation);
        HookHandle {
            inner: Arc::downgrade(&self.inner),
            point,
            id,
            armed: true,
        }
    }

    /// Adds a `tools/pre-execute` listener inside all existing ones.
    pub fn on_pre_execute(&self, scope: Scope, hook: impl PreExecuteHook) -> HookHandle {
        let hook: Arc<dyn PreExecuteHook> = Arc::new(hook);
        self.add(Point::Pre, |st, id| st.pre.insert(id, scope, hook, false))
    }
    /// Adds a `tools/pre-execute` listener in front of all existing ones.
    pub fn prepend_pre_execute(&self, scope: Scope, hook: impl PreExecuteHook) -> HookHandle {
        let hook: Arc<dyn PreExecuteHook> = Arc::new(hook);
        self.add(Point::Pre, |st, id| st.pre.insert(id, scope, hook, true))
    }
    /// Adds an observer that sees every call reaching `tools/pre-execute`, before any listener
    /// decides: unlike a listener (which a decision further out hides calls from), it sees the
    /// calls a permission rule denies or sends to approval too. Observers run in registration
    /// order, in front of every listener, `prepend_pre_execute` ones included; a panicking
    /// observer is skipped.
    pub fn observe_pre_execute(
        &self,
        scope: Scope,
        observer: impl PreExecuteObserver,
    ) -> HookHandle {
        let o: Arc<dyn PreExecuteObserver> = Arc::new(observer);
        self.add(Point::PreObserver, |st, id| {
            st.pre_observers.insert(id, scope, o, false)
        })
    }
    /// Adds a `tools/execute` wrapper inside all existing ones.
    pub fn on_execute(&self, scope: Scope, wrapper: impl ExecuteWrapper) -> HookHandle {
        let w: Arc<dyn ExecuteWrapper> = Arc::new(wrapper);
        self.add(Point::Wrapper, |st, id| {
            st.wrappers.insert(id, scope, w, false)
        })
    }
    /// Adds a `tools/execute` wrapper outside all existing ones.
    pub fn prepend_execute(&self, scope: Scope, wrapper: impl ExecuteWrapper) -> HookHandle {
        let w: Arc<dyn ExecuteWrapper> = Arc::new(wrapper);
        self.add(Point::Wrapper, |st, id| {
            st.wrappers.insert(id, scope, w, true)
        })
    }
    /// Adds a `tools/post-execute` listener inside all existing ones.
    pub fn on_post_execute(&self, scope: Scope, hook: impl PostExecuteHook) -> HookHandle {
        let hook: Arc<dyn PostExecuteHook> = Arc::new(hook);
        self.add(Point::Post, |st, id| st.post.insert(id, scope, hook, false))
    }
    /// Adds a `tools/post-execute` listener in front of all existing ones.
    pub fn prepend_post_execute(&self, scope: Scope, hook: impl PostExecuteHook) -> HookHandle {
        let hook: Arc<dyn PostExecuteHook> = Arc::new(hook);
        self.add(Point::Post, |st, id| st.post.insert(id, scope, hook, true))
    }
    /// Adds a `tools/result` observer.
    pub fn on_result(&self, scope: Scope, observer: impl ResultObserver) -> HookHandle {
        let o: Arc<dyn ResultObserver> = Arc::new(observer);
        self.add(Point::Observer, |st, id| {
            st.observers.insert(id, scope, o, false)
        })
    }

    /// Adds a deny-only guard (spec P3). Guards cannot be reordered; only this handle removes it.
    pub fn add_guard(&self, scope: Scope, guard: impl Guard) -> HookHandle {
        let id = {
            let mut st = self.inner.state.write();
            st.next_id += 1;
            st.next_id
        };
        self.inner.guards.insert(id, scope, Arc::new(guard));
        HookHandle {
            inner: Arc::downgrade(&self.inner),
            point: Point::Guard,
            id,
            armed: true,
        }
    }

    /// The hooks a call whose agent scope chain is `chain` (nearest first; empty for no agent)
    /// runs with: every global hook plus those scoped to an agent of the chain, outermost first.
    /// The call keeps this set to its end. Cached per chain until the next registration change.
    pub fn snapshot(&self, chain: &[AgentId]) -> Arc<CallHooks> {
        if let Some(c) = self.inner.cache.lock().get(chain) {
            return c.clone();
        }
        let (hooks, generation) = {
            let st = self.inner.state.read();
            let hooks = Arc::new(CallHooks {
                pre: with_observers(st.pre_observers.for_chain(chain), st.pre.for_chain(chain)),
                wrappers: st.wrappers.for_chain(chain),
                post: st.post.for_chain(chain),
                observers: st.observers.for_chain(chain),
            });
            (hooks, st.generation)
        };
        let mut cache = self.inner.cache.lock();
        // A change that happened while the snapshot was built has moved the cache on (or will
        // clear it right after): only a snapshot of the current generation is cached.
        if cache.generation == generation && chain.is_empty() {
            cache.global = Some(hooks.clone());
        } else if cache.generation == generation {
            if cache.by_chain.len() >= 1024 {
                cache.by_chain.clear();
            }
            cache.by_chain.insert(chain.to_vec(), hooks.clone());
        }
        hooks
    }

    /// Runs the guards for an allowed call (spec P3): global first, then the agent's scope chain
    /// from farthest to nearest, registration order within a layer; the first reason wins.
    /// A panicking guard denies.
    pub fn check_guards(
        &self,
        exec: &dsh_core::ToolExecution,
        chain: &[AgentId],
    ) -> Option<String> {
        self.inner.guards.evaluate(exec, chain)
    }
}

/// The pre-execute chain a call runs: one listener calling every observer first (when there are
/// any), then the deciding listeners.
fn with_observers(
    observers: Arc<[Arc<dyn PreExecuteObserver>]>,
    pre: Arc<[Arc<dyn PreExecuteHook>]>,
) -> Arc<[Arc<dyn PreExecuteHook>]> {
    if observers.is_empty() {
        return pre;
    }
    let first: Arc<dyn PreExecuteHook> = Arc::new(ObserveAll(observers));
    std::iter::once(first).chain(pre.iter().cloned()).collect()
}

struct ObserveAll(Arc<[Arc<dyn PreExecuteObserver>]>);

#[async_trait::async_trait]
impl PreExecuteHook for ObserveAll {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, dsh_core::Failure> {
        for o in self.0.iter() {
            if dsh_core::contained::call(|| o.observe(exec)).is_err() {
                tracing::warn!(tool = exec.name(), "a tools/pre-execute observer panicked");
            }
        }
        next.run(exec).await
    }
}
