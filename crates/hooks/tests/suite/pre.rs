//! PreToolUse hooks through the staged runtime: allow, deny with a reason, ask, exit 2, matchers
//! by Claude name, and the most-restrictive fold of several hooks.

use serde_json::json;

use super::support::*;

const ALLOW_PY: &str = r#"#!/usr/bin/env python3
import json, sys
data = json.load(sys.stdin)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "permissionDecision": "allow", "permissionDecisionReason": "fine"}}))
"#;

const DENY_RM_PY: &str = r#"#!/usr/bin/env python3
import json, sys
data = json.load(sys.stdin)
cmd = data["tool_input"].get("command", "")
if "rm -rf" in cmd:
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "rm -rf is not allowed here: " + cmd}}))
"#;

const ASK_SH: &str = r#"#!/usr/bin/env bash
cat > /dev/null
echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "please confirm"}}'
"#;

const EXIT2_SH: &str = r#"#!/usr/bin/env bash
cat > /dev/null
echo "blocked: production is off limits" >&2
exit 2
"#;

#[tokio::test]
async fn cc_01_allow_lets_the_call_run() {
    let ws = Ws::new();
    let cmd = ws.script("allow.py", ALLOW_PY);
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "Bash", &cmd))).await;
    let r = p.call("c1", "bash", json!({"command": "ls"})).await;
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(text(&r), "bash ran: ls");
    assert_eq!(p.ran(), vec!["bash:ls"]);
    let results = p.events("hook/result");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["decision"], "allow");
    assert_eq!(results[0]["exitCode"], 0);
}

#[tokio::test]
async fn log_03_deny_with_reason_stops_the_body_and_shows_the_reason() {
    let ws = Ws::new();
    let cmd = ws.script("deny.py", DENY_RM_PY);
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "Bash", &cmd))).await;
    let r = p
        .call("c1", "bash", json!({"command": "rm -rf /tmp/x"}))
        .await;
    assert!(r.is_error());
    assert_eq!(
        text(&r),
        "Error: rm -rf is not allowed here: rm -rf /tmp/x",
        "the model sees the hook's reason"
    );
    assert!(p.ran().is_empty(), "the body never ran");
    assert_eq!(p.events("hook/result")[0]["decision"], "deny");
    // The same hook passes a harmless command.
    let ok = p.call("c2", "bash", json!({"command": "echo hi"})).await;
    assert!(!ok.is_error());
    assert_eq!(p.ran(), vec!["bash:echo hi"]);
    assert_eq!(p.events("hook/result")[1]["decision"], "pass");
}

#[tokio::test]
async fn apr_ask_goes_to_the_approver_with_the_hook_reason() {
    let ws = Ws::new();
    let cmd = ws.script("ask.sh", ASK_SH);
    let claude = ws.hooks(one_hook("PreToolUse", "Bash", &cmd));

    let granted = Pipe::with_approver(&claude, true).await;
    let r = granted.call("c1", "bash", json!({"command": "make"})).await;
    assert!(!r.is_error(), "{r:?}");
    let asked = granted
        .approver
        .as_ref()
        .expect("approver")
        .asked
        .lock()
        .clone();
    assert_eq!(asked, vec![Some("please confirm".to_owned())]);
    assert_eq!(granted.ran(), vec!["bash:make"]);

    let rejected = Pipe::with_approver(&claude, false).await;
    let r = rejected
        .call("c1", "bash", json!({"command": "make"}))
        .await;
    assert!(r.is_error());
    assert!(rejected.ran().is_empty());

    // No approval channel: the ask fails closed.
    let none = Pipe::new(&claude).await;
    let r = none.call("c1", "bash", json!({"command": "make"})).await;
    assert!(r.is_error());
    assert!(none.ran().is_empty());
    assert_eq!(none.events("hook/result")[0]["decision"], "ask");
}

#[tokio::test]
async fn cc_02_exit_2_denies_with_stderr_as_the_reason() {
    let ws = Ws::new();
    let cmd = ws.script("exit2.sh", EXIT2_SH);
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "", &cmd))).await;
    let r = p.call("c1", "echo", json!({"text": "x"})).await;
    assert!(r.is_error());
    assert_eq!(text(&r), "Error: blocked: production is off limits");
    assert!(p.ran().is_empty());
    let res = &p.events("hook/result")[0];
    assert_eq!(res["decision"], "deny");
    assert_eq!(res["exitCode"], 2);
    assert_eq!(res["stderrSummary"], "blocked: production is off limits");
}

