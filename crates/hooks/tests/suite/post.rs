//! PostToolUse hooks and additional contexts, driven through a real `TurnDriver` over an
//! in-memory session: a block replaces what the model sees; contexts land after all the
//! results of the batch.

use dsh_core::Signal;
use dsh_session::derive_messages;
use serde_json::{Value, json};

use super::support::*;

const BLOCK_SH: &str = r#"#!/usr/bin/env bash
cat > /dev/null
echo "tool output rejected by policy: retry once" >&2
exit 2
"#;

const CONTEXT_PY: &str = r#"#!/usr/bin/env python3
import json, sys
data = json.load(sys.stdin)
path = data["tool_input"].get("file_path", "?")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse",
    "additionalContext": "edited " + path + "; run the tests"}}))
"#;

/// The model-visible text of the tool-result block for `call_id` in the derived history.
fn seen_result(session: &dsh_session::Session, call_id: &str) -> (String, bool) {
    for m in derive_messages(&session.events()) {
        let Some(content) = m.value().get("content").and_then(Value::as_array) else {
            continue;
        };
        for b in content {
            if b["type"] == "tool-result" && b["toolCallId"] == call_id {
                let text = b["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                return (text, b["isError"] == json!(true));
            }
        }
    }
    panic!("no result for {call_id}");
}

#[tokio::test]
async fn fin_13_post_tool_use_block_replaces_what_the_model_sees() {
    let ws = Ws::new();
    let cmd = ws.script("block.sh", BLOCK_SH);
    let p = Pipe::new(&ws.hooks(one_hook("PostToolUse", "bash", &cmd))).await;
    let mut driver = p.driver();
    let report = driver
        .run_turn(
            vec![
                calls(&[("call_1", "bash", json!({"command": "echo HELLO"}))]),
                reply("done"),
            ],
            Signal::never(),
        )
        .await
        .expect("turn");
    assert_eq!(report.steps.len(), 1);
    assert_eq!(p.ran(), vec!["bash:echo HELLO"], "the body ran");
    let (seen, is_error) = seen_result(&p.session, "call_1");
    assert_eq!(seen, "tool output rejected by policy: retry once");
    assert!(is_error);
    // The events, in the reference order and shapes.
    let kinds: Vec<String> = all_events(&p.session)
        .into_iter()
        .map(|(t, _)| t)
        .filter(|t| t.starts_with("tool/") || t.starts_with("hook/"))
        .collect();
    assert_eq!(
        kinds,
        ["tool/call", "hook/invoked", "hook/result", "tool/result"]
    );
    let invoked = &p.events("hook/invoked")[0];
    assert_eq!(invoked["point"], "PostToolUse");
    assert_eq!(invoked["dialect"], "claude-code");
    assert_eq!(invoked["handlerId"], "claude-code:PostToolUse:1");
    assert_eq!(invoked["matcher"], "bash");
    assert_eq!(invoked["turn"], 1);
    let result = &p.events("hook/result")[0];
    assert_eq!(result["decision"], "block");
    assert_eq!(result["exitCode"], 2);
    assert_eq!(result["handlerId"], "claude-code:PostToolUse:1");
}

#[tokio::test]
async fn fin_json_decision_block_uses_the_reason_as_feedback() {
    let ws = Ws::new();
    let cmd = ws.script(
        "block.py",
        r#"#!/usr/bin/env python3
import json, sys
json.load(sys.stdin)
print(json.dumps({"decision": "block", "reason": "lint failed: fix the import order"}))
"#,
    );
    let p = Pipe::new(&ws.hooks(one_hook("PostToolUse", "Edit", &cmd))).await;
    let r = p.call("c1", "edit", json!({"file_path": "a.rs"})).await;
    assert!(r.is_error());
    assert_eq!(text(&r), "lint failed: fix the import order");
    assert!(r.value().is_none());
}

#[tokio::test]
async fn log_01_additional_context_lands_after_all_the_results() {
    let ws = Ws::new();
    let cmd = ws.script("context.py", CONTEXT_PY);
    let p = Pipe::new(&ws.hooks(one_hook("PostToolUse", "Edit|Write", &cmd))).await;
    let mut driver = p.driver();
    driver
        .run_turn(
            vec![calls(&[
                ("e1", "edit", json!({"file_path": "src/a.rs"})),
                ("e2", "edit", json!({"file_path": "src/b.rs"})),
                ("x1", "echo", json!({"text": "not an edit"})),
            ])],
            Signal::never(),
        )
        .await
        .expect("turn");
    let log = all_events(&p.session);
    let pos = |pred: &dyn Fn(&(String, Value)) -> bool| -> Vec<usize> {
        log.iter()
            .enumerate()
            .filter(|(_, e)| pred(e))
            .map(|(i, _)| i)
            .collect()
    };
    let results = pos(&|(t, _)| t == "tool/result");
    let contexts = pos(&|(t, d)| t == "user/message" && d["source"]["plugin"] == "claude-code");
    assert_eq!(results.len(), 3);
    assert_eq!(contexts.len(), 2, "one context per edit, none for echo");
    assert!(
        contexts[0] > *results.iter().max().expect("results"),
        "contexts never sit between results: {log:?}"
    );
    let texts: Vec<&str> = contexts
        .iter()
        .map(|&i| log[i].1["content"][0]["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        texts,
        [
            "edited src/a.rs; run the tests",
            "edited src/b.rs; run the tests"
        ]
    );
    let step_end = pos(&|(t, _)| t == "step/end");
    assert!(contexts[1] < step_end[0]);
}

#[tokio::test]
async fn cc_20_pre_tool_use_context_reaches_the_result_even_on_deny() {
    let ws = Ws::new();
    let cmd = ws.script(
        "pre_ctx.sh",
        r#"#!/usr/bin/env bash
input=$(cat)
case "$input" in
  *'"rm -rf'*) echo '{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "no rm -rf", "additionalContext": "use trash instead"}}' ;;
  *) echo '{"additionalContext": "remember the style guide"}' ;;
esac
"#,
    );
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "Bash", &cmd))).await;
    let ok = p.call("c1", "bash", json!({"command": "ls"})).await;
    assert!(!ok.is_error());
    assert_eq!(contexts(&ok), ["remember the style guide"]);
    let denied = p.call("c2", "bash", json!({"command": "rm -rf /"})).await;
    assert_eq!(text(&denied), "Error: no rm -rf");
    assert_eq!(contexts(&denied), ["use trash instead"]);
    let ctx = &denied.additional_contexts()[0];
    assert_eq!(ctx.plugin(), Some("claude-code"));
    assert_eq!(p.installed.pending_contexts(), 0, "nothing left behind");
}

