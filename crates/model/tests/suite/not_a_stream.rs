//! A server that ignores `stream: true` and answers 200 with the whole completion as JSON: one
//! clear error naming the content type, not "the stream ended before [DONE]"; never retried.

use std::sync::Arc;

use dsh_model::{Message, ModelError, Provider, Request};
use dsh_test_support::mock_provider::{MockProvider, Reply};
use serde_json::json;

use super::{anthropic, openai};

fn request() -> Arc<Request> {
    Arc::new(Request::new("deepseek-chat", vec![Message::user("hi")]))
}

/// A non-streamed Chat Completions answer, as a server without streaming sends it.
fn completion(content_type: &str) -> Reply {
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"},
            "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    });
    Reply::Status {
        status: 200,
        headers: vec![("content-type".into(), content_type.into())],
        body: body.to_string(),
    }
}

#[tokio::test]
async fn a_json_completion_instead_of_a_stream_says_streaming_is_not_supported() {
    let server = MockProvider::start().await.unwrap();
    server.push(completion("application/json; charset=utf-8"));
    server.push(completion("application/json"));
    let Err(error) = openai(&server).stream(request()).await else {
        panic!("a JSON body is not a stream");
    };
    let ModelError::NotAStream { url, content_type } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(
        url,
        &format!("{}/chat/completions", server.openai_base_url())
    );
    assert_eq!(content_type, "application/json; charset=utf-8");
    let message = error.to_string();
    assert!(
        message.contains(
            "answered with a JSON body (application/json; charset=utf-8) instead of an event stream"
        ) && message.contains("does not support streaming"),
        "{message}"
    );
    assert!(!message.contains("[DONE]"), "{message}");
    assert!(!error.is_mid_stream());
    // Not retried: the second scripted reply is left.
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.pending(), 1);
}

#[tokio::test]
async fn an_anthropic_json_message_instead_of_a_stream_is_named_the_same_way() {
    let server = MockProvider::start().await.unwrap();
    server.push(Reply::Status {
        status: 200,
        headers: vec![],
        body: json!({"type": "message", "role": "assistant",
            "content": [{"type": "text", "text": "hello"}]})
        .to_string(),
    });
    let Err(error) = anthropic(&server).stream(request()).await else {
        panic!("a JSON body is not a stream");
    };
    assert!(
        matches!(&error, ModelError::NotAStream { content_type, .. } if content_type == "application/json"),
        "{error:?}"
    );
}
