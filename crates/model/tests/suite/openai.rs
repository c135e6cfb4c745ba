//! The Chat Completions adapter against the mock server: what streams, what is assembled, and
//! the request body the server received.

use std::sync::Arc;

use dsh_core::{Json, ToolSchema};
use dsh_model::{
    AssistantBlock, BlockKind, Chunk, Effort, FinishReason, Message, ModelError, Options, Provider,
    Reasoning, Request, ToolCall, Usage, assemble,
};
use dsh_test_support::mock_provider::{MockProvider, Reply, openai as wire};
use serde_json::json;

use super::{collect, openai};

pub fn tool(name: &str) -> ToolSchema {
    ToolSchema {
        name: name.into(),
        description: format!("the {name} tool").into(),
        parameters: Json::new(
            json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        )
        .unwrap(),
    }
}

#[tokio::test]
async fn a_text_answer_streams_as_reference_chunks() {
    let server = MockProvider::start().await.unwrap();
    server.push(wire::text_reply(&["Hel", "lo"]));
    let provider = openai(&server);
    let request = Arc::new(Request::new("deepseek-chat", vec![Message::user("hi")]));
    let stream = provider.stream(request).await.unwrap();
    let (chunks, error) = collect(stream).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        chunks,
        vec![
            Chunk::BlockStart {
                index: 0,
                kind: BlockKind::Text
            },
            Chunk::TextDelta {
                index: 0,
                text: "Hel".into()
            },
            Chunk::TextDelta {
                index: 0,
                text: "lo".into()
            },
            Chunk::BlockEnd { index: 0 },
            Chunk::Usage(Usage {
                input_tokens: 10,
                output_tokens: 2,
                ..Usage::default()
            }),
            Chunk::Finish(FinishReason::Stop),
        ]
    );
    let recorded = &server.requests()[0];
    assert_eq!(recorded.path, "/v1/chat/completions");
    assert_eq!(recorded.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(recorded.body["stream"], json!(true));
    assert_eq!(
        recorded.body["stream_options"],
        json!({"include_usage": true})
    );
    assert_eq!(
        recorded.body["messages"],
        json!([{"role": "user", "content": "hi"}])
    );
    assert_eq!(recorded.refused, None);
}

/// DeepSeek's reasoning, then two tool calls whose argument text arrives a few bytes at a time
/// with the calls' fragments interleaved by index.
#[tokio::test]
async fn deepseek_reasoning_and_interleaved_tool_calls_assemble_by_index() {
    let server = MockProvider::start().await.unwrap();
    let a = r#"{"path": "a.txt",  "n": 1.50, "s": "é\"\\"}"#;
    let b = r#"{"path":"b.txt"}"#;
    let mut frames = vec![wire::role()];
    frames.extend(wire::reasoning(&["Let me ", "read both."]));
    let first = wire::tool_call(0, "call_00_a", "read", &[]);
    let second = wire::tool_call(1, "call_01_b", "read", &[]);
    frames.extend(first);
    frames.extend(second);
    let pieces = |s: &str| -> Vec<String> {
        s.chars()
            .collect::<Vec<_>>()
            .chunks(3)
            .map(|c| c.iter().collect())
            .collect()
    };
    let (pa, pb) = (pieces(a), pieces(b));
    for i in 0..pa.len().max(pb.len()) {
        if let Some(p) = pa.get(i) {
            frames.extend(wire::tool_call(0, "", "", &[p]).into_iter().skip(1));
        }
        if let Some(p) = pb.get(i) {
            frames.extend(wire::tool_call(1, "", "", &[p]).into_iter().skip(1));
        }
    }
    frames.push(wire::data(&wire::chunk(json!({}), Some("tool_calls"))));
    frames.push(wire::data(&wire::usage(100, 40, 64, 12)));
    frames.push(wire::done());
    server.push(Reply::Stream(frames));

    let provider = openai(&server);
    let request = Request::new("deepseek-reasoner", vec![Message::user("read a and b")])
        .with_tools(vec![tool("read")]);
    let message = assemble(provider.stream(Arc::new(request)).await.unwrap())
        .await
        .unwrap();
    assert_eq!(message.reasoning(), "Let me read both.");
    let calls: Vec<&ToolCall> = message.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("call_00_a", "read")
    );
    assert_eq!(calls[0].arguments, a, "raw text, byte for byte");
    assert_eq!(
        (calls[1].id.as_str(), calls[1].arguments.as_str()),
        ("call_01_b", b)
    );
    assert_eq!(message.finish, Some(FinishReason::ToolCalls));
    assert_eq!(
        message.usage,
        Some(Usage {
            input_tokens: 36,
            output_tokens: 40,
            cache_read_tokens: 64,
            cache_write_tokens: 0,
            reasoning_tokens: 12
        })
    );
}