#[tokio::test]
async fn cc_21_post_tool_use_runs_only_after_a_success() {
    let ws = Ws::new();
    let cmd = ws.script("block.sh", BLOCK_SH);
    let p = Pipe::new(&ws.hooks(one_hook("PostToolUse", "*", &cmd))).await;
    let r = p.call("c1", "fail", json!({})).await;
    assert_eq!(text(&r), "Error: the tool failed");
    assert!(p.events("hook/invoked").is_empty());
}

#[tokio::test]
async fn cc_22_the_stdin_protocol() {
    let ws = Ws::new();
    let script = format!(
        "#!/usr/bin/env bash\ncat > '{}'/stdin-\"$1\".json\n",
        ws.root().display()
    );
    let cmd = ws.script("dump.sh", &script);
    let settings = json!({"hooks": {
        "PreToolUse": [{"hooks": [{"type": "command", "command": format!("{cmd} pre")}]}],
        "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": format!("{cmd} post")}]}],
    }});
    let p = Pipe::new(&ws.hooks(settings)).await;
    let r = p.call("call-9", "bash", json!({"command": "ls -la"})).await;
    assert!(!r.is_error());
    let read = |which: &str| -> Value {
        serde_json::from_str(&ws.read(&format!("stdin-{which}.json"))).expect("stdin was JSON")
    };
    let pre = read("pre");
    let cwd = ws.root().display().to_string();
    assert_eq!(
        pre,
        json!({
            "session_id": "hooks-test",
            "transcript_path": "",
            "cwd": cwd,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "ls -la"},
            "tool_use_id": "call-9",
        })
    );
    let post = read("post");
    assert_eq!(post["hook_event_name"], "PostToolUse");
    assert_eq!(post["tool_name"], "Bash");
    assert_eq!(post["tool_response"], "bash ran: ls -la");
    // A tool without a Claude name keeps its own.
    p.call("call-10", "echo", json!({"text": "t"})).await;
    assert_eq!(read("pre")["tool_name"], "echo");
}

#[tokio::test]
async fn cc_23_hooks_run_in_the_workspace_with_claude_project_dir() {
    let ws = Ws::new();
    let cmd = ws.script(
        "where.sh",
        "#!/usr/bin/env bash\ncat >/dev/null\npwd > where.txt\necho \"$CLAUDE_PROJECT_DIR\" >> where.txt\n",
    );
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "*", &cmd))).await;
    p.call("c1", "echo", json!({"text": "x"})).await;
    let root = ws.root().canonicalize().expect("canon");
    let lines: Vec<String> = ws.read("where.txt").lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        std::path::Path::new(&lines[0]).canonicalize().expect("pwd"),
        root
    );
    assert_eq!(
        std::path::Path::new(&lines[1]).canonicalize().expect("dir"),
        root
    );
}