#[tokio::test]
async fn cc_03_matchers_see_claude_names_and_ours() {
    let ws = Ws::new();
    let cmd = ws.script("exit2.sh", EXIT2_SH);
    // Claude's name, our name, a regex over Claude names, and a list: each matches `bash`/`edit`.
    for (matcher, blocked, free) in [
        ("Bash", "bash", "edit"),
        ("bash", "bash", "edit"),
        ("^Ed.t$", "edit", "bash"),
        ("Edit|Write", "edit", "bash"),
        ("MultiEdit|Edit", "edit", "echo"),
    ] {
        let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", matcher, &cmd))).await;
        let b = p
            .call("c1", blocked, json!({"command": "x", "file_path": "f"}))
            .await;
        assert!(b.is_error(), "{matcher} should match {blocked}");
        let f = p
            .call(
                "c2",
                free,
                json!({"command": "x", "file_path": "f", "text": "t"}),
            )
            .await;
        assert!(!f.is_error(), "{matcher} should not match {free}");
        let invoked = p.events("hook/invoked");
        assert_eq!(invoked.len(), 1, "{matcher}: one hook ran");
        assert_eq!(invoked[0]["matcher"], matcher);
    }
    // A plain name matches exactly, never a longer name.
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "Edi", &cmd))).await;
    assert!(
        !p.call("c1", "edit", json!({"file_path": "f"}))
            .await
            .is_error()
    );
    assert!(p.events("hook/invoked").is_empty());
}

#[tokio::test]
async fn cc_04_several_hooks_fold_most_restrictively_in_any_order() {
    let ws = Ws::new();
    let allow = ws.script("allow.py", ALLOW_PY);
    let ask = ws.script("ask.sh", ASK_SH);
    let deny = ws.script("exit2.sh", EXIT2_SH);
    let group = |cmds: &[&str]| {
        let hooks: Vec<_> = cmds
            .iter()
            .map(|c| json!({"type": "command", "command": c}))
            .collect();
        json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": hooks}]}})
    };
    for order in [
        [&allow, &ask, &deny],
        [&deny, &ask, &allow],
        [&ask, &deny, &allow],
    ] {
        let cmds: Vec<&str> = order.iter().map(|s| s.as_str()).collect();
        let p = Pipe::with_approver(&ws.hooks(group(&cmds)), true).await;
        let r = p.call("c1", "echo", json!({"text": "x"})).await;
        assert_eq!(text(&r), "Error: blocked: production is off limits");
        // Every hook ran, in configuration order, and was logged.
        let invoked: Vec<String> = p
            .events("hook/invoked")
            .iter()
            .map(|e| e["command"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(invoked, cmds);
        assert!(p.approver.as_ref().expect("a").asked.lock().is_empty());
    }
    // Ask beats allow.
    let p = Pipe::with_approver(&ws.hooks(group(&[&allow, &ask])), true).await;
    assert!(!p.call("c1", "echo", json!({"text": "x"})).await.is_error());
    assert_eq!(
        *p.approver.as_ref().expect("a").asked.lock(),
        vec![Some("please confirm".to_owned())]
    );
}

#[tokio::test]
async fn grd_06_a_hook_allow_does_not_override_other_policy() {
    use dsh_core::PreToolDecision;
    use dsh_guard::Scope;
    let ws = Ws::new();
    let allow = ws.script("allow.py", ALLOW_PY);
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "*", &allow))).await;
    // A listener registered after the hooks (further in) denies; a guard denies another tool.
    p.hooks
        .on_pre_execute(
            Scope::Global,
            dsh_test_support::PreFn(|exec: &dsh_core::ToolExecution| {
                Ok((exec.name() == "bash").then(|| PreToolDecision::deny("rules say no")))
            }),
        )
        .keep();
    p.hooks
        .add_guard(Scope::Global, |exec: &dsh_core::ToolExecution| {
            (exec.name() == "edit").then(|| "guarded".to_owned())
        })
        .keep();
    let r = p.call("c1", "bash", json!({"command": "ls"})).await;
    assert_eq!(text(&r), "Error: rules say no");
    let r = p.call("c2", "edit", json!({"file_path": "f"})).await;
    assert_eq!(text(&r), "Error: guarded");
    assert!(p.ran().is_empty());
}

