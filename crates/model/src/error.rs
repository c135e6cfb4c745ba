//! The one error type of the model seam, [`ModelError`]: every variant says what a user can do
//! about it (which key variable to check, which model was not found, the API's own message).
//!
//! Guarantees: an error raised after the response stream opened ([`ModelError::is_mid_stream`])
//! was never retried; the API's message is carried verbatim; a transport cause is kept as the
//! `source`.

use std::sync::Arc;
use std::time::Duration;

use dsh_core::TimeoutReason;

use crate::watchdog::WatchdogError;

/// Why a model request or its response stream failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// 401 or 403: the key was refused or is missing.
    #[error(
        "{provider} refused the API key (HTTP {status}): set a valid key in the {key_env} environment variable ({message})"
    )]
    Unauthorized {
        /// The adapter's name (`openai`, `deepseek`, `anthropic`, ...).
        provider: String,
        /// 401 or 403.
        status: u16,
        /// The environment variable the key is read from.
        key_env: String,
        /// The API's own message.
        message: String,
    },
    /// 404: the model (or the endpoint) does not exist.
    #[error("{provider} has no model named `{model}` (HTTP 404): {message}")]
    ModelNotFound {
        /// The adapter's name.
        provider: String,
        /// The model that was asked for.
        model: String,
        /// The API's own message.
        message: String,
    },
    /// 400 (or 422): the API refused the request; its message says why.
    #[error("{provider} refused the request (HTTP {status}): {message}")]
    BadRequest {
        /// The adapter's name.
        provider: String,
        /// The status (400, 413, 422).
        status: u16,
        /// The API's own message.
        message: String,
    },
    /// 429 after every attempt the retry policy allows.
    #[error("{provider} is rate limiting requests (HTTP 429, {attempts} attempts){}: {message}", retry_hint(*retry_after))]
    RateLimited {
        /// The adapter's name.
        provider: String,
        /// Attempts made, the first included.
        attempts: u32,
        /// What the last `Retry-After` asked for, if anything.
        retry_after: Option<Duration>,
        /// The API's own message.
        message: String,
    },
    /// A 5xx that may pass (not 501, 505, ...: those are [`ModelError::Status`]) after every
    /// attempt the retry policy allows.
    #[error("{provider} failed with HTTP {status} ({attempts} attempts): {message}")]
    Server {
        /// The adapter's name.
        provider: String,
        /// The last status.
        status: u16,
        /// Attempts made, the first included.
        attempts: u32,
        /// The API's own message.
        message: String,
    },
    /// Any other unsuccessful status, never retried: one no retry can change (501 Not
    /// Implemented, 505 HTTP Version Not Supported, ...) or one of no other variant (402, 405,
    /// ...).
    #[error("{provider} answered HTTP {status}: {message}")]
    Status {
        /// The adapter's name.
        provider: String,
        /// The status.
        status: u16,
        /// The API's own message, or the body.
        message: String,
    },
    /// The server could not be reached at all (refused, no route, DNS).
    #[error(
        "cannot connect to {url} ({}): is the server running and the base URL right?",
        causes(source)
    )]
    Connect {
        /// The URL that was requested.
        url: String,
        /// The transport's error.
        #[source]
        source: reqwest::Error,
    },
    /// A web page instead of the API's answer, whatever the status but one that is retried (a
    /// 429, a 5xx that may pass): a proxy's or a login page, a site's 404 page at a base URL
    /// that is not the API root, a web server's 501 page for a POST it does not implement.
    #[error(
        "{url} answered HTTP {status} with a web page ({content_type}), not the API's JSON: is the base URL the API root (OpenAI-compatible ones end in /v1)? It began: {excerpt:?}"
    )]
    NotTheApi {
        /// The URL that was requested.
        url: String,
        /// The response's status.
        status: u16,
        /// The response's `content-type`.
        content_type: String,
        /// The start of the page's text (its tags left out).
        excerpt: String,
    },
    /// A success status with a JSON body where the event stream was asked for: the server (or
    /// a proxy) ignored `stream: true`, so it cannot be used for streamed requests.
    #[error(
        "{url} answered with a JSON body ({content_type}) instead of an event stream (text/event-stream): the server does not support streaming (`stream: true`), which dsh needs"
    )]
    NotAStream {
        /// The URL that was requested.
        url: String,
        /// The response's `content-type`, as sent.
        content_type: String,
    },
    /// The request failed before a response arrived, for another transport reason (the
    /// connection closed or reset before the response started, which is retried as a 5xx is).
    #[error("request to {url} failed ({attempts} {}): {}", attempts_word(*attempts), causes(source))]
    Transport {
        /// The URL that was requested.
        url: String,
        /// Attempts made, the first included.
        attempts: u32,
        /// The transport's error (of the last attempt).
        #[source]
        source: reqwest::Error,
    },
    /// The connection broke while the response was streaming.
    #[error("the response stream from {url} was cut: {}", causes(source))]
    StreamCut {
        /// The URL that was requested.
        url: String,
        /// The transport's error.
        #[source]
        source: reqwest::Error,
    },
    /// The response ended before the provider's end-of-stream marker.
    #[error("the response stream from {url} ended before {expected}")]
    StreamEnded {
        /// The URL that was requested.
        url: String,
        /// The marker that never came (`[DONE]`, `message_stop`).
        expected: &'static str,
    },
    /// No bytes arrived for the idle timeout while the stream was being waited on (TMO-34).
    #[error("{reason}: no data from the model for {:?}", reason_duration(reason))]
    Idle {
        /// `LLM_STREAM_IDLE_TIMEOUT after <ms>ms`.
        reason: TimeoutReason,
    },
    /// The whole-request deadline passed.
    #[error("the model request did not finish within {after:?}")]
    Deadline {
        /// The deadline.
        after: Duration,
    },
    /// A chunk the adapter could not read.
    #[error("malformed {provider} stream event: {detail}")]
    Malformed {
        /// The adapter's name.
        provider: String,
        /// What was wrong, with the offending text (shortened).
        detail: String,
        /// The parser's error, if the text was not JSON.
        #[source]
        source: Option<serde_json::Error>,
    },
    /// The provider reported an error inside the stream (Anthropic `error` event, an OpenAI
    /// `error` object in a chunk).
    #[error("{provider} reported {kind} in the stream: {message}")]
    StreamError {
        /// The adapter's name.
        provider: String,
        /// The error type (`overloaded_error`, `server_error`, ...).
        kind: String,
        /// The API's own message.
        message: String,
    },
    /// The upstream signal fired while the stream was waited on (not a timeout of ours).
    #[error("the model request was cancelled: {reason}")]
    Cancelled {
        /// The upstream's reason, as it fired.
        reason: dsh_core::AbortReason,
    },
    /// The process-wide HTTP client could not be built (no TLS backend, a broken system
    /// configuration); every request fails the same way until the process restarts.
    #[error("the HTTP client for model requests could not be built")]
    Client {
        /// The builder's error, shared by every request that asked for the client.
        #[source]
        source: Arc<reqwest::Error>,
    },
    /// A configured extra header has a name HTTP does not allow.
    #[error(
        "invalid model configuration: the header name {name:?} is not a valid HTTP header name"
    )]
    HeaderName {
        /// The name as configured.
        name: String,
        /// Why it was refused.
        #[source]
        source: reqwest::header::InvalidHeaderName,
    },
    /// A configured extra header has a value HTTP cannot carry (a newline, a control character).
    #[error("invalid model configuration: the value of the header {name} cannot be sent over HTTP")]
    HeaderValue {
        /// The header's name.
        name: String,
        /// Why its value was refused.
        #[source]
        source: reqwest::header::InvalidHeaderValue,
    },
    /// The API key holds characters a header cannot carry (often a pasted newline).
    #[error(
        "invalid model configuration: the API key in {key_env} cannot be sent in a header (does it hold a newline or a control character?)"
    )]
    ApiKey {
        /// The environment variable (or setting) the key was read from.
        key_env: String,
        /// Why the header value was refused.
        #[source]
        source: reqwest::header::InvalidHeaderValue,
    },
    /// The request could not be encoded as the provider's JSON body.
    #[error("the {provider} request body could not be encoded")]
    RequestBody {
        /// The adapter's name.
        provider: String,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A watchdog misuse (see [`WatchdogError`]).
    #[error(transparent)]
    Watchdog(#[from] WatchdogError),
}

/// The messages of `error`'s source chain, joined by `": "`; reqwest's own message (which only
/// repeats the URL) is left out when there is a deeper cause. A message that repeats the one
/// before it is said once.
fn causes(error: &reqwest::Error) -> String {
    let mut messages: Vec<String> = Vec::new();
    let mut next = std::error::Error::source(error);
    while let Some(cause) = next {
        let message = cause.to_string();
        if messages.last() != Some(&message) {
            messages.push(message);
        }
        next = cause.source();
    }
    if messages.is_empty() {
        error.to_string()
    } else {
        messages.join(": ")
    }
}

fn attempts_word(attempts: u32) -> &'static str {
    if attempts == 1 { "attempt" } else { "attempts" }
}

