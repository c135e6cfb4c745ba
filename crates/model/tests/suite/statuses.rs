//! Which error statuses are tried again, over real HTTP: a 429 or a 5xx that may pass is retried;
//! a 5xx no retry can change (501 Not Implemented, 505 HTTP Version Not Supported, ...) is
//! answered at once, and a web page with such a status is named as one, with its status and
//! the URL asked.

use std::sync::Arc;

use dsh_model::{Message, ModelError, Provider, Request};
use dsh_test_support::mock_provider::{MockProvider, Reply, openai as wire};

use super::openai;

fn request() -> Arc<Request> {
    Arc::new(Request::new("deepseek-chat", vec![Message::user("hi")]))
}

/// The page Python's `http.server` answers a POST with: a web server that is not an API.
const PAGE_501: &str = "<!DOCTYPE HTML>\n<html lang=\"en\">\n    <head>\n        <meta charset=\"utf-8\">\n        <title>Error response</title>\n    </head>\n    <body>\n        <h1>Error response</h1>\n        <p>Error code: 501</p>\n        <p>Message: Unsupported method ('POST').</p>\n    </body>\n</html>\n";

#[tokio::test]
async fn a_501_web_page_is_not_retried_and_names_its_status_the_page_and_the_url() {
    let server = MockProvider::start().await.unwrap();
    // Were it retried, the next attempts would get the mock's 500 for an empty script.
    server.push(Reply::Status {
        status: 501,
        headers: vec![("content-type".into(), "text/html;charset=utf-8".into())],
        body: PAGE_501.into(),
    });
    let Err(error) = openai(&server).stream(request()).await else {
        panic!("a 501 page is not the API");
    };
    assert!(
        matches!(&error, ModelError::NotTheApi { status: 501, .. }),
        "{error:?}"
    );
    assert_eq!(error.status(), Some(501));
    let text = error.to_string();
    let url = format!("{}/chat/completions", server.openai_base_url());
    assert!(text.starts_with(&url), "the URL asked: {text}");
    assert!(text.contains("HTTP 501"), "the status: {text}");
    assert!(
        text.contains("a web page (text/html;charset=utf-8), not the API's JSON"),
        "HTML, not the API's JSON: {text}"
    );
    assert!(
        text.contains("Unsupported method ('POST')"),
        "the page's start: {text}"
    );
    assert_eq!(server.requests().len(), 1, "tried once");
}

#[tokio::test]
async fn a_5xx_no_retry_can_change_is_tried_once() {
    for status in [501, 505, 506, 508, 510, 511] {
        let server = MockProvider::start().await.unwrap();
        server.push(wire::error(status, "not here", "server_error", None));
        let Err(error) = openai(&server).stream(request()).await else {
            panic!("{status} is an error");
        };
        assert!(
            matches!(&error, ModelError::Status { status: s, .. } if *s == status),
            "{status}: {error:?}"
        );
        assert_eq!(
            error.to_string(),
            format!("deepseek answered HTTP {status}: not here")
        );
        assert_eq!(server.requests().len(), 1, "{status} is tried once");
    }
}

#[tokio::test]
async fn a_5xx_that_may_pass_is_still_retried() {
    for status in [500, 502, 503, 504, 599] {
        let server = MockProvider::start().await.unwrap();
        server.push_all((0..3).map(|_| wire::error(status, "busy", "server_error", None)));
        let Err(error) = openai(&server).stream(request()).await else {
            panic!("{status} is an error");
        };
        assert!(
            matches!(&error, ModelError::Server { status: s, attempts: 3, .. } if *s == status),
            "{status}: {error:?}"
        );
        assert_eq!(server.requests().len(), 3, "{status} is retried");
    }
}
