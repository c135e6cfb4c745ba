//! Hook errors: crash, timeout (the hook and its children are killed), invalid JSON, and
//! `updatedInput`. By default they are reported and change nothing; `"onFailure": "block"`
//! makes them fail closed.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::*;

fn hook_with(point: &str, matcher: &str, hook: Value) -> Value {
    json!({"hooks": {point: [{"matcher": matcher, "hooks": [hook]}]}})
}

const CRASH_PY: &str = r#"#!/usr/bin/env python3
import json, sys
data = json.load(sys.stdin)
raise RuntimeError("hook exploded on " + data["tool_name"])
"#;

const INVALID_JSON_SH: &str = "#!/usr/bin/env bash\ncat >/dev/null\necho '{\"hookSpecificOutput\": {\"permissionDecision\": '\n";

fn assert_error_reported(p: &Pipe, contains: &str, fail_closed: bool) {
    let res = p.events("hook/result");
    assert_eq!(res.len(), 1);
    let error = res[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(contains),
        "error {error:?} lacks {contains:?}"
    );
    assert_eq!(res[0]["failClosed"] == json!(true), fail_closed);
    let decision = if fail_closed { "deny" } else { "error" };
    assert_eq!(res[0]["decision"], decision);
}

#[tokio::test]
async fn cc_10_a_crashing_hook_is_reported_and_changes_nothing() {
    let ws = Ws::new();
    let cmd = ws.script("crash.py", CRASH_PY);
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "Bash", &cmd))).await;
    let r = p.call("c1", "bash", json!({"command": "ls"})).await;
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(p.ran(), vec!["bash:ls"]);
    assert_error_reported(&p, "exited with status 1", false);
    let res = &p.events("hook/result")[0];
    assert_eq!(res["exitCode"], 1);
    assert!(
        res["stderrSummary"]
            .as_str()
            .unwrap_or_default()
            .contains("hook exploded on Bash"),
        "{res}"
    );
}

#[tokio::test]
async fn cc_11_a_hook_that_overruns_its_timeout_is_killed_with_its_children() {
    let ws = Ws::new();
    let pidfile = ws.root().join("child.pid");
    let script = format!(
        "#!/usr/bin/env bash\nsleep 30 &\necho $! > '{}'\nwait\n",
        pidfile.display()
    );
    let cmd = ws.script("slow.sh", &script);
    let settings = hook_with(
        "PreToolUse",
        "*",
        json!({"type": "command", "command": cmd, "timeout": 0.5}),
    );
    let p = Pipe::new(&ws.hooks(settings)).await;
    let started = Instant::now();
    let r = p.call("c1", "echo", json!({"text": "x"})).await;
    let took = started.elapsed();
    assert!(
        !r.is_error(),
        "a timeout does not change the decision: {r:?}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(took >= Duration::from_millis(450), "took {took:?}");
    assert_error_reported(&p, "timed out after 0.500s", false);
    assert!(p.events("hook/result")[0].get("exitCode").is_none());
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .expect("the hook started its child")
        .trim()
        .parse()
        .expect("pid");
    assert!(
        process_gone(pid, Duration::from_secs(3)),
        "the hook's child {pid} still runs"
    );
}

#[tokio::test]
async fn cc_12_default_timeout_is_sixty_seconds() {
    let ws = Ws::new();
    let claude = ws.hooks(one_hook("PreToolUse", "", "true"));
    let (_, hook) = claude
        .settings()
        .matching(dsh_hooks::HookEvent::PreToolUse, "echo")
        .next()
        .expect("one hook");
    assert_eq!(hook.timeout, Duration::from_secs(60));
}

#[tokio::test]
async fn cc_13_invalid_json_is_a_hook_error() {
    let ws = Ws::new();
    let cmd = ws.script("bad.sh", INVALID_JSON_SH);
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "*", &cmd))).await;
    let r = p.call("c1", "echo", json!({"text": "x"})).await;
    assert!(!r.is_error());
    assert_error_reported(&p, "invalid JSON output", false);
    assert_eq!(p.events("hook/result")[0]["exitCode"], 0);
}