/// The history rules: an assistant message with `tool_calls` (arguments the raw string), one
/// `tool` message per call id right after it, user text after the results; tools in the given
/// order; options on the wire. The mock refuses any request that breaks a rule, so an accepted
/// request proves the rules held.
#[tokio::test]
async fn the_request_body_follows_the_history_rules_and_keeps_tool_order() {
    let server = MockProvider::start().await.unwrap();
    server.push(wire::text_reply(&["done"]));
    let raw = r#"{ "path" : "x.txt" }"#;
    let history = vec![
        Message::system("be brief"),
        Message::user("read x"),
        Message::Assistant {
            blocks: vec![
                AssistantBlock::Reasoning {
                    text: "hm".into(),
                    signature: None,
                    redacted: None,
                },
                AssistantBlock::Text {
                    text: "Reading.".into(),
                },
                AssistantBlock::ToolCall(ToolCall {
                    id: "call_1".into(),
                    name: "read".into(),
                    arguments: raw.into(),
                }),
                AssistantBlock::ToolCall(ToolCall {
                    id: "call_2".into(),
                    name: "grep".into(),
                    arguments: String::new(),
                }),
            ],
        },
        Message::tool_result("call_1", "contents"),
        Message::tool_result("call_2", "no match"),
        Message::user("and now?"),
    ];
    let options = Options {
        max_tokens: Some(512),
        temperature: Some(0.2),
        reasoning: Some(Reasoning::Effort(Effort::High)),
        parallel_tool_calls: Some(false),
        ..Options::default()
    };
    let request = Request::new("deepseek-chat", history)
        .with_tools(vec![tool("zeta"), tool("alpha"), tool("mid")])
        .with_options(options);
    let provider = openai(&server);
    let (_, error) = collect(provider.stream(Arc::new(request)).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");

    let body = &server.bodies()[0];
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["zeta", "alpha", "mid"]);
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "read x"},
            {"role": "assistant", "content": "Reading.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": raw}},
                {"id": "call_2", "type": "function", "function": {"name": "grep", "arguments": ""}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "contents"},
            {"role": "tool", "tool_call_id": "call_2", "content": "no match"},
            {"role": "user", "content": "and now?"},
        ])
    );
    assert_eq!(body["max_tokens"], 512);
    assert_eq!(body["temperature"], 0.2);
    assert_eq!(body["reasoning_effort"], "high");
    assert_eq!(body["parallel_tool_calls"], false);
}

