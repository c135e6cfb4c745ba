//! The Messages adapter against the mock server: thinking, redacted thinking, tool use split in
//! small pieces, the request body and headers, and the API's failures.

use std::sync::Arc;

use dsh_model::{
    AssistantBlock, BlockKind, Chunk, FinishReason, Message, ModelError, Options, Provider,
    Reasoning, Request, ToolCall, Usage, assemble,
};
use dsh_test_support::mock_provider::{MockProvider, Reply, anthropic as wire};
use serde_json::json;

use super::openai::tool;
use super::{anthropic, collect};

#[tokio::test]
async fn thinking_redacted_text_and_a_split_tool_use_assemble_in_order() {
    let server = MockProvider::start().await.unwrap();
    let args = r#"{"path": "src/main.rs", "limit": 10}"#;
    let pieces: Vec<String> = args.chars().map(String::from).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let mut frames = vec![wire::message_start(25, 100), wire::ping()];
    frames.extend(wire::thinking_block(
        0,
        &["I should ", "read it."],
        "sig-abc",
    ));
    frames.extend(wire::redacted_block(1, "ENCRYPTED=="));
    frames.extend(wire::text_block(2, &["Reading ", "now."]));
    frames.push(wire::ping());
    frames.extend(wire::tool_use_block(3, "toolu_01", "read", &pieces));
    frames.extend(wire::message_end("tool_use", 77));
    server.push(Reply::Stream(frames));

    let request = Request::new("claude-sonnet-4-5", vec![Message::user("read main")])
        .with_tools(vec![tool("read")]);
    let stream = anthropic(&server).stream(Arc::new(request)).await.unwrap();
    let (chunks, error) = collect(stream).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        chunks[0],
        Chunk::BlockStart {
            index: 0,
            kind: BlockKind::Reasoning
        }
    );
    assert!(chunks.contains(&Chunk::ReasoningSignature {
        index: 0,
        signature: "sig-abc".into()
    }));
    assert!(chunks.contains(&Chunk::ReasoningRedacted {
        index: 1,
        data: "ENCRYPTED==".into()
    }));
    let deltas = chunks
        .iter()
        .filter(|c| matches!(c, Chunk::ToolCallDelta { index: 3, .. }))
        .count();
    assert_eq!(
        deltas,
        args.chars().count() + 1,
        "one per piece, after the opening one"
    );
    let tail = &chunks[chunks.len() - 2..];
    assert_eq!(
        tail,
        [
            Chunk::Usage(Usage {
                input_tokens: 25,
                output_tokens: 77,
                cache_read_tokens: 100,
                cache_write_tokens: 0,
                reasoning_tokens: 0
            }),
            Chunk::Finish(FinishReason::ToolCalls),
        ]
    );

    let mut assembler = dsh_model::Assembler::new();
    chunks.iter().for_each(|c| assembler.push(c));
    let message = assembler.finish();
    assert_eq!(
        message.blocks,
        vec![
            AssistantBlock::Reasoning {
                text: "I should read it.".into(),
                signature: Some("sig-abc".into()),
                redacted: None
            },
            AssistantBlock::Reasoning {
                text: String::new(),
                signature: None,
                redacted: Some("ENCRYPTED==".into())
            },
            AssistantBlock::Text {
                text: "Reading now.".into()
            },
            AssistantBlock::ToolCall(ToolCall {
                id: "toolu_01".into(),
                name: "read".into(),
                arguments: args.into()
            }),
        ]
    );

    let recorded = &server.requests()[0];
    assert_eq!(recorded.path, "/v1/messages");
    assert_eq!(recorded.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(recorded.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(recorded.body["max_tokens"], 8192);
    assert_eq!(recorded.body["stream"], true);
}

/// The assembled message goes back as history the API accepts: thinking with its signature,
/// redacted thinking with its data, the tool_use input embedded as the raw text, its result in
/// the next user message before the user's text, system at the top level, tools in order.
#[tokio::test]
async fn the_history_goes_back_in_the_shape_the_api_accepts() {
    let server = MockProvider::start().await.unwrap();
    server.push(wire::text_reply(&["ok"]));
    let raw = r#"{"path": "a.txt",   "n": 1.50}"#;
    let history = vec![
        Message::system("be brief"),
        Message::user("read a"),
        Message::Assistant {
            blocks: vec![
                AssistantBlock::Reasoning {
                    text: "plan".into(),
                    signature: Some("sig".into()),
                    redacted: None,
                },
                AssistantBlock::Reasoning {
                    text: "unsigned".into(),
                    signature: None,
                    redacted: None,
                },
                AssistantBlock::Reasoning {
                    text: String::new(),
                    signature: None,
                    redacted: Some("DATA".into()),
                },
                AssistantBlock::Text {
                    text: String::new(),
                },
                AssistantBlock::ToolCall(ToolCall {
                    id: "toolu_1".into(),
                    name: "read".into(),
                    arguments: raw.into(),
                }),
                AssistantBlock::ToolCall(ToolCall {
                    id: "toolu_2".into(),
                    name: "list".into(),
                    arguments: "not json".into(),
                }),
            ],
        },
        Message::tool_result("toolu_1", "contents"),
        Message::user("also this"),
        Message::ToolResult {
            call_id: "toolu_2".into(),
            content: dsh_core::text_content("failed"),
            is_error: true,
        },
    ];
    let options = Options {
        max_tokens: Some(2000),
        reasoning: Some(Reasoning::Budget(1024)),
        parallel_tool_calls: Some(false),
        ..Options::default()
    };
    let request = Request::new("claude-x", history)
        .with_tools(vec![tool("zeta"), tool("alpha")])
        .with_options(options);
    let (_, error) = collect(anthropic(&server).stream(Arc::new(request)).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    let recorded = &server.requests()[0];
    assert_eq!(recorded.refused, None);
    let body = &recorded.body;
    assert_eq!(body["system"], "be brief");
    assert_eq!(body["max_tokens"], 2000);
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 1024})
    );
    assert_eq!(
        body["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": true})
    );
    assert_eq!(body["tools"][0]["name"], "zeta");
    assert_eq!(body["tools"][1]["input_schema"]["type"], "object");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "read a"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "plan", "signature": "sig"},
                {"type": "redacted_thinking", "data": "DATA"},
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt", "n": 1.50}},
                {"type": "tool_use", "id": "toolu_2", "name": "list", "input": {"_raw_arguments": "not json"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "contents"}], "is_error": false},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "failed"}], "is_error": true},
                {"type": "text", "text": "also this"},
            ]},
        ])
    );
    assert!(
        recorded.raw.contains(raw),
        "the input is the model's raw text: {}",
        recorded.raw
    );
}

