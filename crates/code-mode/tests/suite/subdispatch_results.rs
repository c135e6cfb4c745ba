//! What a sub-call's caller and the outer result see (CODE-38..47, 59..63, 68): rejections and
//! their messages, dispatch-log listeners, argument checks and copies, deferred contexts and
//! images, the settle record's content, and records kept out of the model history.

use std::sync::Arc;

use dsh_code_mode::PresentationMode;
use dsh_core::{
    ContentBlock, ContextMessage, Failure, Json, PostToolDecision, PreToolDecision, Replacement,
    ToolDefinition, ToolExecution, ToolOutput, ToolResult, text_content,
};
use dsh_guard::Scope;
use dsh_test_support::{PostFn, PreFn, Recorder, context_texts};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::support::*;

#[tokio::test]
async fn code_38_a_body_failure_rejects_with_the_bare_message() {
    let failing = tool_fn("fails", true, |_| async {
        Err(Failure::new("deliberate failure"))
    });
    let h = Harness::new(vec![failing], |_| {}).await;
    let r = h
        .run_code("try { await tools.fails({}) } catch (e) { return 'caught: ' + e.message }")
        .await;
    assert_eq!(text(&r), "caught: deliberate failure");
}

#[tokio::test]
async fn code_39_a_failing_dispatch_log_listener_keeps_the_original_content() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let _l = h
        .code
        .dispatch_log()
        .on(|_record, _next| panic!("listener exploded"));
    let r = h.run_code("return await tools.echo({value: 'x'})").await;
    assert!(!r.is_error());
    let settle = h
        .dispatch_records()
        .into_iter()
        .find(|(t, _)| t == "tool/code-dispatch")
        .expect("settled");
    assert_eq!(
        settle.1["content"],
        json!([{"type": "text", "text": "echo:x"}])
    );
    assert_eq!(settle.1["isError"], json!(false));
}

#[tokio::test]
async fn dispatch_log_listener_shapes_the_logged_content() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let _l = h.code.dispatch_log().on(|record, next| {
        if record.exec.name() == "echo" {
            text_content("[redacted]")
        } else {
            next.run(record)
        }
    });
    let r = h
        .run_code("return await tools.echo({value: 'secret'})")
        .await;
    assert_eq!(
        value_of(&r)["result"],
        json!("echo:secret"),
        "the program still sees the value"
    );
    let settle = h
        .dispatch_records()
        .into_iter()
        .find(|(t, _)| t == "tool/code-dispatch")
        .expect("settled");
    assert_eq!(
        settle.1["content"],
        json!([{"type": "text", "text": "[redacted]"}])
    );
}

#[tokio::test]
async fn code_40_a_failing_pre_execute_listener_rejects_and_skips_the_rest() {
    let ran = Arc::new(Mutex::new(0));
    let r2 = ran.clone();
    let sub = tool_fn("sub", true, move |_| {
        let r = r2.clone();
        async move {
            *r.lock() += 1;
            Ok(Json::string("ran"))
        }
    });
    let h = Harness::new(vec![sub], |_| {}).await;
    let _pre = h.hooks.on_pre_execute(
        Scope::Global,
        PreFn(|exec: &ToolExecution| {
            if exec.name() == "sub" {
                Err(Failure::new("gate exploded"))
            } else {
                Ok(None)
            }
        }),
    );
    let post = Recorder::new();
    let p2 = post.clone();
    let _post = h.hooks.on_post_execute(
        Scope::Global,
        PostFn(move |exec: &ToolExecution, _r: &ToolResult, d| {
            p2.push(exec.name());
            Ok(d)
        }),
    );
    let r = h
        .run_code("try { await tools.sub({}) } catch (e) { return e.message }")
        .await;
    assert_eq!(value_of(&r)["result"], json!("gate exploded"));
    assert_eq!(*ran.lock(), 0);
    assert_eq!(post.entries(), ["run_code"]);
    let settles: Vec<Value> = h
        .dispatch_records()
        .into_iter()
        .filter(|(t, _)| t == "tool/code-dispatch")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(settles.len(), 1);
    assert_eq!(settles[0]["isError"], json!(true));
}

