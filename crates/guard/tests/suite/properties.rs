//! Property tests: waterfall ordering (any registration order, any mix of prepend, scope and
//! removal) and guard monotonicity (no mix of pre-execute outcomes, approvals and guard
//! registrations turns a guard's denial into an allow).

use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{
    AgentId, Dispatch, ExecuteNext, ExecuteWrapper, Failure, PostExecuteHook, PostNext,
    PostToolDecision, PreExecuteHook, PreNext, PreToolDecision, ToolExecution, ToolResult,
};
use dsh_guard::{HookHandle, Hooks, Scope, Waterfall, WaterfallHandle};
use parking_lot::Mutex;
use proptest::prelude::*;

use super::support::{FakeTerminal, agent, exec};

type Log = Arc<Mutex<Vec<u32>>>;

struct Rec {
    id: u32,
    log: Log,
}

#[async_trait]
impl PreExecuteHook for Rec {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        self.log.lock().push(self.id);
        next.run(exec).await
    }
}

#[async_trait]
impl ExecuteWrapper for Rec {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        self.log.lock().push(self.id);
        next.run(call).await
    }
}

#[async_trait]
impl PostExecuteHook for Rec {
    async fn post_execute(
        &self,
        exec: &ToolExecution,
        result: &ToolResult,
        next: PostNext<'_>,
    ) -> Result<PostToolDecision, Failure> {
        self.log.lock().push(self.id);
        next.run(exec, result).await
    }
}

/// Scopes: 0 global, 1 agent A, 2 agent B, 3 agent P (A is nested under P).
fn scope_of(s: u8) -> Scope {
    match s {
        0 => Scope::Global,
        1 => Scope::Agent(agent("A")),
        2 => Scope::Agent(agent("B")),
        _ => Scope::Agent(agent("P")),
    }
}

fn chains() -> [(Option<&'static str>, Vec<AgentId>); 3] {
    [
        (Some("A"), vec![agent("A"), agent("P")]),
        (Some("B"), vec![agent("B")]),
        (None, vec![]),
    ]
}

fn reaches(s: u8, chain: &[AgentId]) -> bool {
    match scope_of(s) {
        Scope::Global => true,
        Scope::Agent(a) => chain.contains(&a),
    }
}

#[derive(Clone, Debug)]
enum Op {
    Add { prepend: bool, scope: u8 },
    Remove(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<bool>(), 0u8..4).prop_map(|(prepend, scope)| Op::Add { prepend, scope }),
        1 => (0usize..64).prop_map(Op::Remove),
    ]
}

struct Registered {
    id: u32,
    _handles: (HookHandle, HookHandle, HookHandle, WaterfallHandle),
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn listeners_run_in_the_documented_order_and_only_for_their_scope(ops in prop::collection::vec(op(), 0..16)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let hooks = Hooks::new();
        let waterfall: Waterfall<u32, Vec<u32>> = Waterfall::new();
        let (pre_log, exe_log, post_log): (Log, Log, Log) = Default::default();
        // The model: ids in order with their scope; prepend goes in front.
        let mut model: Vec<(u32, u8)> = Vec::new();
        let mut live: Vec<Registered> = Vec::new();
        for (id, op) in (0u32..).zip(ops) {
            match op {
                Op::Add { prepend, scope } => {
                    let s = scope_of(scope);
                    let rec = |log: &Log| Rec { id, log: log.clone() };
                    let wf = move |_: &u32, next: dsh_guard::DecideNext<'_, u32, Vec<u32>>| {
                        let mut v = vec![id];
                        v.extend(next.run(&0));
                        v
                    };
                    let handles = if prepend {
                        model.insert(0, (id, scope));
                        (
                            hooks.prepend_pre_execute(s.clone(), rec(&pre_log)),
                            hooks.prepend_execute(s.clone(), rec(&exe_log)),
                            hooks.prepend_post_execute(s, rec(&post_log)),
                            waterfall.prepend(wf),
                        )
                    } else {
                        model.push((id, scope));
                        (
                            hooks.on_pre_execute(s.clone(), rec(&pre_log)),
                            hooks.on_execute(s.clone(), rec(&exe_log)),
                            hooks.on_post_execute(s, rec(&post_log)),
                            waterfall.on(wf),
                        )
                    };
                    live.push(Registered { id, _handles: handles });
                }
                Op::Remove(k) => {
                    if !live.is_empty() {
                        let gone = live.remove(k % live.len());
                        model.retain(|(id, _)| *id != gone.id);
                    }
                }
            }
        }
        let terminal = FakeTerminal::new(|d| {
            let e = d.exec().clone();
            Box::pin(async move { super::support::ok_result(&e, "ok") })
        });
        for (who, chain) in chains() {
            let expected: Vec<u32> = model.iter().filter(|(_, s)| reaches(*s, &chain)).map(|(id, _)| *id).collect();
            let e = exec("t", who);
            let snap = hooks.snapshot(&chain);
            pre_log.lock().clear();
            exe_log.lock().clear();
            post_log.lock().clear();
            rt.block_on(async {
                PreNext::new(&snap.pre).run(&e).await.unwrap();
                let r = ExecuteNext::new(&snap.wrappers, &terminal).run(Dispatch::new(e.clone())).await.unwrap();
                PostNext::new(&snap.post).run(&e, &r).await.unwrap();
            });
            prop_assert_eq!(&*pre_log.lock(), &expected);
            prop_assert_eq!(&*exe_log.lock(), &expected);
            prop_assert_eq!(&*post_log.lock(), &expected);
        }
        let all: Vec<u32> = model.iter().map(|(id, _)| *id).collect();
        prop_assert_eq!(waterfall.decide(&0, &|_| Vec::new()), all);
    }
}

