//! The HTTP side every adapter shares: one process-wide `reqwest::Client`, the timeouts of a
//! request ([`HttpSettings`]), and `open`, which sends a request and turns an unsuccessful
//! status into a [`ModelError`] a user can act on, retrying 429, 5xx and a connection closed
//! before the response started.
//!
//! Guarantees: a request is retried only on a 429 or a 5xx status that may pass (never 501,
//! 505 or another 5xx no retry can change) or a connection closed or reset before the response
//! started, at most as often as the policy allows, waiting what
//! `Retry-After` asks; never once a response with a success status came back (its stream
//! belongs to the caller; a success answered with a JSON body instead of an event stream is
//! [`ModelError::NotAStream`]); every wait and send stays within the whole-request deadline;
//! an idle timeout the watchdog would refuse (TMO-38) is refused before anything is sent.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio::time::Instant;

use crate::error::ModelError;
use crate::retry::{RetryPolicy, retry_after, retryable_status};

/// The timeouts and retries of one model request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpSettings {
    /// No bytes for this long while the stream is waited on fails it with
    /// `LLM_STREAM_IDLE_TIMEOUT` (TMO-34).
    pub idle_timeout: Duration,
    /// The whole request, retries and streaming included, must end within this.
    pub deadline: Option<Duration>,
    /// Retries of 429 and 5xx answers (but those no retry can change, such as 501) and of
    /// connections closed before the response started.
    pub retry: RetryPolicy,
}

impl Default for HttpSettings {
    /// A 5-minute idle timeout (reasoning models can think for a while before a byte), no
    /// deadline, the default retry policy.
    fn default() -> Self {
        HttpSettings {
            idle_timeout: Duration::from_secs(300),
            deadline: None,
            retry: RetryPolicy::default(),
        }
    }
}

/// The process-wide client: rustls, a 30 s connect timeout, no overall timeout (the adapters
/// apply their own). Built once; a failure to build it is reported each time it is asked for.
pub fn shared_client() -> Result<reqwest::Client, ModelError> {
    static CLIENT: OnceLock<Result<reqwest::Client, Arc<reqwest::Error>>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(30))
                .build()
                .map_err(Arc::new)
        })
        .clone()
        .map_err(|source| ModelError::Client { source })
}

/// What an adapter tells [`open`] about itself, for errors and retries.
pub(crate) struct Target<'a> {
    pub provider: &'a str,
    pub url: &'a str,
    pub model: &'a str,
    pub key_env: &'a str,
}

/// Builds the headers of a JSON request with a streamed answer.
pub(crate) fn json_headers(extra: &[(String, String)]) -> Result<HeaderMap, ModelError> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    for (name, value) in extra {
        let name =
            HeaderName::from_bytes(name.as_bytes()).map_err(|source| ModelError::HeaderName {
                name: name.clone(),
                source,
            })?;
        let value = HeaderValue::from_str(value).map_err(|source| ModelError::HeaderValue {
            name: name.to_string(),
            source,
        })?;
        headers.insert(name, value);
    }
    Ok(headers)
}

/// Runs `fut` within the deadline, if any.
pub(crate) async fn within<T>(
    deadline: Option<(Instant, Duration)>,
    fut: impl Future<Output = T>,
) -> Result<T, ModelError> {
    match deadline {
        Some((at, after)) => tokio::time::timeout_at(at, fut)
            .await
            .map_err(|_| ModelError::Deadline { after }),
        None => Ok(fut.await),
    }
}