#[tokio::test]
async fn code_41_a_denial_rejects_with_its_reason() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let _pre = h.hooks.on_pre_execute(
        Scope::Global,
        PreFn(|exec: &ToolExecution| {
            Ok((exec.name() == "echo").then(|| PreToolDecision::deny("not on my watch")))
        }),
    );
    let r = h
        .run_code("try { await tools.echo({value: 'x'}); return 'ran' } catch (e) { return [e.name, e.toolName, e.message] }")
        .await;
    let v = value_of(&r)["result"].clone();
    assert_eq!(v[0], json!("ToolCallError"));
    assert_eq!(v[1], json!("echo"));
    assert!(v[2].as_str().expect("message").contains("not on my watch"));
}

#[tokio::test]
async fn code_42_non_json_arguments_are_rejected_before_dispatch() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let r = h
        .run_code("try { await tools.echo({value: 'x', big: 10n}) } catch (e) { return e.message }")
        .await;
    let m = value_of(&r)["result"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(m.contains("lossless JSON"), "{m}");
    assert!(
        h.dispatch_records().is_empty(),
        "nothing dispatched, nothing logged"
    );
}

#[tokio::test]
async fn code_43_62_prototype_less_arguments_arrive_as_plain_equal_copies() {
    let got = Arc::new(Mutex::new(None));
    let g2 = got.clone();
    let probe = tool_fn("probe", true, move |ctx| {
        let g = g2.clone();
        async move {
            *g.lock() = ctx.arguments().json().cloned();
            Ok(Json::string("ok"))
        }
    });
    let h = Harness::new(vec![probe], |_| {}).await;
    let r = h
        .run_code(
            "const o = Object.create(null); o.value = 'x'; o.nested = [Object.assign(Object.create(null), {value: 'x'})]; \
             const list = ['original']; await tools.probe(o); await tools.probe({list}); list.push('changed'); return 'ok'",
        )
        .await;
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(
        got.lock().as_ref().map(|j| j.value().clone()),
        Some(json!({"list": ["original"]}))
    );
    let logged: Vec<Value> = h
        .dispatch_records()
        .into_iter()
        .filter(|(t, _)| t == "tool/code-dispatch")
        .map(|(_, d)| d["arguments"].clone())
        .collect();
    assert_eq!(
        logged,
        [
            json!({"value": "x", "nested": [{"value": "x"}]}),
            json!({"list": ["original"]})
        ]
    );
}

#[tokio::test]
async fn code_44_sub_call_contexts_are_deferred_onto_the_outer_result_in_order() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let _post = h.hooks.on_post_execute(
        Scope::Global,
        PostFn(
            |exec: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                Ok(if exec.parent().is_some() {
                    d.push_context(ContextMessage::plugin_text(
                        "test",
                        format!("context for {}", exec.call_id()),
                    ))
                } else {
                    d
                })
            },
        ),
    );
    let r = h
        .run_code("await tools.echo({value: '1'}); await tools.echo({value: '2'}); return 'done'")
        .await;
    let contexts = r.additional_contexts();
    assert_eq!(
        context_texts(&r),
        ["context for call-1:code:1", "context for call-1:code:2"]
    );
    for c in contexts.iter() {
        assert_eq!(&*c.role, "user");
        assert_eq!(c.plugin(), Some("test"));
    }
}

fn image_tool() -> ToolDefinition {
    ToolDefinition::builder("snap", "Returns a picture")
        .output(ToolOutput::content_blocks())
        .concurrency_safe(true)
        .execute(|_| async {
            Ok(Json::new(json!([
                {"type": "text", "text": "a picture"},
                {"type": "image", "data": "aGk=", "mimeType": "image/png"}
            ]))
            .expect("json"))
        })
        .build()
        .expect("snap")
}

#[tokio::test]
async fn code_45_images_are_deferred_as_one_context() {
    let h = Harness::new(vec![image_tool()], |_| {}).await;
    let r = h
        .run_code("const v = await tools.snap({}); return v.length")
        .await;
    assert_eq!(value_of(&r)["result"], json!(2));
    let contexts = r.additional_contexts();
    assert_eq!(contexts.len(), 1);
    assert_eq!(&*contexts[0].role, "user");
    assert_eq!(
        contexts[0].source.value(),
        &json!({"kind": "plugin", "plugin": "tools-code-mode"})
    );
    assert_eq!(contexts[0].content.len(), 2);
    assert!(matches!(contexts[0].content[1], ContentBlock::Image { .. }));
}

