//! REG-15..26: agent-scoped registration, shadowing, visibility and restriction.
//!
//! Running a tool here means the part of a call dsh-core owns (lookup in the caller's view,
//! argument check, body, output stage: `fixtures::call`); the staged pipeline around it is
//! covered end to end in dsh-scheduler.

use super::fixtures::{call, keep, keep_scoped, ran, reply, sorted_names, text};
use dsh_core::{AgentId, Arguments, ExecutionMode, ToolFilter, ToolRegistry};

fn none() -> Arguments {
    Arguments::from_raw("")
}

fn allow(names: &[&str]) -> ToolFilter {
    ToolFilter::Allow(names.iter().map(|s| s.to_string()).collect())
}

fn deny(names: &[&str]) -> ToolFilter {
    ToolFilter::Deny(names.iter().map(|s| s.to_string()).collect())
}

#[tokio::test]
async fn reg_15_scoped_tools_are_visible_only_to_their_agent() {
    let reg = ToolRegistry::new();
    let a = AgentId::new("A");
    let b = AgentId::new("B");
    keep(&reg, ran("shared"));
    keep_scoped(&reg, &a, ran("mine"));

    assert_eq!(sorted_names(&reg, Some(&a)), vec!["mine", "shared"]);
    assert_eq!(reg.names(None), vec!["shared"]);
    assert_eq!(reg.names(Some(&b)), vec!["shared"]);

    let r = call(&reg, "mine", Some(&a), none()).await;
    assert!(!r.is_error());
    assert_eq!(text(&r), "ran:mine");

    for agent in [Some(&b), None] {
        let r = call(&reg, "mine", agent, none()).await;
        assert!(r.is_error());
        assert_eq!(text(&r), "Error: unknown tool \"mine\"");
        assert_eq!(r.error().and_then(|e| e.code()), Some("UNKNOWN_TOOL"));
        // Out of view is indistinguishable from nonexistent, classification included.
        let unknown = call(&reg, "nonexistent", agent, none()).await;
        assert_eq!(text(&unknown), "Error: unknown tool \"nonexistent\"");
        assert_eq!(
            reg.execution_mode("mine", agent, &none()),
            ExecutionMode::Exclusive
        );
    }
}

#[tokio::test]
async fn reg_16_a_scoped_entry_shadows_the_global_one_whichever_came_first() {
    let reg = ToolRegistry::new();
    let a = AgentId::new("scoped");
    keep_scoped(&reg, &a, reply("bash", "restricted-bash"));
    keep(&reg, reply("bash", "global-bash"));

    assert_eq!(
        text(&call(&reg, "bash", Some(&a), none()).await),
        "restricted-bash"
    );
    assert_eq!(text(&call(&reg, "bash", None, none()).await), "global-bash");
    assert_eq!(reg.names(Some(&a)), vec!["bash"]);
    assert_eq!(reg.schemas(Some(&a)).len(), 1);
    assert_eq!(&*reg.schemas(Some(&a))[0].description, "the bash tool");
}

#[test]
fn reg_17_duplicate_names_globally_and_within_a_scope() {
    let reg = ToolRegistry::new();
    keep(&reg, ran("x"));
    let global = reg.register(ran("x")).expect_err("duplicate");
    let text = global.to_string();
    assert!(text.contains("already registered"), "{text}");
    assert!(text.contains("agent.ctx"), "{text}");

    let a = AgentId::new("a");
    keep_scoped(&reg, &a, ran("x"));
    let scoped = reg.register_scoped(&a, ran("x")).expect_err("duplicate");
    assert!(
        scoped
            .to_string()
            .contains("already registered in this scope"),
        "{scoped}"
    );
}

#[test]
fn reg_18_disposing_a_scope_removes_its_tools() {
    let reg = ToolRegistry::new();
    let a = AgentId::new("a");
    let scope = reg.declare_scope(&a, None);
    keep_scoped(&reg, &a, ran("mine"));
    assert!(reg.get("mine", Some(&a)).is_some());
    scope.dispose();
    assert!(reg.get("mine", Some(&a)).is_none());
    assert!(reg.schemas(Some(&a)).is_empty());

    // A scope created implicitly by a scoped registration empties when that handle goes.
    let b = AgentId::new("b");
    let handle = reg.register_scoped(&b, ran("mine")).expect("registers");
    handle.dispose();
    assert!(reg.get("mine", Some(&b)).is_none());
    assert!(reg.schemas(Some(&b)).is_empty());
}

