//! The model-visible history (spec I3, L5; CODE-68) and its OpenAI / Anthropic exports.

use std::sync::Arc;

use dsh_core::{ContextMessage, ErrorInfo, Json};
use dsh_session::{
    Event, Session, SurfaceOp, derive_messages, derive_messages_from, read_log, to_anthropic,
    to_openai,
};
use serde_json::{Value, json};

use super::support::{fixture_dir, j, put, text};

fn values(messages: &[Json]) -> Vec<Value> {
    messages.iter().map(|m| m.value().clone()).collect()
}

fn user(text: &str) -> ContextMessage {
    let mut m = ContextMessage::plugin_text("x", text);
    m.source = j(json!({"kind": "user"}));
    m
}

/// One step: a prompt, two calls (one failing), their results, a context after the results.
async fn sample() -> Session {
    let s = Session::in_memory("d");
    put(&s, Event::turn_start(1)).await;
    put(&s, Event::step_start(1, 1)).await;
    put(&s, Event::user_message(&user("read two files"))).await;
    let assistant = j(json!({"role": "assistant", "content": [
        {"type": "reasoning", "text": "thinking"},
        {"type": "text", "text": "Reading."},
        {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{\"path\":\"a\"}"},
        {"type": "tool-call", "id": "c2", "name": "read", "arguments": "not json"}
    ]}));
    put(&s, Event::assistant_message(1, 1, assistant)).await;
    let c1 = put(&s, Event::tool_call(1, 1, "c1", "read", "{\"path\":\"a\"}")).await;
    let c2 = put(&s, Event::tool_call(1, 1, "c2", "read", "not json")).await;
    put(
        &s,
        Event::tool_result(1, 1, "c1", c1, text("alpha"), false, None, None),
    )
    .await;
    let info = ErrorInfo {
        name: Arc::from("ToolArgsError"),
        code: Arc::from("INVALID_ARGS"),
    };
    put(
        &s,
        Event::tool_result(1, 1, "c2", c2, text("Error: bad"), true, Some(&info), None),
    )
    .await;
    put(
        &s,
        Event::code_dispatch_start("c1", "c1", "c1:code:1", "x", j(json!({}))),
    )
    .await;
    put(
        &s,
        Event::user_message(&ContextMessage::plugin_text("goal", "ctx-c1")),
    )
    .await;
    put(&s, Event::step_end(1, 1)).await;
    s
}

#[tokio::test]
async fn code_68_code_dispatch_records_are_log_only() {
    let s = Session::in_memory("c");
    put(&s, Event::user_message(&user("hi"))).await;
    let args = j(json!({"value": "v"}));
    put(
        &s,
        Event::code_dispatch_start("r", "r", "r:code:1", "echo", args.clone()),
    )
    .await;
    put(
        &s,
        Event::code_dispatch(
            "r",
            "r",
            "r:code:1",
            "echo",
            args.clone(),
            false,
            text("echo:v"),
        ),
    )
    .await;
    let messages = derive_messages(&s.events());
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].value()["role"], json!("user"));
    assert_eq!(
        messages[0].value()["content"],
        json!([{"type": "text", "text": "hi"}])
    );
}

#[tokio::test]
async fn the_history_holds_prompts_assistant_messages_results_and_contexts_in_log_order() {
    let s = sample().await;
    let messages = values(&derive_messages(&s.events()));
    assert_eq!(messages.len(), 5);
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "user", "user"]);
    assert_eq!(messages[2]["content"][0]["toolCallId"], json!("c1"));
    assert_eq!(
        messages[2]["source"],
        json!({"kind": "tool", "callId": "c1"})
    );
    assert_eq!(messages[3]["content"][0]["isError"], json!(true));
    assert_eq!(
        messages[4]["source"],
        json!({"kind": "plugin", "plugin": "goal"})
    );
}