#[tokio::test]
async fn code_46_an_image_is_deferred_only_if_it_survives_post_execute() {
    for block in [true, false] {
        let h = Harness::new(vec![image_tool()], |_| {}).await;
        let _post = h.hooks.on_post_execute(
            Scope::Global,
            PostFn(move |exec: &ToolExecution, _r: &ToolResult, d| {
                if exec.name() != "snap" {
                    return Ok(d);
                }
                Ok(if block {
                    PostToolDecision::block(text_content("no pictures"))
                } else {
                    PostToolDecision::Accept {
                        replace: Some(Replacement::Content(text_content("described"))),
                        contexts: vec![],
                    }
                })
            }),
        );
        let r = h
            .run_code("try { await tools.snap({}) } catch (e) {} return 1")
            .await;
        assert!(r.additional_contexts().is_empty(), "block={block}");
    }
}

#[tokio::test]
async fn code_47_contexts_survive_a_failed_program() {
    let h = Harness::new(vec![echo_tool()], |c| c.mode = PresentationMode::Both).await;
    let _post = h.hooks.on_post_execute(
        Scope::Global,
        PostFn(
            |exec: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                Ok(if exec.parent().is_some() {
                    d.push_context(ContextMessage::plugin_text("test", "nested context"))
                } else {
                    d
                })
            },
        ),
    );
    let r = h
        .run_code("await tools.echo({value: 'x'}); throw new Error('after')")
        .await;
    assert!(r.is_error());
    assert_eq!(context_texts(&r), ["nested context"]);
}

#[tokio::test]
async fn code_59_the_settle_record_keeps_the_whole_sub_content() {
    let long = "l".repeat(300);
    let l2 = long.clone();
    let mixed = ToolDefinition::builder("mixed", "Mixed content")
        .output(ToolOutput::new(
            Json::from_shallow(json!({"type": "string"})),
            move |_v| {
                Ok(Arc::from(vec![
                    ContentBlock::text(l2.as_str()),
                    ContentBlock::from_value(json!({"type": "reasoning", "text": "thinking"}))
                        .map_err(|e| Failure::new(e.to_string()))?,
                ]))
            },
        ))
        .concurrency_safe(true)
        .execute(|_| async { Ok(Json::string("mixed-value")) })
        .build()
        .expect("mixed");
    let h = Harness::new(vec![mixed], |_| {}).await;
    let r = h.run_code("return await tools.mixed({})").await;
    assert_eq!(text(&r), "mixed-value");
    let settle = h
        .dispatch_records()
        .into_iter()
        .find(|(t, _)| t == "tool/code-dispatch")
        .expect("settled");
    assert_eq!(
        settle.1["content"],
        json!([{"type": "text", "text": long}, {"type": "reasoning", "text": "thinking"}])
    );
}

#[tokio::test]
async fn code_60_argument_rejections_before_dispatch() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let r = h
        .run_code(
            "const msgs = []; \
             const attempt = async (f) => { try { await f(); msgs.push('dispatched') } catch (e) { msgs.push(e.message) } }; \
             await attempt(() => tools.echo()); \
             await attempt(() => tools.echo({get value() { throw 'raw-throw' }})); \
             await attempt(() => tools.echo({get value() { throw new Error('error-throw') }})); \
             await attempt(() => tools.echo({value: new Map()})); \
             await attempt(() => tools.echo({value: () => 1})); \
             return msgs",
        )
        .await;
    let msgs: Vec<String> = serde_json::from_value(value_of(&r)["result"].clone()).expect("list");
    assert!(
        msgs[0].contains("call the tool with an arguments object"),
        "{msgs:?}"
    );
    assert!(msgs[1].contains("lossless JSON: raw-throw"), "{msgs:?}");
    assert!(msgs[2].contains("lossless JSON: error-throw"), "{msgs:?}");
    let total: usize = msgs
        .iter()
        .map(|m| m.matches("tool arguments must be lossless JSON").count())
        .sum();
    assert_eq!(total, 5, "{msgs:?}");
    assert!(h.dispatch_records().is_empty());
    // The Rust analogue: text that is not JSON never reaches the host.
    let host = echo_host();
    let bindings = dsh_code_mode::Bindings::new(vec![Arc::from("echo")], host.clone());
    let e = bindings
        .call("echo", Some("{not json"))
        .await
        .expect_err("rejected");
    assert!(
        e.message
            .starts_with("tool arguments must be lossless JSON: "),
        "{}",
        e.message
    );
    let e = bindings.call("echo", None).await.expect_err("rejected");
    assert!(e.message.contains("call the tool with an arguments object"));
    assert!(host.calls.lock().is_empty());
}

