//! Permission rules: parsing, precedence deny > ask > allow, subjects, the default, TOML loading
//! with clear errors, and the rules as a pre-execute listener.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use dsh_core::{PreNext, PreToolDecision, Signal, ToolRegistry};
use dsh_guard::{
    GuardError, Hooks, PermissionAction, PermissionMatch, PermissionRule, PermissionRules, Scope,
};
use serde_json::json;

use super::guards::Listener;
use super::support::{agent, exec_with, registry, tool};

fn reg() -> ToolRegistry {
    registry(vec![
        tool("bash", None, Some("command")),
        tool("read_file", None, Some("path")),
        tool("plain", None, None),
    ])
}

fn decide(rules: &PermissionRules, name: &str, args: serde_json::Value) -> PermissionAction {
    rules
        .decide(&exec_with("c", name, args, None, Signal::never()))
        .action()
}

#[test]
fn precedence_is_deny_then_ask_then_allow() {
    let rules = PermissionRules::new(reg())
        .allow("bash")
        .unwrap()
        .ask("bash(git push*)")
        .unwrap()
        .deny("bash(rm -rf *)")
        .unwrap()
        .allow("bash(rm -rf /tmp/*)")
        .unwrap();
    assert_eq!(
        decide(&rules, "bash", json!({"command": "ls"})),
        PermissionAction::Allow
    );
    assert_eq!(
        decide(&rules, "bash", json!({"command": "git push origin"})),
        PermissionAction::Ask
    );
    // A more specific allow never outranks a deny.
    assert_eq!(
        decide(&rules, "bash", json!({"command": "rm -rf /tmp/x"})),
        PermissionAction::Deny
    );
}

#[test]
fn the_default_applies_only_to_unmatched_calls() {
    let rules = PermissionRules::new(reg())
        .allow("read_file")
        .unwrap()
        .with_default(PermissionAction::Deny);
    assert_eq!(
        decide(&rules, "read_file", json!({"path": "a"})),
        PermissionAction::Allow
    );
    let m = rules.decide(&exec_with("c", "plain", json!({}), None, Signal::never()));
    assert_eq!(m, PermissionMatch::Default(PermissionAction::Deny));
    assert_eq!(
        PermissionRules::new(reg()).default_action(),
        PermissionAction::Allow
    );
}

#[test]
fn patterns_are_globs_over_the_subject_and_star_crosses_slashes() {
    let rules = PermissionRules::new(reg())
        .deny("read_file(/etc/**)")
        .unwrap()
        .deny("read_file(*.pem)")
        .unwrap()
        .ask("read_file(src/{a,b}/?.rs)")
        .unwrap();
    assert_eq!(
        decide(&rules, "read_file", json!({"path": "/etc/passwd"})),
        PermissionAction::Deny
    );
    assert_eq!(
        decide(&rules, "read_file", json!({"path": "keys/deep/server.pem"})),
        PermissionAction::Deny
    );
    assert_eq!(
        decide(&rules, "read_file", json!({"path": "src/b/x.rs"})),
        PermissionAction::Ask
    );
    assert_eq!(
        decide(&rules, "read_file", json!({"path": "src/c/x.rs"})),
        PermissionAction::Allow
    );
}

#[test]
fn tool_names_are_globs_too() {
    let rules = PermissionRules::new(reg()).deny("mcp__*").unwrap();
    assert_eq!(
        decide(&rules, "mcp__fetch", json!({})),
        PermissionAction::Deny
    );
    assert_eq!(decide(&rules, "plain", json!({})), PermissionAction::Allow);
}

#[test]
fn an_unreadable_subject_never_silently_allows_a_pattern_guarded_tool() {
    let rules = PermissionRules::new(reg()).deny("bash(rm *)").unwrap();
    // Arguments without the subject field: the deny rule cannot be checked, so ask.
    let m = rules.decide(&exec_with("c", "bash", json!({}), None, Signal::never()));
    assert_eq!(
        m,
        PermissionMatch::UncheckedPattern {
            action: PermissionAction::Deny,
            rule: Arc::from("bash(rm *)")
        }
    );
    assert_eq!(m.action(), PermissionAction::Ask);
    // A tool that declares no subject with a pattern rule: same.
    let r2 = PermissionRules::new(reg()).ask("plain(x*)").unwrap();
    assert_eq!(decide(&r2, "plain", json!({})), PermissionAction::Ask);
    // A bare deny still decides more strictly.
    let r3 = PermissionRules::new(reg())
        .deny("bash(rm *)")
        .unwrap()
        .deny("bash")
        .unwrap();
    assert_eq!(decide(&r3, "bash", json!({})), PermissionAction::Deny);
    // Allow patterns simply do not match.
    let r4 = PermissionRules::new(reg())
        .allow("bash(ls*)")
        .unwrap()
        .with_default(PermissionAction::Deny);
    assert_eq!(decide(&r4, "bash", json!({})), PermissionAction::Deny);
}

#[test]
fn the_definition_is_looked_up_for_the_calling_agent() {
    let reg = reg();
    // Agent A's `plain` declares a subject; the global one does not.
    reg.register_scoped(&agent("A"), tool("plain", None, Some("target")))
        .unwrap()
        .keep();
    let rules = PermissionRules::new(reg).deny("plain(prod*)").unwrap();
    let a = rules.decide(&exec_with(
        "c",
        "plain",
        json!({"target": "prod-db"}),
        Some("A"),
        Signal::never(),
    ));
    assert_eq!(a.action(), PermissionAction::Deny);
    let b = rules.decide(&exec_with(
        "c",
        "plain",
        json!({"target": "dev"}),
        Some("A"),
        Signal::never(),
    ));
    assert_eq!(b, PermissionMatch::Default(PermissionAction::Allow));
}

