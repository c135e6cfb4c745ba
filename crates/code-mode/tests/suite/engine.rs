//! The code runtime seam on QuickJS: values, logs, host calls and failures as fields.

use dsh_code_mode::{CodeErrorKind, ToolCallError};
use dsh_core::Json;
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn returns_values_as_lossless_json() {
    let o =
        run_plain("return {n: 42, ok: true, list: [1, 'x', null], big: 12345678901234567}").await;
    assert_eq!(o.error, None);
    assert_eq!(
        o.value.map(|v| v.value().clone()),
        Some(json!({"n": 42, "ok": true, "list": [1, "x", null], "big": 12345678901234568u64}))
    );
}

#[tokio::test]
async fn undefined_gives_no_value_and_logs_are_captured() {
    let o = run_plain("console.log('a', 1, {b: 2}); console.error('e'); await null;").await;
    assert_eq!(o.error, None);
    assert_eq!(o.value, None);
    assert_eq!(o.logs, vec!["a 1 {\"b\":2}".to_owned(), "e".to_owned()]);
}

#[tokio::test]
async fn host_calls_resolve_and_reject() {
    let host = fn_host(|name, args| {
        if args.value().get("fail").is_some() {
            Err(ToolCallError::new(name, "deliberate failure"))
        } else {
            Ok(Json::string(format!("{name}:ok")))
        }
    });
    let o = run_with(
        "const a = await tools.echo({}); let m; try { await tools.echo({fail: 1}) } catch (e) { m = [e.name, e.toolName, e.message, e instanceof ToolCallError] } return [a, m]",
        &["echo"],
        host.clone(),
        fast_limits(),
    )
    .await;
    assert_eq!(o.error, None, "{o:?}");
    assert_eq!(
        o.value.map(|v| v.value().clone()),
        Some(json!([
            "echo:ok",
            ["ToolCallError", "echo", "deliberate failure", true]
        ]))
    );
    assert_eq!(host.calls.lock().len(), 2);
}

#[tokio::test]
async fn exceptions_are_fields() {
    let o = run_plain("console.log('before'); throw new TypeError('boom')").await;
    let e = o.error.expect("error");
    assert_eq!(e.kind, CodeErrorKind::Exception);
    assert_eq!(e.message, "TypeError: boom");
    assert_eq!(o.logs, vec!["before".to_owned()]);
}

#[tokio::test]
async fn syntax_errors_are_exceptions() {
    let o = run_plain("return (").await;
    let e = o.error.expect("error");
    assert_eq!(e.kind, CodeErrorKind::Exception);
    assert!(e.message.starts_with("SyntaxError"), "{}", e.message);
}

#[tokio::test]
async fn infinite_loop_times_out() {
    let start = std::time::Instant::now();
    let mut limits = fast_limits();
    limits.wall_time = std::time::Duration::from_millis(200);
    let o = run_with(
        "console.log('x'); while (true) {}",
        &[],
        echo_host(),
        limits,
    )
    .await;
    let e = o.error.expect("error");
    assert_eq!(e.kind, CodeErrorKind::Timeout);
    assert!(e.message.contains("wallTime"), "{}", e.message);
    assert_eq!(o.logs, vec!["x".to_owned()]);
    assert!(start.elapsed() < std::time::Duration::from_secs(2));
}

#[tokio::test]
async fn names_are_plain_keys() {
    let o = run_with(
        "return [Object.keys(tools), await tools['__proto__']({value: 1}), Object.getPrototypeOf(tools)]",
        &["__proto__", "echo"],
        echo_host(),
        fast_limits(),
    )
    .await;
    assert_eq!(o.error, None, "{o:?}");
    assert_eq!(
        o.value.map(|v| v.value().clone()),
        Some(json!([["__proto__", "echo"], "__proto__:1", null]))
    );
}

#[tokio::test]
async fn deep_values_cross_both_ways_without_overflow() {
    let host = fn_host(|_name, args| Ok(Json::from(args.depth() as u64)));
    let o = run_with(
        "let a = 'leaf'; for (let i = 0; i < 5000; i++) a = [a]; \
         const d = await tools.depth({list: a}); \
         let r = {leaf: true}; for (let i = 0; i < 5000; i++) r = [r]; return [d, r]",
        &["depth"],
        host.clone(),
        fast_limits(),
    )
    .await;
    assert_eq!(o.error, None, "{o:?}");
    let v = o.value.expect("value");
    assert_eq!(v.value()[0], json!(5001));
    assert_eq!(v.depth(), 5002);
    let calls = host.calls.lock();
    assert_eq!(calls[0].1.depth(), 5001);
}