#[tokio::test]
async fn an_assistant_message_without_content_is_not_model_visible() {
    let s = Session::in_memory("m");
    put(&s, Event::user_message(&user("go"))).await;
    put(
        &s,
        Event::assistant_message(1, 1, j(json!({"role": "assistant", "content": []}))),
    )
    .await;
    let messages = derive_messages(&s.events());
    assert_eq!(messages.len(), 1, "only the user message (LOG-12)");
}

#[tokio::test]
async fn a_replace_surface_op_swaps_the_range_for_its_message_in_place() {
    let s = Session::in_memory("r");
    let a = put(&s, Event::user_message(&user("one"))).await;
    let b = put(&s, Event::user_message(&user("two"))).await;
    put(&s, Event::user_message(&user("three"))).await;
    let op = j(json!({"op": "replace", "startSeq": a, "endSeq": b}));
    let summary = Event::user_message(&user("summary of one and two"))
        .with_surface_op(SurfaceOp::Other(op))
        .with_source_event_seqs(vec![a, b]);
    put(&s, summary).await;
    let texts: Vec<String> = derive_messages(&s.events())
        .iter()
        .map(|m| {
            m.value()["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(texts, ["summary of one and two", "three"]);
}

#[test]
fn older_flat_shapes_in_the_reference_logs_read_as_messages() {
    let bytes = std::fs::read(fixture_dir().join("apps-code-mode-round.jsonl")).expect("fixture");
    let log = read_log(&bytes).expect("reads");
    let messages = values(&derive_messages_from(
        log.events.iter().map(|(s, e)| (*s, e)),
    ));
    let result = messages
        .iter()
        .find(|m| m["content"][0]["type"] == "tool-result")
        .expect("the flat tool/result becomes a message");
    assert_eq!(result["role"], json!("user"));
    assert_eq!(
        result["content"][0]["toolCallId"],
        json!("call_00_6VNoF1gDSerTBKoCfYSH3765")
    );
    assert_eq!(result["content"][0]["isError"], json!(false));
    let first_user = &messages[0];
    assert_eq!(first_user["role"], json!("user"));
    assert!(messages.iter().any(|m| {
        m["role"] == "assistant"
            && m["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "tool-call"))
    }));
}

#[tokio::test]
async fn openai_export_has_tool_calls_then_tool_messages_by_call_id() {
    let s = sample().await;
    let exported = to_openai(&derive_messages(&s.events()));
    assert_eq!(
        *exported.value(),
        json!([
            {"role": "user", "content": "read two files"},
            {"role": "assistant", "content": "Reading.", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "read", "arguments": "not json"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "alpha"},
            {"role": "tool", "tool_call_id": "c2", "content": "Error: bad"},
            {"role": "user", "content": "ctx-c1"}
        ])
    );
}

#[tokio::test]
async fn anthropic_export_has_tool_use_and_tool_result_blocks_with_alternating_roles() {
    let s = sample().await;
    let exported = to_anthropic(&derive_messages(&s.events()));
    assert_eq!(
        *exported.value(),
        json!([
            {"role": "user", "content": [{"type": "text", "text": "read two files"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "c2", "name": "read", "input": {"_raw_arguments": "not json"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "alpha"}], "is_error": false},
                {"type": "tool_result", "tool_use_id": "c2", "content": [{"type": "text", "text": "Error: bad"}], "is_error": true},
                {"type": "text", "text": "ctx-c1"}
            ]}
        ])
    );
}

#[tokio::test]
async fn images_export_in_each_providers_shape() {
    let s = Session::in_memory("img");
    let block = dsh_core::ContentBlock::Image {
        data: Arc::from("AAAA"),
        mime_type: Arc::from("image/png"),
    };
    let mut ctx = user("look");
    ctx.content = Arc::from(vec![dsh_core::ContentBlock::text("look"), block]);
    put(&s, Event::user_message(&ctx)).await;
    let messages = derive_messages(&s.events());
    assert_eq!(
        to_openai(&messages).value()[0]["content"][1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})
    );
    assert_eq!(
        to_anthropic(&messages).value()[0]["content"][1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})
    );
}