#[tokio::test]
async fn cc_14_fail_closed_is_opt_in() {
    let ws = Ws::new();
    let crash = ws.script("crash.py", CRASH_PY);
    let bad = ws.script("bad.sh", INVALID_JSON_SH);
    let slow = ws.script("slow.sh", "#!/usr/bin/env bash\nexec sleep 30\n");
    for (cmd, timeout, expect) in [
        (&crash, 60.0, "exited with status 1"),
        (&bad, 60.0, "invalid JSON output"),
        (&slow, 0.3, "timed out"),
    ] {
        let settings = hook_with(
            "PreToolUse",
            "*",
            json!({"type": "command", "command": cmd, "timeout": timeout, "onFailure": "block"}),
        );
        let p = Pipe::new(&ws.hooks(settings)).await;
        let r = p.call("c1", "echo", json!({"text": "x"})).await;
        assert!(r.is_error(), "{cmd}: fails closed");
        let t = text(&r);
        assert!(t.contains("fails closed") && t.contains(expect), "{t}");
        assert!(p.ran().is_empty());
        assert_error_reported(&p, expect, true);
    }
    // A PostToolUse hook that fails closed blocks the result.
    let settings = hook_with(
        "PostToolUse",
        "*",
        json!({"type": "command", "command": crash, "onFailure": "block"}),
    );
    let p = Pipe::new(&ws.hooks(settings)).await;
    let r = p.call("c1", "echo", json!({"text": "x"})).await;
    assert!(r.is_error());
    assert!(text(&r).contains("PostToolUse hook"), "{}", text(&r));
    assert_eq!(
        p.ran(),
        vec!["echo:x"],
        "the body ran; its result was blocked"
    );
    assert_eq!(p.events("hook/result")[0]["decision"], "block");
}

#[tokio::test]
async fn cc_15_updated_input_is_refused_as_a_hook_error() {
    let ws = Ws::new();
    let rewrite = ws.script(
        "rewrite.py",
        r#"#!/usr/bin/env python3
import json, sys
data = json.load(sys.stdin)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "permissionDecision": "allow", "updatedInput": {"command": "echo safe"}}}))
"#,
    );
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "Bash", &rewrite))).await;
    let r = p
        .call("c1", "bash", json!({"command": "echo original"}))
        .await;
    assert!(!r.is_error());
    assert_eq!(
        p.ran(),
        vec!["bash:echo original"],
        "arguments are never rewritten"
    );
    assert_error_reported(&p, "updatedInput", false);

    // Fail-closed, the same output denies.
    let settings = hook_with(
        "PreToolUse",
        "Bash",
        json!({"type": "command", "command": rewrite, "onFailure": "block"}),
    );
    let p = Pipe::new(&ws.hooks(settings)).await;
    let r = p
        .call("c1", "bash", json!({"command": "echo original"}))
        .await;
    assert!(r.is_error());
    assert!(text(&r).contains("updatedInput"), "{}", text(&r));
    assert!(p.ran().is_empty());

    // A deny next to an updatedInput is still a deny: an error never weakens a decision.
    let deny_rewrite = ws.script(
        "deny_rewrite.sh",
        "#!/usr/bin/env bash\ncat >/dev/null\necho '{\"hookSpecificOutput\": {\"permissionDecision\": \"deny\", \"permissionDecisionReason\": \"no\", \"updatedInput\": {}}}'\n",
    );
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "*", &deny_rewrite))).await;
    let r = p.call("c1", "echo", json!({"text": "x"})).await;
    assert_eq!(text(&r), "Error: no");
}

#[tokio::test]
async fn cc_16_a_missing_command_is_a_hook_error() {
    let ws = Ws::new();
    let p = Pipe::new(&ws.hooks(one_hook(
        "PreToolUse",
        "*",
        "/nonexistent/dsh-hook-that-is-not-there",
    )))
    .await;
    let r = p.call("c1", "echo", json!({"text": "x"})).await;
    assert!(!r.is_error());
    assert_error_reported(&p, "exited with status 127", false);
}

#[tokio::test]
async fn can_a_cancelled_call_stops_its_hook() {
    use dsh_core::{AbortController, AbortReason, CancelCause};
    let ws = Ws::new();
    let slow = ws.script("slow.sh", "#!/usr/bin/env bash\nexec sleep 30\n");
    let p = Pipe::new(&ws.hooks(one_hook("PreToolUse", "*", &slow))).await;
    let ctl = AbortController::new();
    let input =
        dsh_test_support::input("c1", "echo", json!({"text": "x"})).with_signal(ctl.signal());
    let c = ctl.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.abort(AbortReason::Cancelled(CancelCause::User));
    });
    let started = Instant::now();
    let r = p.runtime.execute(input).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(r.is_error());
    assert!(p.ran().is_empty());
    assert_error_reported(&p, "aborted", false);
}
