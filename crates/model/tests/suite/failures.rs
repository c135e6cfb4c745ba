//! Every failure a user can meet, over real HTTP: refused keys, unknown models, rate limits and
//! server errors (retried), connections refused, and cuts, stalls and garbage mid-stream (never
//! retried once the stream opened).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use dsh_model::{
    Assembler, Chunk, HttpSettings, IDLE_TIMEOUT_CODE, Message, ModelError, OpenAiConfig,
    OpenAiProvider, Provider, Request, RetryPolicy, WatchdogError,
};
use dsh_test_support::mock_provider::{Frame, MockProvider, Reply, openai as wire};
use serde_json::json;

use super::{collect, fast_http, openai, openai_with};

fn request() -> Arc<Request> {
    Arc::new(Request::new("deepseek-chat", vec![Message::user("hi")]))
}

#[tokio::test]
async fn a_refused_key_names_the_key_variable() {
    let server = MockProvider::start().await.unwrap();
    server.require_key("sk-right");
    let Err(error) = openai(&server).stream(request()).await else {
        panic!("a wrong key is refused");
    };
    let ModelError::Unauthorized {
        status,
        key_env,
        message,
        ..
    } = &error
    else {
        panic!("{error:?}");
    };
    assert_eq!((*status, key_env.as_str()), (401, "DEEPSEEK_API_KEY"));
    assert!(
        message.starts_with("Incorrect API key provided"),
        "{message}"
    );
    assert!(error.to_string().contains("DEEPSEEK_API_KEY"), "{error}");
    assert_eq!(server.requests().len(), 1, "a 401 is not retried");
}

#[tokio::test]
async fn an_unknown_model_names_the_model() {
    let server = MockProvider::start().await.unwrap();
    server.push(wire::error(
        404,
        "The model `deepseek-nope` does not exist or you do not have access to it.",
        "invalid_request_error",
        Some("model_not_found"),
    ));
    let request = Arc::new(Request::new("deepseek-nope", vec![Message::user("hi")]));
    let Err(error) = openai(&server).stream(request).await else {
        panic!("404");
    };
    assert!(matches!(&error, ModelError::ModelNotFound { model, .. } if model == "deepseek-nope"));
    assert!(error.to_string().contains("`deepseek-nope`"), "{error}");
    assert_eq!(error.status(), Some(404));
}

#[tokio::test]
async fn a_429_waits_the_retry_after_seconds_then_succeeds() {
    let server = MockProvider::start().await.unwrap();
    server.push(
        wire::error(
            429,
            "Rate limit reached",
            "requests",
            Some("rate_limit_exceeded"),
        )
        .with_header("retry-after", "1"),
    );
    server.push(wire::text_reply(&["ok"]));
    let started = Instant::now();
    let stream = openai(&server).stream(request()).await.unwrap();
    let (chunks, error) = collect(stream).await;
    assert!(error.is_none(), "{error:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 honoured"
    );
    assert!(chunks.contains(&Chunk::TextDelta {
        index: 0,
        text: "ok".into()
    }));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].raw, requests[1].raw,
        "the same body is sent again"
    );
}

