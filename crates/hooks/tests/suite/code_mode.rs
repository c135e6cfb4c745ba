//! No bypass through `run_code`: a Code Mode sub-call goes through the same staged pipeline as a
//! native call, so a PreToolUse hook denies it and a PostToolUse hook sees it, with no special
//! case in this crate.

use std::sync::Arc;

use dsh_code_mode::{CodeMode, CodeModeConfig, PresentationMode, QuickJs};
use dsh_core::ToolRegistry;
use dsh_guard::Hooks;
use dsh_scheduler::Runtime;
use dsh_session::Session;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::support::*;

const DENY_RM_SH: &str = r#"#!/usr/bin/env bash
input=$(cat)
case "$input" in
  *'rm -rf'*) echo "rm -rf is blocked, even from run_code" >&2; exit 2 ;;
esac
"#;

#[tokio::test]
async fn code_41_a_sub_call_under_run_code_is_denied_by_a_pre_tool_use_hook() {
    let ws = Ws::new();
    let cmd = ws.script("deny_rm.sh", DENY_RM_SH);
    let claude = ws.hooks(one_hook("PreToolUse", "Bash", &cmd));

    let registry = ToolRegistry::new();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let _keep: Vec<_> = tools(&ran)
        .into_iter()
        .map(|t| registry.register(t).expect("register"))
        .collect();
    let code = CodeMode::new(
        &registry,
        CodeModeConfig {
            mode: PresentationMode::Code,
            runtime: Some(Arc::new(QuickJs::new())),
            ..CodeModeConfig::default()
        },
    )
    .expect("code mode");
    let hooks = Hooks::new();
    let runtime = Runtime::new(registry.clone(), hooks.clone()).with_admission(code.admission());
    code.bind(&runtime).expect("bind");
    let session = Session::in_memory("code-mode-hooks");
    claude.install(&hooks, session.clone()).keep();

    let program = r#"
        const out = [];
        try { await tools.bash({command: "rm -rf /"}); out.push("ran"); }
        catch (e) { out.push("denied: " + e.message); }
        out.push(await tools.bash({command: "ls"}));
        return out;
    "#;
    let r = runtime
        .execute(dsh_test_support::input(
            "call-1",
            "run_code",
            json!({"code": program, "description": "try rm"}),
        ))
        .await;
    assert!(!r.is_error(), "{r:?}");
    let value = r.value().map(|v| v.value().clone()).unwrap_or(Value::Null);
    let out = value["result"].as_array().cloned().unwrap_or_default();
    assert_eq!(out.len(), 2, "{value}");
    let first = out[0].as_str().unwrap_or_default();
    assert!(
        first.starts_with("denied: ") && first.contains("rm -rf is blocked, even from run_code"),
        "{first}"
    );
    assert_eq!(out[1], "bash ran: ls");
    assert_eq!(
        *ran.lock(),
        vec!["bash:ls"],
        "the denied sub-call never ran"
    );
    // Both sub-calls were seen by the hook, under their own call ids.
    let invoked = events_of(&session, "hook/invoked");
    assert_eq!(invoked.len(), 2);
    for e in &invoked {
        assert_eq!(e["toolName"], "bash");
        assert_ne!(e["callId"], "call-1", "a sub-call has its own id");
    }
    assert_eq!(events_of(&session, "hook/result")[0]["decision"], "deny");
}