fn retry_hint(after: Option<Duration>) -> String {
    after
        .map(|d| format!(", the API asked to wait {}s", d.as_secs_f64()))
        .unwrap_or_default()
}

fn reason_duration(reason: &TimeoutReason) -> Duration {
    Duration::from_millis(reason.timeout_ms())
}

impl ModelError {
    /// Whether this error was raised after the response stream opened (a cut, a stall, a
    /// malformed or error event, the end of the stream). Such errors are never retried by the
    /// adapter: the caller may already have acted on chunks (LOOP-20/21).
    pub fn is_mid_stream(&self) -> bool {
        matches!(
            self,
            ModelError::StreamCut { .. }
                | ModelError::StreamEnded { .. }
                | ModelError::Idle { .. }
                | ModelError::Malformed { .. }
                | ModelError::StreamError { .. }
        )
    }

    /// The HTTP status that caused this error, if it came from one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ModelError::Unauthorized { status, .. }
            | ModelError::BadRequest { status, .. }
            | ModelError::Server { status, .. }
            | ModelError::Status { status, .. }
            | ModelError::NotTheApi { status, .. } => Some(*status),
            ModelError::ModelNotFound { .. } => Some(404),
            ModelError::RateLimited { .. } => Some(429),
            _ => None,
        }
    }

    /// The idle-timeout reason, if the stream stalled.
    pub fn idle_timeout(&self) -> Option<&TimeoutReason> {
        match self {
            ModelError::Idle { reason } => Some(reason),
            _ => None,
        }
    }
}
