//! Settings loading: the three files merged by concatenation in the documented order, and
//! configuration errors refused at load with the file and key named.

use dsh_hooks::{ClaudeHooks, HookEvent, HookSettings, HooksError, OnFailure};
use serde_json::json;

use super::support::*;

fn appender(ws: &Ws, tag: &str) -> String {
    ws.script(
        &format!("append-{tag}.sh"),
        &format!(
            "#!/usr/bin/env bash\ncat >/dev/null\necho {tag} >> '{}'\n",
            ws.root().join("order.txt").display()
        ),
    )
}

#[tokio::test]
async fn cc_30_workspace_then_user_then_explicit_all_run_in_order() {
    let ws = Ws::new();
    let user = tempfile::tempdir().expect("user dir");
    let (a, b, c, d) = (
        appender(&ws, "workspace"),
        appender(&ws, "user"),
        appender(&ws, "explicit1"),
        appender(&ws, "explicit2"),
    );
    ws.file(
        ".dsh/settings.json",
        &one_hook("PreToolUse", "*", &a).to_string(),
    );
    std::fs::write(
        user.path().join("settings.json"),
        one_hook("PreToolUse", "Bash", &b).to_string(),
    )
    .expect("user settings");
    let explicit = ws.file(
        "mine.json",
        &json!({"permissions": {"allow": []}, "hooks": {"PreToolUse": [
            {"matcher": "*", "hooks": [
                {"type": "command", "command": c},
                {"type": "command", "command": d}
            ]}
        ]}})
        .to_string(),
    );
    let claude =
        ClaudeHooks::load(Some(ws.root()), true, Some(user.path()), Some(&explicit)).expect("load");
    assert_eq!(claude.settings().count(HookEvent::PreToolUse), 4);
    assert_eq!(
        claude.settings().sources(),
        [
            ws.root().join(".dsh/settings.json"),
            user.path().join("settings.json"),
            explicit.clone()
        ]
    );
    let p = Pipe::new(&claude).await;
    p.call("c1", "bash", json!({"command": "ls"})).await;
    assert_eq!(
        ws.read("order.txt").lines().collect::<Vec<_>>(),
        ["workspace", "user", "explicit1", "explicit2"]
    );
    let ids: Vec<String> = p
        .events("hook/invoked")
        .iter()
        .map(|e| e["handlerId"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        ids,
        (1..=4)
            .map(|n| format!("claude-code:PreToolUse:{n}"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn cc_31_absent_standard_files_are_no_hooks_but_the_explicit_file_must_exist() {
    let ws = Ws::new();
    let user = tempfile::tempdir().expect("user dir");
    let claude = ClaudeHooks::load(Some(ws.root()), true, Some(user.path()), None).expect("load");
    assert!(claude.settings().is_empty());
    let missing = ws.root().join("nope.json");
    let err = ClaudeHooks::load(Some(ws.root()), true, None, Some(&missing)).expect_err("missing");
    assert!(matches!(err, HooksError::Read { .. }), "{err}");
    assert_eq!(err.path(), missing);
}

#[test]
fn cc_32_configuration_errors_name_the_file_and_key() {
    let origin = std::path::Path::new("/cfg/settings.json");
    let cases = [
        ("{not json", "is not valid JSON"),
        (r#"{"hooks": []}"#, "hooks: must be an object"),
        (
            r#"{"hooks": {"PreToolUse": [{"matcher": "(", "hooks": []}]}}"#,
            "hooks.PreToolUse[0].matcher: matcher \"(\" is not a valid regex",
        ),
        (
            r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "prompt", "prompt": "x"}]}]}}"#,
            "hooks.PreToolUse[0].hooks[0].type: hook type \"prompt\" is not supported",
        ),
        (
            r#"{"hooks": {"PostToolUse": [{"hooks": [{"type": "command", "command": "x", "timeout": 0}]}]}}"#,
            "hooks.PostToolUse[0].hooks[0].timeout: must be a positive number",
        ),
        (
            r#"{"hooks": {"PostToolUse": [{"hooks": [{"type": "command", "command": "x", "onFailure": "explode"}]}]}}"#,
            "hooks.PostToolUse[0].hooks[0].onFailure",
        ),
        (
            r#"{"hooks": {"PostToolUse": [{"hooks": [{"type": "command", "command": ""}]}]}}"#,
            "hooks.PostToolUse[0].hooks[0].command: must be a non-empty string",
        ),
        (
            r#"{"hooks": {"PostToolUse": [{"matcher": "x"}]}}"#,
            "hooks.PostToolUse[0].hooks: must be an array",
        ),
    ];
    for (text, expect) in cases {
        let err = HookSettings::parse(text, origin).expect_err(text);
        let message = err.to_string();
        assert!(message.contains(expect), "{message:?} lacks {expect:?}");
        assert!(message.contains("/cfg/settings.json"), "{message}");
    }
}

#[test]
fn cc_33_other_points_and_keys_are_ignored() {
    let text = json!({
        "model": "x",
        "hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": "x"}]}],
            "PostToolUse": [{"matcher": "Write", "hooks": [
                {"type": "command", "command": "fmt", "timeout": 2.5, "onFailure": "block"}
            ]}]
        }
    })
    .to_string();
    let s = HookSettings::parse(&text, std::path::Path::new("s.json")).expect("parse");
    assert_eq!(s.count(HookEvent::PreToolUse), 0);
    assert_eq!(s.count(HookEvent::PostToolUse), 1);
    let (matcher, hook) = s
        .matching(HookEvent::PostToolUse, "write")
        .next()
        .expect("write matches Write");
    assert_eq!(matcher, "Write");
    assert_eq!(&*hook.command, "fmt");
    assert_eq!(hook.timeout, std::time::Duration::from_millis(2500));
    assert_eq!(hook.on_failure, OnFailure::Block);
    assert!(s.matching(HookEvent::PostToolUse, "read").next().is_none());
}

#[tokio::test]
async fn cc_34_no_hooks_installs_nothing() {
    let claude = ClaudeHooks::new(HookSettings::empty(), ".");
    let p = Pipe::new(&claude).await;
    assert!(!p.installed.is_active());
    assert!(!p.call("c1", "echo", json!({"text": "x"})).await.is_error());
    assert!(p.events("hook/invoked").is_empty());
}

#[tokio::test]
async fn cc_35_disposing_the_installation_removes_the_hooks() {
    let ws = Ws::new();
    let block = ws.script(
        "exit2.sh",
        "#!/usr/bin/env bash\ncat >/dev/null\necho no >&2\nexit 2\n",
    );
    let claude = ws.hooks(one_hook("PreToolUse", "*", &block));
    let registry = dsh_core::ToolRegistry::new();
    registry
        .register(dsh_test_support::echo_tool())
        .expect("echo")
        .keep();
    let hooks = dsh_guard::Hooks::new();
    let runtime = dsh_scheduler::Runtime::new(registry, hooks.clone());
    let installed = claude.install(&hooks, dsh_session::Session::in_memory("s"));
    let input = || dsh_test_support::input("c", "echo", json!({"text": "x"}));
    assert!(runtime.execute(input()).await.is_error());
    installed.dispose();
    assert!(!runtime.execute(input()).await.is_error());
}