#[tokio::test]
async fn code_61_deep_arguments_reach_the_tool_and_the_durable_log() {
    let depth_tool = tool_fn("depth", true, |ctx| async move {
        // Walk by reference: a recursive copy of a 5,000-deep value is exactly what must not
        // happen anywhere on the way.
        let args = ctx
            .arguments()
            .json()
            .cloned()
            .ok_or_else(|| Failure::new("no args"))?;
        let mut cur = args
            .value()
            .get("list")
            .ok_or_else(|| Failure::new("no list"))?;
        let mut d = 0u64;
        while let Some(next) = cur
            .as_array()
            .filter(|a| a.len() == 1)
            .and_then(|a| a.first())
        {
            d += 1;
            cur = next;
        }
        if cur != &json!("leaf") {
            return Err(Failure::new("unexpected shape"));
        }
        Ok(Json::string(d.to_string()))
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("session.jsonl");
    let (session, _) = dsh_session::Session::open_jsonl(&path, dsh_session::OpenOptions::new())
        .await
        .expect("open");
    session
        .append(dsh_session::Event::turn_start(1))
        .await
        .expect("turn");
    let s2 = session.clone();
    let h = Harness::new(vec![depth_tool], move |c| {
        let s = s2.clone();
        c.sessions = Some(Arc::new(move |_exec: &ToolExecution| Some(s.clone())));
    })
    .await;
    let r = h
        .run_code("let a = 'leaf'; for (let i = 0; i < 5000; i++) a = [a]; return Number(await tools.depth({list: a}))")
        .await;
    assert_eq!(value_of(&r), json!({"logs": [], "result": 5000}));
    drop(h);
    session.close().await.expect("close");
    let text = std::fs::read_to_string(&path).expect("read");
    let line = text
        .lines()
        .find(|l| l.contains("\"tool/code-dispatch\""))
        .expect("durable settle record");
    let event = Json::parse(line).expect("parses");
    let args = &event.value()["data"]["arguments"]["list"];
    let mut d = 0;
    let mut cur = args;
    while let Some(next) = cur.as_array().and_then(|a| a.first()) {
        d += 1;
        cur = next;
    }
    assert_eq!((d, cur.clone()), (5000, json!("leaf")));
}

#[tokio::test]
async fn code_63_a_tool_named_proto_is_an_ordinary_binding() {
    let proto = tool_fn("__proto__", true, |_| async {
        Ok(Json::string("proto-tool-ok"))
    });
    let h = Harness::new(vec![proto], |_| {}).await;
    let r = h
        .run_code("return [Object.getPrototypeOf(tools), Object.keys(tools), await tools['__proto__']({})]")
        .await;
    assert_eq!(
        value_of(&r)["result"],
        json!([null, ["__proto__"], "proto-tool-ok"])
    );
}

#[tokio::test]
async fn code_68_dispatch_records_never_enter_the_model_history() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let session = dsh_session::Session::in_memory("history");
    session
        .append(dsh_session::Event::user_message(
            &ContextMessage::plugin_text("user", "hello"),
        ))
        .await
        .expect("user");
    h.sessions.insert(None, session.clone());
    let r = h.run_code("return await tools.echo({value: 'x'})").await;
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(
        session
            .events()
            .pairs()
            .filter(|(_, e)| e.event_type() == "tool/code-dispatch")
            .count(),
        1
    );
    let messages = dsh_session::derive_messages(&session.events());
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].value()["role"], json!("user"));
}
