//! GRD-05..09 at the guard level (pre-execute scoping, guard order, live evaluation), and the
//! rule that a call in flight keeps the listeners it started with.
//!
//! GRD-01..04 (denials through the staged runtime: post-execute on a denial, the wrapper never
//! entered, thrown listener errors as results) need the runtime and live in dsh-scheduler.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use dsh_core::{Failure, PreExecuteHook, PreNext, PreToolDecision, ToolExecution};
use dsh_guard::{HookHandle, Hooks, Scope};
use parking_lot::Mutex;

use super::support::{agent, exec, gate};

/// A pre-execute listener that counts calls and decides `decision` (or delegates on `None`).
pub struct Listener {
    pub calls: Arc<AtomicUsize>,
    pub decision: Option<PreToolDecision>,
}

#[async_trait]
impl PreExecuteHook for Listener {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match &self.decision {
            Some(d) => Ok(d.clone()),
            None => next.run(exec).await,
        }
    }
}

#[tokio::test]
async fn grd_05_a_scoped_listener_sees_and_denies_only_its_agents_calls() {
    let hooks = Hooks::new();
    let calls = Arc::new(AtomicUsize::new(0));
    hooks
        .on_pre_execute(
            Scope::Agent(agent("A")),
            Listener {
                calls: calls.clone(),
                decision: Some(PreToolDecision::deny("scoped veto")),
            },
        )
        .keep();
    assert_eq!(
        gate(&hooks, &exec("t", Some("A")), &[agent("A")]).await,
        Err("scoped veto".into())
    );
    assert_eq!(
        gate(&hooks, &exec("t", Some("B")), &[agent("B")]).await,
        Ok(())
    );
    assert_eq!(gate(&hooks, &exec("t", None), &[]).await, Ok(()));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn grd_06_an_allow_from_the_waterfall_cannot_bypass_a_scoped_guard() {
    let hooks = Hooks::new();
    let a = agent("A");
    let terminal = |e: &ToolExecution| -> Option<String> {
        // The guard sees the frozen execution: read-only by construction.
        let _ = e.arguments();
        Some("terminal policy".into())
    };
    let first = hooks.add_guard(Scope::Agent(a.clone()), terminal);
    let mut scope_handles: Vec<HookHandle> =
        vec![hooks.add_guard(Scope::Agent(a.clone()), terminal)];
    scope_handles.push(hooks.prepend_pre_execute(
        Scope::Agent(a.clone()),
        Listener {
            calls: Arc::default(),
            decision: Some(PreToolDecision::Allow),
        },
    ));
    let mut body_count = 0;
    let mut run = async |agent_name: &str| {
        let r = gate(&hooks, &exec("t", Some(agent_name)), &[agent(agent_name)]).await;
        if r.is_ok() {
            body_count += 1;
        }
        r
    };
    assert_eq!(run("A").await, Err("terminal policy".into()));
    assert_eq!(run("B").await, Ok(()));
    first.dispose();
    assert_eq!(run("A").await, Err("terminal policy".into()));
    drop(scope_handles); // disposing the scope removes its other registrations
    assert_eq!(run("A").await, Ok(()));
    assert_eq!(body_count, 2);
}

#[tokio::test]
async fn grd_07_the_second_global_guard_denies_after_the_first_abstains() {
    let hooks = Hooks::new();
    let order: Arc<Mutex<Vec<&str>>> = Arc::default();
    let o1 = order.clone();
    let o2 = order.clone();
    hooks
        .add_guard(Scope::Global, move |_: &ToolExecution| {
            o1.lock().push("first");
            None
        })
        .keep();
    hooks
        .add_guard(Scope::Global, move |_: &ToolExecution| {
            o2.lock().push("second");
            Some("global denial".to_owned())
        })
        .keep();
    assert_eq!(
        gate(&hooks, &exec("t", None), &[]).await,
        Err("global denial".into())
    );
    assert_eq!(*order.lock(), ["first", "second"]);
}

#[tokio::test]
async fn grd_08_a_guard_added_during_evaluation_is_seen_in_the_same_pass() {
    let hooks = Hooks::new();
    let order: Arc<Mutex<Vec<&str>>> = Arc::default();
    let added = Arc::new(AtomicUsize::new(0));
    let (h2, o1, o2) = (hooks.clone(), order.clone(), order.clone());
    hooks
        .add_guard(Scope::Global, move |_: &ToolExecution| {
            o1.lock().push("first");
            if added.fetch_add(1, Ordering::SeqCst) == 0 {
                let o2 = o2.clone();
                h2.add_guard(Scope::Global, move |_: &ToolExecution| {
                    o2.lock().push("late");
                    Some("late denial".to_owned())
                })
                .keep();
            }
            None
        })
        .keep();
    assert_eq!(
        hooks.check_guards(&exec("t", None), &[]),
        Some("late denial".into())
    );
    assert_eq!(*order.lock(), ["first", "late"]);
}

#[tokio::test]
async fn grd_09_emptying_a_layer_starts_a_new_generation_for_the_next_pass() {
    let hooks = Hooks::new();
    let a = agent("A");
    let order: Arc<Mutex<Vec<&str>>> = Arc::default();
    let own: Arc<Mutex<Option<HookHandle>>> = Arc::default();
    let (h2, own2, o1, o2, a2) = (
        hooks.clone(),
        own.clone(),
        order.clone(),
        order.clone(),
        a.clone(),
    );
    let first = hooks.add_guard(Scope::Agent(a.clone()), move |_: &ToolExecution| {
        o1.lock().push("first");
        if let Some(me) = own2.lock().take() {
            me.dispose(); // the layer is now empty
            let o2 = o2.clone();
            h2.add_guard(Scope::Agent(a2.clone()), move |_: &ToolExecution| {
                o2.lock().push("replacement");
                Some("replacement denial".to_owned())
            })
            .keep();
        }
        None
    });
    *own.lock() = Some(first);
    let chain = [a.clone()];
    assert_eq!(gate(&hooks, &exec("t", Some("A")), &chain).await, Ok(()));
    assert_eq!(*order.lock(), ["first"]);
    assert_eq!(
        gate(&hooks, &exec("t", Some("A")), &chain).await,
        Err("replacement denial".into())
    );
    assert_eq!(*order.lock(), ["first", "replacement"]);
}

#[test]
fn guards_run_global_then_farthest_scope_to_nearest_and_a_panic_denies() {
    let hooks = Hooks::new();
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let rec = |label: &'static str| {
        let order = order.clone();
        move |_: &ToolExecution| {
            order.lock().push(label.to_owned());
            None
        }
    };
    // Registered nearest first, to show the order is by layer, not by registration.
    hooks
        .add_guard(Scope::Agent(agent("child")), rec("child"))
        .keep();
    hooks
        .add_guard(Scope::Agent(agent("root")), rec("root"))
        .keep();
    hooks.add_guard(Scope::Global, rec("global")).keep();
    hooks
        .add_guard(Scope::Agent(agent("other")), rec("other"))
        .keep();
    let chain = [agent("child"), agent("root")];
    assert_eq!(hooks.check_guards(&exec("t", Some("child")), &chain), None);
    assert_eq!(*order.lock(), ["global", "root", "child"]);
    hooks
        .add_guard(
            Scope::Agent(agent("root")),
            |_: &ToolExecution| -> Option<String> { panic!("guard broke") },
        )
        .keep();
    let reason = hooks
        .check_guards(&exec("t", Some("child")), &chain)
        .expect("a panicking guard denies");
    assert!(reason.contains("guard broke"), "{reason}");
}