#[tokio::test]
async fn a_history_the_api_would_refuse_is_a_400_with_its_message() {
    let server = MockProvider::start().await.unwrap();
    server.push(wire::text_reply(&["unused"]));
    let history = vec![
        Message::user("go"),
        Message::Assistant {
            blocks: vec![AssistantBlock::ToolCall(ToolCall {
                id: "call_9".into(),
                name: "read".into(),
                arguments: "{}".into(),
            })],
        },
        Message::user("no result given"),
    ];
    let provider = openai(&server);
    let Err(error) = provider.stream(Arc::new(Request::new("m", history))).await else {
        panic!("the server refuses an unanswered tool call");
    };
    match &error {
        ModelError::BadRequest {
            status, message, ..
        } => {
            assert_eq!(*status, 400);
            assert!(message.contains("tool_call_id"), "{message}");
            assert!(message.contains("call_9"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(error.to_string().contains("call_9"));
    assert_eq!(server.requests().len(), 1, "a 400 is not retried");
    assert_eq!(server.pending(), 1);
}

/// The presets: base URLs as the SDKs take them, the key variable each names, and OpenAI's
/// `max_completion_tokens` where the other servers take `max_tokens`.
#[tokio::test]
async fn presets_name_their_endpoint_key_variable_and_limit_field() {
    use dsh_model::{AnthropicConfig, MaxTokensField, OpenAiConfig};
    let cases = [
        (
            OpenAiConfig::openai(),
            "https://api.openai.com/v1/chat/completions",
            "OPENAI_API_KEY",
        ),
        (
            OpenAiConfig::deepseek(),
            "https://api.deepseek.com/v1/chat/completions",
            "DEEPSEEK_API_KEY",
        ),
        (
            OpenAiConfig::openrouter(),
            "https://openrouter.ai/api/v1/chat/completions",
            "OPENROUTER_API_KEY",
        ),
        (
            OpenAiConfig::ollama(),
            "http://127.0.0.1:11434/v1/chat/completions",
            "OLLAMA_API_KEY",
        ),
        (
            OpenAiConfig::vllm("http://gpu:8000/v1/"),
            "http://gpu:8000/v1/chat/completions",
            "VLLM_API_KEY",
        ),
        (
            OpenAiConfig::llama_cpp("http://127.0.0.1:8080/v1"),
            "http://127.0.0.1:8080/v1/chat/completions",
            "LLAMA_API_KEY",
        ),
    ];
    for (config, url, key) in cases {
        assert_eq!((config.url().as_str(), config.key_env.as_str()), (url, key));
    }
    assert_eq!(
        AnthropicConfig::default().url(),
        "https://api.anthropic.com/v1/messages"
    );
    assert_eq!(AnthropicConfig::default().key_env, "ANTHROPIC_API_KEY");

    let server = MockProvider::start().await.unwrap();
    server.push(wire::text_reply(&["ok"]));
    let config = OpenAiConfig::openai()
        .with_base_url(&server.openai_base_url())
        .with_api_key("sk-test")
        .with_http(super::fast_http());
    assert_eq!(config.max_tokens_field, MaxTokensField::MaxCompletionTokens);
    let provider = dsh_model::OpenAiProvider::new(config).unwrap();
    let options = Options {
        max_tokens: Some(64),
        ..Options::default()
    };
    let request = Request::new("gpt-x", vec![Message::user("hi")]).with_options(options);
    let (_, error) = collect(provider.stream(Arc::new(request)).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    let body = &server.bodies()[0];
    assert_eq!(body["max_completion_tokens"], 64);
    assert!(body.get("max_tokens").is_none());
}

#[tokio::test]
async fn pictures_go_as_pictures_only_to_a_model_that_takes_images() {
    use dsh_core::ContentBlock;
    let picture = || ContentBlock::Image {
        data: "iVBORw==".into(),
        mime_type: "image/png".into(),
    };
    let history = vec![
        Message::User {
            content: Arc::from(vec![ContentBlock::text("look"), picture()]),
        },
        Message::Assistant {
            blocks: vec![AssistantBlock::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "read".into(),
                arguments: "{}".into(),
            })],
        },
        Message::ToolResult {
            call_id: "call_1".into(),
            content: Arc::from(vec![ContentBlock::text("<type>image</type>"), picture()]),
            is_error: false,
        },
        Message::user("and?"),
    ];
    for images in [false, true] {
        let server = MockProvider::start().await.unwrap();
        server.push(wire::text_reply(&["ok"]));
        let mut config = dsh_model::OpenAiConfig::new("x", &server.openai_base_url(), "NO_KEY")
            .with_api_key("sk-test");
        config.images = images;
        let provider = dsh_model::OpenAiProvider::new(config).unwrap();
        let request = Request::new("m", history.clone());
        let (_, error) = collect(provider.stream(Arc::new(request)).await.unwrap()).await;
        assert!(error.is_none(), "{error:?}");
        let messages = server.bodies()[0]["messages"].clone();
        let roles: Vec<&str> = messages
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        let text = messages.to_string();
        if images {
            // The tool message holds text; its picture follows in a user message, before the
            // next user message, and the user's own picture is a picture too.
            assert_eq!(roles, ["user", "assistant", "tool", "user", "user"]);
            assert_eq!(text.matches("\"type\":\"image_url\"").count(), 2, "{text}");
            assert_eq!(messages[3]["content"][1]["type"], "image_url");
        } else {
            assert_eq!(roles, ["user", "assistant", "tool", "user"]);
            assert!(!text.contains("image_url"), "{text}");
            assert_eq!(text.matches("image left out").count(), 2, "{text}");
        }
    }
}

#[tokio::test]
async fn deepseek_is_sent_back_the_reasoning_of_a_message_that_called_tools() {
    // DeepSeek's thinking mode answers 400 when an assistant message that called tools comes
    // back without its `reasoning_content`.
    let server = MockProvider::start().await.unwrap();
    server.push(wire::text_reply(&["ok"]));
    let config = dsh_model::OpenAiConfig::deepseek()
        .with_base_url(&server.openai_base_url())
        .with_api_key("sk-test")
        .with_http(super::fast_http());
    let provider = dsh_model::OpenAiProvider::new(config).unwrap();
    let history = vec![
        Message::user("read x"),
        Message::Assistant {
            blocks: vec![
                AssistantBlock::Reasoning {
                    text: "I should read x.".into(),
                    signature: None,
                    redacted: None,
                },
                AssistantBlock::ToolCall(ToolCall {
                    id: "call_1".into(),
                    name: "read".into(),
                    arguments: "{}".into(),
                }),
            ],
        },
        Message::tool_result("call_1", "contents"),
    ];
    let request = Request::new("deepseek-chat", history);
    let (_, error) = collect(provider.stream(Arc::new(request)).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    let body = &server.bodies()[0];
    assert_eq!(body["messages"][1]["role"], "assistant");
    assert_eq!(body["messages"][1]["reasoning_content"], "I should read x.");
    assert_eq!(body["messages"][1]["tool_calls"][0]["id"], "call_1");
}

/// A tool call's fragments as a server sends them: `call` is the `tool_calls` entry.
fn call_frame(call: serde_json::Value) -> dsh_test_support::mock_provider::Frame {
    wire::data(&wire::chunk(json!({"tool_calls": [call]}), None))
}

/// The calls of a streamed answer, assembled, as `(id, name, arguments)`.
async fn calls_of(frames: Vec<dsh_test_support::mock_provider::Frame>) -> Vec<[String; 3]> {
    let server = MockProvider::start().await.unwrap();
    server.push(Reply::Stream(frames));
    let request = Request::new("deepseek-chat", vec![Message::user("read a and b")])
        .with_tools(vec![tool("read"), tool("grep")]);
    let message = assemble(openai(&server).stream(Arc::new(request)).await.unwrap())
        .await
        .unwrap();
    assert_eq!(message.finish, Some(FinishReason::ToolCalls));
    message
        .tool_calls()
        .map(|c| [c.id.clone(), c.name.clone(), c.arguments.clone()])
        .collect()
}

fn owned(calls: &[[&str; 3]]) -> Vec<[String; 3]> {
    calls.iter().map(|c| c.map(str::to_owned)).collect()
}

/// Some OpenAI-compatible servers send every call at index 0, each with its own id: a fragment
/// bringing another id starts another call (arguments kept as raw text, calls in the order they
/// came), and a server that repeats a call's id on each fragment still makes one call.
#[tokio::test]
async fn calls_sent_at_one_index_with_their_own_ids_stay_separate_calls_in_order() {
    let mut frames = vec![wire::role()];
    frames.extend(wire::tool_call(
        0,
        "call_a",
        "read",
        &["{\"path\": ", "\"a.txt\"}"],
    ));
    frames.extend(wire::tool_call(
        0,
        "call_b",
        "read",
        &["{\"path\":\"b.txt\"", "}"],
    ));
    frames.push(call_frame(
        json!({"index": 0, "id": "call_c", "type": "function",
        "function": {"name": "grep", "arguments": ""}}),
    ));
    frames.push(call_frame(
        json!({"index": 0, "id": "call_c", "function": {"arguments": "{ }"}}),
    ));
    frames.push(call_frame(
        json!({"index": 0, "id": "", "function": {"arguments": " "}}),
    ));
    frames.extend(wire::finish("tool_calls", 30, 20));
    assert_eq!(
        calls_of(frames).await,
        owned(&[
            ["call_a", "read", "{\"path\": \"a.txt\"}"],
            ["call_b", "read", "{\"path\":\"b.txt\"}"],
            ["call_c", "grep", "{ } "],
        ])
    );
}

/// A server that leaves `index` out: a fragment with a new id starts a call, one without (or
/// with an empty id) continues the last.
#[tokio::test]
async fn calls_without_an_index_are_told_apart_by_their_ids() {
    let mut frames = vec![wire::role()];
    frames.push(call_frame(
        json!({"id": "call_a", "function": {"name": "read", "arguments": ""}}),
    ));
    frames.push(call_frame(
        json!({"id": "", "function": {"arguments": "{\"path\":"}}),
    ));
    frames.push(call_frame(json!({"function": {"arguments": "\"a\"}"}})));
    frames.push(call_frame(
        json!({"id": "call_b", "function": {"name": "read", "arguments": "{}"}}),
    ));
    frames.extend(wire::finish("tool_calls", 30, 20));
    assert_eq!(
        calls_of(frames).await,
        owned(&[
            ["call_a", "read", "{\"path\":\"a\"}"],
            ["call_b", "read", "{}"]
        ])
    );
}