#[derive(Clone, Copy, Debug)]
enum GuardKind {
    Abstain,
    Deny,
    Panic,
}

fn guard_kind() -> impl Strategy<Value = GuardKind> {
    prop_oneof![
        4 => Just(GuardKind::Abstain),
        3 => Just(GuardKind::Deny),
        1 => Just(GuardKind::Panic),
    ]
}

#[derive(Clone, Copy, Debug)]
enum Pre {
    Delegate,
    Allow,
    Deny,
    Ask,
}

struct Decides(Pre);

#[async_trait]
impl PreExecuteHook for Decides {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        match self.0 {
            Pre::Delegate => next.run(exec).await,
            Pre::Allow => Ok(PreToolDecision::Allow),
            Pre::Deny => Ok(PreToolDecision::deny("pre deny")),
            Pre::Ask => Ok(PreToolDecision::Ask { reason: None }),
        }
    }
}

fn pre() -> impl Strategy<Value = Pre> {
    prop_oneof![
        Just(Pre::Delegate),
        Just(Pre::Allow),
        Just(Pre::Deny),
        Just(Pre::Ask)
    ]
}

fn add_guard(hooks: &Hooks, i: usize, scope: u8, kind: GuardKind) -> HookHandle {
    hooks.add_guard(scope_of(scope), move |_: &ToolExecution| match kind {
        GuardKind::Abstain => None,
        GuardKind::Deny => Some(format!("deny-{i}")),
        GuardKind::Panic => panic!("guard-{i} broke"),
    })
}

/// Layer rank for a chain (nearest first): global 0, then farthest to nearest.
fn layer(scope: u8, chain: &[AgentId]) -> Option<usize> {
    match scope_of(scope) {
        Scope::Global => Some(0),
        Scope::Agent(a) => chain.iter().rev().position(|c| *c == a).map(|p| p + 1),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn no_pre_execute_outcome_or_approval_turns_a_guard_denial_into_an_allow(
        guards in prop::collection::vec((0u8..4, guard_kind()), 0..8),
        listeners in prop::collection::vec((0u8..4, pre()), 0..5),
        approval_grants in any::<bool>(),
        extra in prop::collection::vec((0u8..4, guard_kind()), 0..4),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let hooks = Hooks::new();
        let mut handles = Vec::new();
        for (i, (scope, kind)) in guards.iter().enumerate() {
            handles.push(add_guard(&hooks, i, *scope, *kind));
        }
        for (scope, p) in &listeners {
            handles.push(hooks.on_pre_execute(scope_of(*scope), Decides(*p)));
        }
        for (who, chain) in chains() {
            // The documented order: global first, then farthest scope to nearest, registration
            // order within a layer; the first non-abstaining guard decides.
            let mut order: Vec<(usize, usize, GuardKind)> = guards
                .iter()
                .enumerate()
                .filter_map(|(i, (s, k))| layer(*s, &chain).map(|l| (l, i, *k)))
                .collect();
            order.sort_by_key(|(l, i, _)| (*l, *i));
            let expected = order.iter().find(|(_, _, k)| !matches!(k, GuardKind::Abstain));
            let e = exec("t", who);
            let verdict = hooks.check_guards(&e, &chain);
            match expected {
                None => prop_assert_eq!(&verdict, &None),
                Some((_, i, GuardKind::Deny)) => prop_assert_eq!(verdict.clone(), Some(format!("deny-{i}"))),
                Some((_, i, _)) => {
                    let v = verdict.clone().unwrap_or_default();
                    prop_assert!(v.contains(&format!("guard-{i} broke")), "{}", v);
                }
            }
            // The whole prepare gate: pre-execute, approval for an ask, then guards.
            let snap = hooks.snapshot(&chain);
            let decision = rt.block_on(PreNext::new(&snap.pre).run(&e)).unwrap();
            let passed_policy = match decision {
                PreToolDecision::Allow => true,
                PreToolDecision::Ask { .. } => approval_grants,
                PreToolDecision::Deny { .. } => false,
            };
            let allowed = passed_policy && hooks.check_guards(&e, &chain).is_none();
            if verdict.is_some() {
                prop_assert!(!allowed, "a guard denial became an allow");
            }
            // Registering more guards never lifts a denial.
            if verdict.is_some() {
                let more: Vec<HookHandle> = extra
                    .iter()
                    .enumerate()
                    .map(|(j, (s, k))| add_guard(&hooks, 100 + j, *s, *k))
                    .collect();
                prop_assert!(hooks.check_guards(&e, &chain).is_some());
                drop(more);
            }
        }
    }
}