#[tokio::test]
async fn a_call_in_flight_keeps_the_listeners_it_started_with() {
    let hooks = Hooks::new();
    let c1 = Arc::new(AtomicUsize::new(0));
    let c2 = Arc::new(AtomicUsize::new(0));
    let old = hooks.on_pre_execute(
        Scope::Global,
        Listener {
            calls: c1.clone(),
            decision: None,
        },
    );
    let snap = hooks.snapshot(&[]);
    old.dispose();
    hooks
        .prepend_pre_execute(
            Scope::Global,
            Listener {
                calls: c2.clone(),
                decision: Some(PreToolDecision::deny("new")),
            },
        )
        .keep();
    let e = exec("t", None);
    // The started call still runs with the old set...
    assert_eq!(
        PreNext::new(&snap.pre).run(&e).await.unwrap(),
        PreToolDecision::Allow
    );
    assert_eq!(
        (c1.load(Ordering::SeqCst), c2.load(Ordering::SeqCst)),
        (1, 0)
    );
    // ...and the next call sees the new one.
    assert_eq!(gate(&hooks, &e, &[]).await, Err("new".into()));
    assert_eq!(c1.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_panicking_or_failing_pre_listener_is_a_failure_not_an_allow() {
    struct Panics;
    #[async_trait]
    impl PreExecuteHook for Panics {
        async fn pre_execute(
            &self,
            _: &ToolExecution,
            _: PreNext<'_>,
        ) -> Result<PreToolDecision, Failure> {
            panic!("permission hook broke")
        }
    }
    let hooks = Hooks::new();
    hooks.on_pre_execute(Scope::Global, Panics).keep();
    let r = gate(&hooks, &exec("t", None), &[]).await;
    assert!(matches!(r, Err(m) if m.contains("permission hook broke")));
}