/// Sends `body` to the target and returns the response once its status is a success,
/// retrying 429 and the 5xx answers that may pass as the policy allows.
pub(crate) async fn open(
    client: &reqwest::Client,
    target: &Target<'_>,
    headers: HeaderMap,
    body: Bytes,
    settings: &HttpSettings,
    deadline: Option<(Instant, Duration)>,
) -> Result<reqwest::Response, ModelError> {
    // An idle timeout the watchdog refuses would fail the stream once it opened: refuse it
    // before anything is sent.
    crate::watchdog::timeout_ms(settings.idle_timeout)?;
    let mut attempt: u32 = 1;
    loop {
        let send = client
            .post(target.url)
            .headers(headers.clone())
            .body(body.clone())
            .send();
        let response = match within(deadline, send).await? {
            Ok(response) => response,
            Err(source) => {
                if closed_before_response(&source)
                    && attempt < settings.retry.max_attempts
                    && let Some(delay) = retry_delay(settings, attempt, None, deadline)
                {
                    tracing::debug!(
                        provider = target.provider,
                        error = %source,
                        attempt,
                        ?delay,
                        "retrying after the connection closed"
                    );
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                    continue;
                }
                return Err(transport_error(target.url, source, attempt));
            }
        };
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let html = content_type.to_ascii_lowercase().starts_with("text/html");
        let retryable = retryable_status(status);
        if response.status().is_success() && !html {
            if is_json(&content_type) {
                return Err(ModelError::NotAStream {
                    url: target.url.to_owned(),
                    content_type,
                });
            }
            return Ok(response);
        }
        let wait = retry_after(response.headers(), SystemTime::now());
        let text = within(deadline, response.text()).await?.unwrap_or_default();
        if html && !retryable {
            // A web page where the API should answer, whatever its status (a site's 404 page
            // at a base URL that is not the API root, a proxy's login page, a web server's 501
            // page for a POST it does not implement). A 5xx page that may pass (a proxy in
            // front of a real API) is retried as any such 5xx is.
            return Err(ModelError::NotTheApi {
                url: target.url.to_owned(),
                status,
                content_type,
                excerpt: page_text(&text).chars().take(120).collect(),
            });
        }
        let message = if html {
            format!(
                "{} answered with a web page ({content_type}), not the API's JSON error",
                target.url
            )
        } else {
            error_message(&text)
        };
        if retryable
            && attempt < settings.retry.max_attempts
            && let Some(delay) = retry_delay(settings, attempt, wait, deadline)
        {
            tracing::debug!(
                provider = target.provider,
                status,
                attempt,
                ?delay,
                "retrying"
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
            continue;
        }
        return Err(status_error(target, status, attempt, wait, message));
    }
}

/// The words a browser would show of an HTML page: its tags, scripts and styles left out,
/// whitespace runs made one space (entities are kept as written).
fn page_text(html: &str) -> String {
    let mut text = String::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        text.push_str(&rest[..open]);
        text.push(' ');
        let tag = &rest[open..];
        let lower = tag.get(..7).unwrap_or(tag).to_ascii_lowercase();
        let close = if lower.starts_with("<script") {
            "</script"
        } else if lower.starts_with("<style") {
            "</style"
        } else {
            ""
        };
        // Past the element's end tag (a script or a style), else past this tag.
        let skip_to = if close.is_empty() {
            0
        } else {
            tag.to_ascii_lowercase().find(close).unwrap_or(tag.len())
        };
        rest = match tag[skip_to..].find('>') {
            Some(end) => &tag[skip_to + end + 1..],
            None => "",
        };
    }
    text.push_str(rest);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether a `content-type` names JSON (`application/json`, `application/<x>+json`), never an
/// event stream.
fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The wait before retry number `attempt`, if it ends before the deadline.
fn retry_delay(
    settings: &HttpSettings,
    attempt: u32,
    wait: Option<Duration>,
    deadline: Option<(Instant, Duration)>,
) -> Option<Duration> {
    let delay = settings.retry.delay(attempt, wait);
    deadline
        .is_none_or(|(at, _)| Instant::now() + delay < at)
        .then_some(delay)
}

/// Whether a failed send broke on a connection that was reached (closed or reset by the server
/// or a proxy before the response's first byte), not on reaching it: no response started, so
/// nothing of it was acted on, and sending again is as safe as after a 5xx.
fn closed_before_response(source: &reqwest::Error) -> bool {
    source.is_request() && !source.is_connect() && !source.is_timeout()
}

fn transport_error(url: &str, source: reqwest::Error, attempts: u32) -> ModelError {
    if source.is_connect() {
        ModelError::Connect {
            url: url.to_owned(),
            source,
        }
    } else {
        ModelError::Transport {
            url: url.to_owned(),
            attempts,
            source,
        }
    }
}

fn status_error(
    target: &Target<'_>,
    status: u16,
    attempts: u32,
    retry_after: Option<Duration>,
    message: String,
) -> ModelError {
    let provider = target.provider.to_owned();
    match status {
        401 | 403 => ModelError::Unauthorized {
            provider,
            status,
            key_env: target.key_env.to_owned(),
            message,
        },
        404 => ModelError::ModelNotFound {
            provider,
            model: target.model.to_owned(),
            message,
        },
        400 | 413 | 422 => ModelError::BadRequest {
            provider,
            status,
            message,
        },
        429 => ModelError::RateLimited {
            provider,
            attempts,
            retry_after,
            message,
        },
        // A 5xx no retry can change (501, 505, ...) is `Status`, as any other status.
        500..=599 if retryable_status(status) => ModelError::Server {
            provider,
            status,
            attempts,
            message,
        },
        _ => ModelError::Status {
            provider,
            status,
            message,
        },
    }
}

/// `error.message` of an error body in either provider's shape (OpenAI `{error: {message}}`,
/// Anthropic `{type: error, error: {type, message}}`), else the body itself (shortened).
pub(crate) fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        let e = v.get("error")?;
        e.get("message")
            .and_then(|m| m.as_str())
            .or_else(|| e.as_str())
            .map(str::to_owned)
    });
    message.unwrap_or_else(|| shorten(body.trim()))
}

/// At most 500 characters of `text`.
pub(crate) fn shorten(text: &str) -> String {
    match text.char_indices().nth(500) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::page_text;

    #[test]
    fn a_page_shows_its_words_without_tags_scripts_or_styles() {
        let page = "<html><head><title>502 Bad\n Gateway</title><style>p { x: 1 }</style>\
                    <SCRIPT>if (a < b) go()</SCRIPT></head><body><p>Try later.</p></body></html>";
        assert_eq!(page_text(page), "502 Bad Gateway Try later.");
        assert_eq!(page_text("plain <b>bold"), "plain bold");
        assert_eq!(page_text("cut <a href="), "cut");
    }
}