#[tokio::test]
async fn reg_19_restrictions_filter_inherited_tools_only() {
    let reg = ToolRegistry::new();
    let a = AgentId::new("a");
    keep(&reg, ran("read"));
    keep(&reg, ran("bash"));
    keep_scoped(&reg, &a, ran("capture"));
    reg.restrict(Some(&a), allow(&["read"]))
        .expect("restricts")
        .keep();

    assert_eq!(sorted_names(&reg, Some(&a)), vec!["capture", "read"]);
    assert_eq!(
        text(&call(&reg, "bash", Some(&a), none()).await),
        "Error: unknown tool \"bash\""
    );
    assert_eq!(
        text(&call(&reg, "read", Some(&a), none()).await),
        "ran:read"
    );
    assert_eq!(
        text(&call(&reg, "capture", Some(&a), none()).await),
        "ran:capture"
    );
    assert_eq!(sorted_names(&reg, None), vec!["bash", "read"]);
}

#[tokio::test]
async fn reg_20_filters_apply_to_globals_registered_later() {
    let reg = ToolRegistry::new();
    let denier = AgentId::new("deny-scope");
    let allower = AgentId::new("allow-scope");
    keep(&reg, ran("read"));
    keep(&reg, ran("bash"));
    reg.restrict(Some(&denier), deny(&["bash"]))
        .expect("restricts")
        .keep();
    reg.restrict(Some(&allower), allow(&["read"]))
        .expect("restricts")
        .keep();
    keep(&reg, ran("web"));
    keep_scoped(&reg, &denier, ran("denied-local"));
    keep_scoped(&reg, &allower, ran("allowed-local"));

    assert_eq!(
        sorted_names(&reg, Some(&denier)),
        vec!["denied-local", "read", "web"]
    );
    assert_eq!(
        sorted_names(&reg, Some(&allower)),
        vec!["allowed-local", "read"]
    );
    assert_eq!(
        text(&call(&reg, "web", Some(&denier), none()).await),
        "ran:web"
    );
    assert_eq!(
        text(&call(&reg, "web", Some(&allower), none()).await),
        "Error: unknown tool \"web\""
    );
    assert_eq!(
        text(&call(&reg, "denied-local", Some(&denier), none()).await),
        "ran:denied-local"
    );
    assert_eq!(
        text(&call(&reg, "allowed-local", Some(&allower), none()).await),
        "ran:allowed-local"
    );
}

#[test]
fn reg_21_restrictions_intersect_and_lift_independently() {
    let reg = ToolRegistry::new();
    let a = AgentId::new("a");
    for n in ["a", "b", "c"] {
        keep(&reg, ran(n));
    }
    let allow_ab = reg
        .restrict(Some(&a), allow(&["a", "b"]))
        .expect("restricts");
    let deny_b = reg.restrict(Some(&a), deny(&["b"])).expect("restricts");
    assert_eq!(reg.names(Some(&a)), vec!["a"]);
    allow_ab.dispose();
    assert_eq!(sorted_names(&reg, Some(&a)), vec!["a", "c"]);
    deny_b.dispose();
    assert_eq!(sorted_names(&reg, Some(&a)), vec!["a", "b", "c"]);
}

#[test]
fn reg_22_a_filter_is_copied_when_registered() {
    let reg = ToolRegistry::new();
    let a = AgentId::new("a");
    keep(&reg, ran("a"));
    keep(&reg, ran("b"));
    let mut list = vec!["a".to_string()];
    reg.restrict(Some(&a), ToolFilter::Deny(list.clone()))
        .expect("restricts")
        .keep();
    list.push("b".to_string());
    assert_eq!(list.len(), 2);
    assert_eq!(reg.names(Some(&a)), vec!["b"]);
}