#[test]
fn malformed_rules_are_refused_naming_the_rule() {
    for bad in [
        "",
        "  ",
        "(x)",
        "bash(rm",
        "bash(rm [)",
        "bash()",
        "bash)",
        "ba sh",
        "bash(x)y",
    ] {
        let err = PermissionRule::parse(bad, "deny").unwrap_err();
        match &err {
            GuardError::PermissionRule { rule, origin, .. } => {
                assert_eq!(rule, bad);
                assert_eq!(origin, "deny");
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("invalid permission rule"), "{err}");
    }
    assert!(PermissionRules::new(reg()).deny("bash(rm [)").is_err());
}

const RULES: &str = r#"
[permissions]
allow = ["read_file", "bash(git status*)"]
ask = ["bash(git push*)"]
deny = [
  "bash(rm -rf *)",
]
default = "ask"

[something_else]
owned_by = "another crate"
"#;

#[test]
fn rules_load_from_toml() {
    let rules = PermissionRules::from_toml(RULES, reg()).unwrap();
    assert_eq!(rules.default_action(), PermissionAction::Ask);
    assert_eq!(
        decide(&rules, "read_file", json!({"path": "x"})),
        PermissionAction::Allow
    );
    assert_eq!(
        decide(&rules, "bash", json!({"command": "git status -s"})),
        PermissionAction::Allow
    );
    assert_eq!(
        decide(&rules, "bash", json!({"command": "git push"})),
        PermissionAction::Ask
    );
    assert_eq!(
        decide(&rules, "bash", json!({"command": "rm -rf /"})),
        PermissionAction::Deny
    );
    assert_eq!(decide(&rules, "plain", json!({})), PermissionAction::Ask);
    // No [permissions] table: no rules.
    let none = PermissionRules::from_toml("[other]\nx = 1\n", reg()).unwrap();
    assert_eq!(
        decide(&none, "bash", json!({"command": "rm -rf /"})),
        PermissionAction::Allow
    );
}

#[test]
fn a_bad_rule_in_toml_names_the_list_the_rule_and_the_line() {
    let text =
        "[permissions]\nallow = [\"read_file\"]\ndeny = [\n  \"bash\",\n  \"bash(rm [)\",\n]\n";
    let err = PermissionRules::from_toml(text, reg()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("\"bash(rm [)\""), "{msg}");
    assert!(msg.contains("permissions.deny (line 5)"), "{msg}");
}

#[test]
fn malformed_toml_and_bad_keys_are_errors_with_lines() {
    let err = PermissionRules::from_toml("[permissions]\nallow = [\"a\"\n", reg()).unwrap_err();
    assert!(
        matches!(err, GuardError::Config { line: Some(_), .. }),
        "{err:?}"
    );
    let err = PermissionRules::from_toml("[permissions]\nalow = [\"a\"]\n", reg()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("alow"), "{msg}");
    assert!(msg.contains("line 2"), "{msg}");
    let err =
        PermissionRules::from_toml("[permissions]\n\ndefault = \"maybe\"\n", reg()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("permissions.default"), "{msg}");
    assert!(msg.contains("line 3"), "{msg}");
    assert!(
        msg.contains("\"maybe\" is not a permission action"),
        "{msg}"
    );
    assert!(matches!(
        "maybe".parse::<dsh_guard::PermissionAction>(),
        Err(GuardError::UnknownAction(a)) if a == "maybe"
    ));
    let err = PermissionRules::from_toml("[permissions]\nallow = \"bash\"\n", reg()).unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");
}

#[tokio::test]
async fn as_a_listener_deny_and_ask_decide_and_allow_delegates_inward() {
    let rules = PermissionRules::from_toml(RULES, reg()).unwrap();
    let hooks = Hooks::new();
    hooks.on_pre_execute(Scope::Global, rules).keep();
    let inner_calls = Arc::new(AtomicUsize::new(0));
    hooks
        .on_pre_execute(
            Scope::Global,
            Listener {
                calls: inner_calls.clone(),
                decision: Some(PreToolDecision::deny("inner says no")),
            },
        )
        .keep();
    let snap = hooks.snapshot(&[]);
    let run = |name: &str, args: serde_json::Value| {
        let e = exec_with("c", name, args, None, Signal::never());
        let pre = snap.pre.clone();
        async move { PreNext::new(&pre).run(&e).await.unwrap() }
    };
    match run("bash", json!({"command": "rm -rf /"})).await {
        PreToolDecision::Deny { reason } => {
            assert_eq!(
                &*reason,
                "tool \"bash\" is denied by permission rule deny \"bash(rm -rf *)\""
            )
        }
        other => panic!("{other:?}"),
    }
    match run("bash", json!({"command": "git push"})).await {
        PreToolDecision::Ask { reason } => {
            assert!(reason.unwrap().contains("bash(git push*)"))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(inner_calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    // An allowed call reaches the listener further in.
    assert_eq!(
        run("read_file", json!({"path": "x"})).await,
        PreToolDecision::deny("inner says no")
    );
    assert_eq!(inner_calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}