#[tokio::test]
async fn cc_05_ask_then_an_inner_deny_still_denies() {
    use dsh_core::PreToolDecision;
    use dsh_guard::Scope;
    let ws = Ws::new();
    let ask = ws.script("ask.sh", ASK_SH);
    let p = Pipe::with_approver(&ws.hooks(one_hook("PreToolUse", "*", &ask)), true).await;
    p.hooks
        .on_pre_execute(
            Scope::Global,
            dsh_test_support::PreFn(|_: &dsh_core::ToolExecution| {
                Ok(Some(PreToolDecision::deny("inner deny")))
            }),
        )
        .keep();
    let r = p.call("c1", "echo", json!({"text": "x"})).await;
    assert_eq!(text(&r), "Error: inner deny");
    assert!(p.approver.as_ref().expect("a").asked.lock().is_empty());
}

#[tokio::test]
async fn cc_06_legacy_decision_block_and_approve() {
    let ws = Ws::new();
    let block = ws.script(
        "legacy.sh",
        "#!/usr/bin/env bash\ncat >/dev/null\necho '{\"decision\": \"block\", \"reason\": \"legacy no\"}'\n",
    );
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "*", &block))).await;
    assert_eq!(
        text(&*p.call("c1", "echo", json!({"text": "x"})).await),
        "Error: legacy no"
    );
    let approve = ws.script(
        "approve.sh",
        "#!/usr/bin/env bash\ncat >/dev/null\necho '{\"decision\": \"approve\"}'\n",
    );
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "*", &approve))).await;
    assert!(!p.call("c1", "echo", json!({"text": "x"})).await.is_error());
    assert_eq!(p.events("hook/result")[0]["decision"], "allow");
}

/// Issue 17 item 1: stdout that is not JSON after exit 0 is a hook error (reported, and by default
/// changing nothing), never a silent pass.
#[tokio::test]
async fn cc_07_plain_text_output_is_a_hook_error_that_changes_nothing() {
    let ws = Ws::new();
    let chatty = ws.script(
        "chatty.sh",
        "#!/usr/bin/env bash\ncat >/dev/null\necho 'checked the command, all good'\n",
    );
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "*", &chatty))).await;
    assert!(!p.call("c1", "echo", json!({"text": "x"})).await.is_error());
    let res = &p.events("hook/result")[0];
    assert_eq!(res["decision"], "error");
    let error = res["error"].as_str().unwrap();
    assert!(error.contains("must print a JSON object"), "{error}");
    assert!(error.contains("checked the command, all good"), "{error}");
}

#[tokio::test]
async fn cc_08_deep_json_in_and_out_never_overflows_the_stack() {
    use dsh_core::Arguments;
    use serde_json::Value;
    let ws = Ws::new();
    let out = ws.root().join("deep-out.json");
    // The hook keeps what it read and answers with a deep JSON object of its own.
    let cmd = ws.script(
        "deep.py",
        &format!(
            "#!/usr/bin/env python3\nimport sys\nopen('{}', 'w').write(sys.stdin.read())\n\
             sys.stdout.write('{{\"additionalContext\": \"deep ok\", \"extra\": ' + '[' * 9000 + ']' * 9000 + '}}')\n",
            out.display()
        ),
    );
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "*", &cmd))).await;
    let mut deep = Value::from(1);
    for _ in 0..9000 {
        deep = Value::Array(vec![deep]);
    }
    let mut args = serde_json::Map::new();
    args.insert("text".into(), Value::from("x"));
    args.insert("nested".into(), deep);
    let args = Arguments::from_value(Value::Object(args)).expect("deep arguments");
    let input = dsh_core::ToolExecutionInput::new("c1", "echo", args);
    let r = p.runtime.execute(input).await;
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(contexts(&r), ["deep ok"]);
    let sent = std::fs::read_to_string(&out).expect("stdin kept");
    assert!(
        sent.contains(&"[".repeat(9000)),
        "the hook got the whole input"
    );
    assert_eq!(p.events("hook/result")[0]["decision"], "pass");
}