#[test]
fn reg_23_restriction_errors() {
    let reg = ToolRegistry::new();
    let a = AgentId::new("a");

    let e = reg.restrict(None, allow(&["x"])).expect_err("no scope");
    assert!(e.to_string().contains("requires a scoped context"), "{e}");

    let e = reg.restrict(Some(&a), allow(&[])).expect_err("empty");
    assert!(e.to_string().contains("no-op"), "{e}");
    let e = reg.restrict(Some(&a), deny(&[])).expect_err("empty");
    assert!(e.to_string().contains("no-op"), "{e}");

    let e = reg
        .restrict(Some(&a), allow(&["anything"]))
        .expect_err("none known");
    assert!(e.to_string().contains("known global tools: (none)"), "{e}");

    keep(&reg, ran("real"));
    keep_scoped(&reg, &a, ran("local"));
    let e = reg
        .restrict(Some(&a), allow(&["local"]))
        .expect_err("own tool");
    assert!(
        e.to_string().contains("unknown global tool \"local\""),
        "{e}"
    );

    let e = reg.restrict(Some(&a), deny(&["reall"])).expect_err("typo");
    assert_eq!(
        e.to_string(),
        "unknown global tool \"reall\"; known global tools: real"
    );

    let e = reg
        .restrict(Some(&a), allow(&["real", "ghost", "wraith"]))
        .expect_err("several");
    assert!(
        e.to_string()
            .contains("unknown global tools \"ghost\", \"wraith\""),
        "{e}"
    );

    let e = reg
        .restrict(Some(&a), deny(&["run_code"]))
        .expect_err("reserved");
    assert!(e.to_string().contains("run_code"), "{e}");
    // None of the failures left a filter behind.
    assert_eq!(sorted_names(&reg, Some(&a)), vec!["local", "real"]);
}

#[tokio::test]
async fn reg_24_filters_apply_to_tools_inherited_from_ancestor_scopes() {
    let reg = ToolRegistry::new();
    let parent = AgentId::new("parent");
    let child = AgentId::new("child");
    reg.declare_scope(&parent, None).keep();
    reg.declare_scope(&child, Some(&parent)).keep();
    keep_scoped(&reg, &parent, ran("bash"));
    keep_scoped(&reg, &parent, ran("read"));
    assert_eq!(sorted_names(&reg, Some(&child)), vec!["bash", "read"]);

    reg.restrict(Some(&child), deny(&["bash"]))
        .expect("restricts")
        .keep();
    assert_eq!(reg.names(Some(&child)), vec!["read"]);
    assert_eq!(
        text(&call(&reg, "bash", Some(&child), none()).await),
        "Error: unknown tool \"bash\""
    );
    assert_eq!(sorted_names(&reg, Some(&parent)), vec!["bash", "read"]);
}

#[tokio::test]
async fn reg_25_a_scopes_own_registrations_are_exempt_from_its_filter() {
    let reg = ToolRegistry::new();
    let parent = AgentId::new("parent");
    let child = AgentId::new("child");
    keep(&reg, ran("read"));
    keep(&reg, ran("bash"));
    reg.declare_scope(&child, Some(&parent)).keep();
    keep_scoped(&reg, &child, ran("report"));
    reg.restrict(Some(&child), allow(&["read"]))
        .expect("restricts")
        .keep();

    assert_eq!(sorted_names(&reg, Some(&child)), vec!["read", "report"]);
    assert_eq!(
        text(&call(&reg, "report", Some(&child), none()).await),
        "ran:report"
    );
}

#[test]
fn reg_26_an_ancestors_restriction_reaches_every_nested_scope() {
    let reg = ToolRegistry::new();
    let parent = AgentId::new("parent");
    let child = AgentId::new("child");
    let grandchild = AgentId::new("grandchild");
    keep(&reg, ran("web"));
    reg.declare_scope(&parent, None).keep();
    reg.declare_scope(&child, Some(&parent)).keep();
    reg.declare_scope(&grandchild, Some(&child)).keep();
    keep_scoped(&reg, &parent, ran("bash"));
    reg.restrict(Some(&parent), deny(&["web"]))
        .expect("restricts")
        .keep();

    assert_eq!(reg.names(Some(&parent)), vec!["bash"]);
    assert_eq!(reg.names(Some(&child)), vec!["bash"]);
    assert_eq!(reg.names(Some(&grandchild)), vec!["bash"]);
    assert!(reg.get("web", Some(&grandchild)).is_none());
    assert_eq!(reg.names(None), vec!["web"]);
}

#[test]
fn scopes_that_name_each_other_as_parent_do_not_hang() {
    let reg = ToolRegistry::new();
    let a = AgentId::new("a");
    let b = AgentId::new("b");
    reg.declare_scope(&a, Some(&b)).keep();
    reg.declare_scope(&b, Some(&a)).keep();
    keep_scoped(&reg, &b, ran("from-b"));
    keep(&reg, ran("global"));
    assert_eq!(sorted_names(&reg, Some(&a)), vec!["from-b", "global"]);
    assert!(reg.get("nothing", Some(&a)).is_none());
}