#[tokio::test]
async fn a_429_with_an_http_date_retry_after_is_honoured() {
    let server = MockProvider::start().await.unwrap();
    let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(2));
    server.push(wire::error(429, "slow down", "requests", None).with_header("retry-after", &at));
    server.push(wire::text_reply(&["ok"]));
    let started = Instant::now();
    let (_, error) = collect(openai(&server).stream(request()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    // The date has whole seconds: at least one of the two seconds is left when it is read.
    assert!(started.elapsed() >= Duration::from_millis(950));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_500_then_success_is_retried_once() {
    let server = MockProvider::start().await.unwrap();
    server.push(wire::error(
        500,
        "The server had an error",
        "server_error",
        None,
    ));
    server.push(wire::text_reply(&["fine"]));
    let (chunks, error) = collect(openai(&server).stream(request()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        chunks.last(),
        Some(&Chunk::Finish(dsh_model::FinishReason::Stop))
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn retries_stop_at_the_policy_limit_and_say_how_many() {
    let server = MockProvider::start().await.unwrap();
    for _ in 0..5 {
        server.push(wire::error(429, "Rate limit reached", "requests", None));
    }
    let Err(error) = openai(&server).stream(request()).await else {
        panic!("always 429");
    };
    assert!(
        matches!(error, ModelError::RateLimited { attempts: 3, .. }),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 3);

    let never = HttpSettings {
        retry: RetryPolicy::never(),
        ..fast_http()
    };
    let Err(error) = openai_with(&server, never).stream(request()).await else {
        panic!("always 429");
    };
    assert!(
        matches!(error, ModelError::RateLimited { attempts: 1, .. }),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn a_refused_connection_names_the_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let base = format!("http://127.0.0.1:{port}/v1");
    let config = OpenAiConfig::new("vllm", &base, "VLLM_API_KEY").with_http(fast_http());
    let provider = OpenAiProvider::new(config).unwrap();
    let Err(error) = provider.stream(request()).await else {
        panic!("nothing listens there");
    };
    let ModelError::Connect { url, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(url, &format!("{base}/chat/completions"));
    assert!(
        error.to_string().contains(&format!("127.0.0.1:{port}")),
        "{error}"
    );
}

/// A cut after some text: the text already streamed reaches the caller, then a stream error;
/// the request is not sent again (LOOP-20: the loop's request-error path decides).
#[tokio::test]
async fn loop_20_a_cut_mid_stream_is_a_stream_error_and_never_retried() {
    let server = MockProvider::start().await.unwrap();
    let mut frames = vec![wire::role()];
    frames.extend(wire::text(&["par", "tial"]));
    frames.push(Frame::Cut);
    server.push(Reply::Stream(frames));
    server.push(wire::text_reply(&["must not be fetched"]));
    let (chunks, error) = collect(openai(&server).stream(request()).await.unwrap()).await;
    let error = error.expect("the cut fails the stream");
    assert!(matches!(error, ModelError::StreamCut { .. }), "{error:?}");
    assert!(error.is_mid_stream());
    let mut assembler = Assembler::new();
    chunks.iter().for_each(|c| assembler.push(c));
    assert_eq!(assembler.interrupted().text(), "partial");
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.pending(), 1);
}

/// After a failed partial stream, a new request (the loop's retry) streams only the new
/// answer: nothing of the failed attempt leaks into it (LOOP-21).
#[tokio::test]
async fn loop_21_a_new_request_after_a_cut_streams_only_the_new_answer() {
    let server = MockProvider::start().await.unwrap();
    let mut frames = vec![wire::role()];
    frames.extend(wire::text(&["lost"]));
    frames.push(Frame::Cut);
    server.push(Reply::Stream(frames));
    server.push(wire::text_reply(&["recovered"]));
    let provider = openai(&server);
    let (_, error) = collect(provider.stream(request()).await.unwrap()).await;
    assert!(error.is_some());
    let message = dsh_model::assemble(provider.stream(request()).await.unwrap())
        .await
        .unwrap();
    assert_eq!(message.text(), "recovered");
    assert_eq!(server.requests().len(), 2);
}

/// A stall after some bytes: the idle watchdog fails the stream with the reference's reason
/// (TMO-34), and the request is not sent again.
#[tokio::test]
async fn tmo_34_a_stall_mid_stream_fails_with_the_idle_timeout() {
    let server = MockProvider::start().await.unwrap();
    let mut frames = vec![wire::role()];
    frames.extend(wire::text(&["thinking"]));
    frames.push(Frame::Stall);
    server.push(Reply::Stream(frames));
    let http = HttpSettings {
        idle_timeout: Duration::from_millis(200),
        ..fast_http()
    };
    let (chunks, error) =
        collect(openai_with(&server, http).stream(request()).await.unwrap()).await;
    let error = error.expect("stalled");
    let reason = error.idle_timeout().expect("an idle timeout");
    assert_eq!(reason.code(), IDLE_TIMEOUT_CODE);
    assert_eq!(reason.message(), "LLM_STREAM_IDLE_TIMEOUT after 200ms");
    assert!(error.is_mid_stream());
    assert!(chunks.contains(&Chunk::TextDelta {
        index: 0,
        text: "thinking".into()
    }));
    assert_eq!(server.requests().len(), 1);
}

/// An idle timeout the watchdog refuses (0, or above `MAX_TIMEOUT_MS`) is refused before the
/// request is sent, not once the answer has started streaming (TMO-38).
#[tokio::test]
async fn tmo_38_an_idle_timeout_the_watchdog_refuses_is_refused_before_anything_is_sent() {
    let server = MockProvider::start().await.unwrap();
    server.push(wire::text_reply(&["never asked"]));
    for idle_timeout in [
        Duration::ZERO,
        Duration::from_millis(dsh_core::MAX_TIMEOUT_MS + 1),
    ] {
        let http = HttpSettings {
            idle_timeout,
            ..fast_http()
        };
        let Err(error) = openai_with(&server, http).stream(request()).await else {
            panic!("{idle_timeout:?} is refused");
        };
        assert!(
            matches!(error, ModelError::Watchdog(WatchdogError::Bounds)),
            "{error:?}"
        );
    }
    assert_eq!(server.requests().len(), 0, "nothing was sent");
}

/// Bytes that complete no chunk (SSE comments, as OpenRouter sends while it waits) still count
/// as progress: a stream slower than the idle timeout between chunks, but never silent that
/// long, completes (TMO-35, the pulse).
#[tokio::test]
async fn tmo_35_keepalive_bytes_rearm_the_idle_timer() {
    let server = MockProvider::start().await.unwrap();
    let mut frames = vec![wire::role()];
    for _ in 0..4 {
        frames.push(Frame::Pause(Duration::from_millis(120)));
        frames.push(Frame::Bytes(": OPENROUTER PROCESSING\n\n".into()));
    }
    frames.extend(wire::text(&["late"]));
    frames.extend(wire::finish("stop", 1, 1));
    server.push(Reply::Stream(frames));
    let http = HttpSettings {
        idle_timeout: Duration::from_millis(300),
        ..fast_http()
    };
    let message =
        dsh_model::assemble(openai_with(&server, http).stream(request()).await.unwrap()).await;
    assert_eq!(message.unwrap().text(), "late");
}

#[tokio::test]
async fn the_whole_request_deadline_ends_a_slow_stream() {
    let server = MockProvider::start().await.unwrap();
    let mut frames = vec![wire::role()];
    for _ in 0..20 {
        frames.push(Frame::Pause(Duration::from_millis(50)));
        frames.extend(wire::text(&["."]));
    }
    frames.extend(wire::finish("stop", 1, 20));
    server.push(Reply::Stream(frames));
    let http = HttpSettings {
        deadline: Some(Duration::from_millis(300)),
        ..fast_http()
    };
    let (chunks, error) =
        collect(openai_with(&server, http).stream(request()).await.unwrap()).await;
    let error = error.expect("deadline");
    assert!(
        matches!(error, ModelError::Deadline { after } if after == Duration::from_millis(300)),
        "{error:?}"
    );
    assert!(
        !chunks.is_empty(),
        "what streamed before the deadline was delivered"
    );
}

#[tokio::test]
async fn a_malformed_chunk_fails_the_stream_after_the_good_ones() {
    let server = MockProvider::start().await.unwrap();
    let mut frames = vec![wire::role()];
    frames.extend(wire::text(&["good"]));
    frames.push(Frame::Bytes("data: {\"choices\": [oops\n\n".into()));
    frames.extend(wire::finish("stop", 1, 1));
    server.push(Reply::Stream(frames));
    let (chunks, error) = collect(openai(&server).stream(request()).await.unwrap()).await;
    let error = error.expect("malformed");
    assert!(
        matches!(error, ModelError::Malformed { ref detail, .. } if detail.contains("oops")),
        "{error:?}"
    );
    assert!(chunks.contains(&Chunk::TextDelta {
        index: 0,
        text: "good".into()
    }));
    assert!(!chunks.iter().any(|c| matches!(c, Chunk::Finish(_))));
}

#[tokio::test]
async fn a_body_that_ends_before_done_is_a_stream_error() {
    let server = MockProvider::start().await.unwrap();
    let mut frames = vec![wire::role()];
    frames.extend(wire::text(&["half"]));
    server.push(Reply::Stream(frames));
    let (_, error) = collect(openai(&server).stream(request()).await.unwrap()).await;
    assert!(
        matches!(
            error,
            Some(ModelError::StreamEnded {
                expected: "[DONE]",
                ..
            })
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_error_object_in_the_stream_carries_the_api_message() {
    let server = MockProvider::start().await.unwrap();
    let mut frames = vec![wire::role()];
    frames.push(wire::data(
        &json!({"error": {"message": "upstream overloaded", "type": "server_error", "code": 502}}),
    ));
    server.push(Reply::Stream(frames));
    let (_, error) = collect(openai(&server).stream(request()).await.unwrap()).await;
    let Some(ModelError::StreamError { kind, message, .. }) = error else {
        panic!("{error:?}")
    };
    assert_eq!(
        (kind.as_str(), message.as_str()),
        ("server_error", "upstream overloaded")
    );
}

fn html(status: u16, body: &str) -> Reply {
    Reply::Status {
        status,
        headers: vec![("content-type".into(), "text/html; charset=utf-8".into())],
        body: body.into(),
    }
}

#[tokio::test]
async fn a_web_page_with_an_error_status_is_named_as_a_web_page_not_retried() {
    let server = MockProvider::start().await.unwrap();
    let page =
        "<!doctype html><html><head><title>404 Not Found</title></head>\n<body>nginx</body></html>";
    server.push(html(404, page));
    let Err(error) = openai(&server).stream(request()).await else {
        panic!("a web page is not the API");
    };
    assert!(matches!(&error, ModelError::NotTheApi { .. }), "{error:?}");
    let text = error.to_string();
    assert!(text.contains("a web page (text/html"), "{text}");
    assert!(
        text.contains("404 Not Found"),
        "the page's start is shown: {text}"
    );
    assert!(
        !text.contains("has no model"),
        "not a missing model: {text}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_web_page_with_a_5xx_status_is_retried_and_then_said_briefly() {
    let server = MockProvider::start().await.unwrap();
    let page = format!("<html><body>{}</body></html>", "Bad gateway ".repeat(100));
    server.push_all((0..3).map(|_| html(502, &page)));
    let Err(error) = openai(&server).stream(request()).await else {
        panic!("502");
    };
    assert!(
        matches!(
            &error,
            ModelError::Server {
                status: 502,
                attempts: 3,
                ..
            }
        ),
        "{error:?}"
    );
    let text = error.to_string();
    let url = format!("{}/chat/completions", server.openai_base_url());
    assert!(
        text.ends_with(&format!(
            "{url} answered with a web page (text/html; charset=utf-8), not the API's JSON error"
        )),
        "{text}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_key_with_a_newline_is_a_config_error_naming_the_variable_and_nothing_is_sent() {
    let server = MockProvider::start().await.unwrap();
    let config = OpenAiConfig::new("deepseek", &server.openai_base_url(), "DEEPSEEK_API_KEY")
        .with_api_key("sk-test\n")
        .with_http(fast_http());
    let provider = OpenAiProvider::new(config).unwrap();
    let Err(error) = provider.stream(request()).await else {
        panic!("a key a header cannot carry is refused before sending");
    };
    assert!(
        matches!(&error, ModelError::ApiKey { key_env, .. } if key_env == "DEEPSEEK_API_KEY"),
        "{error:?}"
    );
    assert!(
        std::error::Error::source(&error).is_some(),
        "the cause is kept"
    );
    assert!(error.to_string().contains("DEEPSEEK_API_KEY"), "{error}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_bad_extra_header_is_a_config_error_naming_the_header() {
    let server = MockProvider::start().await.unwrap();
    let mut config = OpenAiConfig::new("deepseek", &server.openai_base_url(), "DEEPSEEK_API_KEY")
        .with_api_key("sk-test")
        .with_http(fast_http());
    config.headers = vec![("x bad name".into(), "v".into())];
    let Err(error) = OpenAiProvider::new(config.clone())
        .unwrap()
        .stream(request())
        .await
    else {
        panic!("an invalid header name is refused");
    };
    assert!(
        matches!(&error, ModelError::HeaderName { name, .. } if name == "x bad name"),
        "{error:?}"
    );
    config.headers = vec![("x-team".into(), "a\nb".into())];
    let Err(error) = OpenAiProvider::new(config).unwrap().stream(request()).await else {
        panic!("an invalid header value is refused");
    };
    assert!(
        matches!(&error, ModelError::HeaderValue { name, .. } if name == "x-team"),
        "{error:?}"
    );
    assert!(std::error::Error::source(&error).is_some());
    assert!(server.requests().is_empty());
}