#[tokio::test]
async fn a_history_starting_with_the_assistant_is_refused_with_the_api_message() {
    let server = MockProvider::start().await.unwrap();
    let history = vec![Message::Assistant {
        blocks: vec![AssistantBlock::Text { text: "hi".into() }],
    }];
    let Err(error) = anthropic(&server)
        .stream(Arc::new(Request::new("claude-x", history)))
        .await
    else {
        panic!("refused");
    };
    let ModelError::BadRequest { message, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(
        message,
        "messages: first message must use the \"user\" role"
    );
}

#[tokio::test]
async fn a_refused_key_names_anthropic_api_key() {
    let server = MockProvider::start().await.unwrap();
    server.require_key("sk-ant-other");
    let request = Arc::new(Request::new("claude-x", vec![Message::user("hi")]));
    let Err(error) = anthropic(&server).stream(request).await else {
        panic!("401")
    };
    assert!(
        matches!(&error, ModelError::Unauthorized { key_env, message, .. }
            if key_env == "ANTHROPIC_API_KEY" && message == "invalid x-api-key"),
        "{error:?}"
    );
}

#[tokio::test]
async fn overloaded_529_is_retried_and_an_error_event_fails_the_stream() {
    let server = MockProvider::start().await.unwrap();
    server.push(wire::error(529, "overloaded_error", "Overloaded"));
    let mut frames = vec![wire::message_start(5, 0)];
    frames.extend(wire::text_block(0, &["par"]));
    frames.push(wire::error_event("overloaded_error", "Overloaded"));
    server.push(Reply::Stream(frames));
    let request = Arc::new(Request::new("claude-x", vec![Message::user("hi")]));
    let (chunks, error) = collect(anthropic(&server).stream(request).await.unwrap()).await;
    let Some(ModelError::StreamError { kind, message, .. }) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(
        (kind.as_str(), message.as_str()),
        ("overloaded_error", "Overloaded")
    );
    assert!(chunks.contains(&Chunk::TextDelta {
        index: 0,
        text: "par".into()
    }));
    assert_eq!(
        server.requests().len(),
        2,
        "the 529 once, then the stream, never again"
    );
}

#[tokio::test]
async fn a_stream_without_message_stop_is_a_stream_error() {
    let server = MockProvider::start().await.unwrap();
    let mut frames = vec![wire::message_start(5, 0)];
    frames.extend(wire::text_block(0, &["cut short"]));
    server.push(Reply::Stream(frames));
    let request = Arc::new(Request::new("claude-x", vec![Message::user("hi")]));
    let message = assemble(anthropic(&server).stream(request).await.unwrap()).await;
    assert!(
        matches!(
            message,
            Err(ModelError::StreamEnded {
                expected: "message_stop",
                ..
            })
        ),
        "{message:?}"
    );
}

#[tokio::test]
async fn a_tool_use_with_no_input_deltas_has_empty_object_arguments() {
    let server = MockProvider::start().await.unwrap();
    let mut frames = vec![wire::message_start(5, 0)];
    frames.extend(wire::tool_use_block(0, "toolu_9", "now", &[]));
    frames.extend(wire::message_end("tool_use", 3));
    server.push(Reply::Stream(frames));
    let request = Arc::new(Request::new("claude-x", vec![Message::user("time?")]));
    let message = assemble(anthropic(&server).stream(request).await.unwrap())
        .await
        .unwrap();
    let calls: Vec<&ToolCall> = message.tool_calls().collect();
    assert_eq!(calls[0].arguments, "{}");
}
