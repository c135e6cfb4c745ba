//! A connection the server (or a proxy) closes after reading the request, before a byte of the
//! response: retried as a 5xx is (no response started, so nothing was acted on), and the error
//! after the last attempt names the cause.

use std::sync::Arc;

use dsh_model::{Chunk, FinishReason, Message, ModelError, Provider, Request};
use dsh_test_support::mock_provider::{MockProvider, Reply, openai as wire};

use super::{anthropic, collect, openai};

fn request() -> Arc<Request> {
    Arc::new(Request::new("deepseek-chat", vec![Message::user("hi")]))
}

#[tokio::test]
async fn a_connection_closed_before_the_response_is_retried_and_the_answer_streams() {
    let server = MockProvider::start().await.unwrap();
    server.push(Reply::Close);
    server.push(wire::text_reply(&["fine"]));
    let (chunks, error) = collect(openai(&server).stream(request()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(chunks.last(), Some(&Chunk::Finish(FinishReason::Stop)));
    assert_eq!(server.requests().len(), 2);
    assert_eq!(server.pending(), 0);
}

#[tokio::test]
async fn a_connection_closed_on_every_attempt_fails_naming_the_cause_and_the_attempts() {
    let server = MockProvider::start().await.unwrap();
    for _ in 0..5 {
        server.push(Reply::Close);
    }
    let Err(error) = openai(&server).stream(request()).await else {
        panic!("every attempt is closed");
    };
    let ModelError::Transport { url, attempts, .. } = &error else {
        panic!("{error:?}")
    };
    // The policy of the tests allows 3 attempts in all.
    assert_eq!(*attempts, 3);
    assert_eq!(
        url,
        &format!("{}/chat/completions", server.openai_base_url())
    );
    assert_eq!(server.requests().len(), 3);
    let message = error.to_string();
    assert!(message.contains("3 attempts"), "{message}");
    assert!(
        message.contains("connection closed before message completed"),
        "the message names the cause: {message}"
    );
    assert!(!error.is_mid_stream());
}

#[tokio::test]
async fn an_anthropic_request_whose_connection_closes_is_retried_too() {
    let server = MockProvider::start().await.unwrap();
    server.push(Reply::Close);
    server.push(dsh_test_support::mock_provider::anthropic::text_reply(&[
        "fine",
    ]));
    let (chunks, error) = collect(anthropic(&server).stream(request()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert!(chunks.iter().any(|c| matches!(c, Chunk::Finish(_))));
    assert_eq!(server.requests().len(), 2);
}
