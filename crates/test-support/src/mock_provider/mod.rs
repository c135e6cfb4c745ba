//! A mock model provider on 127.0.0.1 (feature `mock-provider`): real HTTP and SSE, serving
//! `POST /v1/chat/completions` (OpenAI Chat Completions) and `POST /v1/messages` (Anthropic
//! Messages), replaying scripted replies in each provider's exact wire format.
//!
//! Guarantees: every request is recorded (path, headers, body) before anything else, refused or
//! not; each request is checked the way the real API checks it (the key when one is required,
//! the body's shape and its history rules, through [`crate::api_history`]) and a refusal is
//! answered with the real API's status and error JSON, consuming no scripted reply; otherwise
//! the next scripted reply is served, in order, whatever the route (500 when none is left).

pub mod anthropic;
pub mod openai;
mod server;

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;

pub use server::MockProvider;

/// One piece of a streamed reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// Bytes written as they are (one or more SSE events, or a part of one).
    Bytes(String),
    /// Wait this long before the next frame (real time).
    Pause(Duration),
    /// Break the connection here, after the bytes before it were flushed: the body never
    /// completes.
    Cut,
    /// Send nothing more and never end (the client's idle timeout has to notice).
    Stall,
}

/// What the server answers to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// 200 with `text/event-stream`, the frames in order, then the end of the body.
    Stream(Vec<Frame>),
    /// Any status with headers and a JSON body.
    Status {
        /// The status.
        status: u16,
        /// Extra headers (`retry-after`, ...).
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// Read the request, then close the connection without sending a byte of a response (a
    /// proxy or a server that drops the connection; the client sees it closed or reset before
    /// the response started).
    Close,
}

impl Reply {
    /// This reply with one more header (only a status reply carries headers).
    pub fn with_header(self, name: &str, value: &str) -> Reply {
        match self {
            Reply::Status {
                status,
                mut headers,
                body,
            } => {
                headers.push((name.to_owned(), value.to_owned()));
                Reply::Status {
                    status,
                    headers,
                    body,
                }
            }
            other => other,
        }
    }
}

/// A request the server received.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// The path (`/v1/chat/completions`).
    pub path: String,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body as it came.
    pub raw: String,
    /// The body parsed, or `Null` if it was not JSON.
    pub body: Value,
    /// The status of a refusal by the server's checks, if it refused.
    pub refused: Option<u16>,
}

impl Recorded {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    key: Mutex<Option<String>>,
}
