//! The Anthropic Messages side of the mock: event builders in the exact wire format
//! (`event:`/`data:` pairs), the API's error JSON, and the request checks.

use serde_json::{Value, json};

use super::{Frame, Reply};
use crate::api_history::anthropic_accepts;

/// One `event:`/`data:` pair; `data` carries `type` = `name`, as the API sends it.
pub fn event(name: &str, mut data: Value) -> Frame {
    if let Value::Object(m) = &mut data {
        m.insert("type".to_owned(), Value::from(name));
    }
    Frame::Bytes(format!("event: {name}\ndata: {data}\n\n"))
}

/// `message_start` with the input usage.
pub fn message_start(input_tokens: u64, cache_read: u64) -> Frame {
    event(
        "message_start",
        json!({"message": {
            "id": "msg_mock", "type": "message", "role": "assistant", "model": "mock-model",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": cache_read, "output_tokens": 1},
        }}),
    )
}

/// `ping`.
pub fn ping() -> Frame {
    event("ping", json!({}))
}

/// A text block at `index`, its text cut into `pieces`.
pub fn text_block(index: usize, pieces: &[&str]) -> Vec<Frame> {
    let mut frames = vec![event(
        "content_block_start",
        json!({"index": index, "content_block": {"type": "text", "text": ""}}),
    )];
    frames.extend(pieces.iter().map(|p| {
        event(
            "content_block_delta",
            json!({"index": index, "delta": {"type": "text_delta", "text": p}}),
        )
    }));
    frames.push(event("content_block_stop", json!({"index": index})));
    frames
}

/// A thinking block at `index`: its text cut into `pieces`, then its signature.
pub fn thinking_block(index: usize, pieces: &[&str], signature: &str) -> Vec<Frame> {
    let mut frames = vec![event(
        "content_block_start",
        json!({"index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
    )];
    frames.extend(pieces.iter().map(|p| {
        event(
            "content_block_delta",
            json!({"index": index, "delta": {"type": "thinking_delta", "thinking": p}}),
        )
    }));
    frames.push(event(
        "content_block_delta",
        json!({"index": index, "delta": {"type": "signature_delta", "signature": signature}}),
    ));
    frames.push(event("content_block_stop", json!({"index": index})));
    frames
}

/// A `redacted_thinking` block at `index`.
pub fn redacted_block(index: usize, data: &str) -> Vec<Frame> {
    vec![
        event(
            "content_block_start",
            json!({"index": index, "content_block": {"type": "redacted_thinking", "data": data}}),
        ),
        event("content_block_stop", json!({"index": index})),
    ]
}

/// A `tool_use` block at `index`, its input JSON cut into `pieces` (`input_json_delta`).
pub fn tool_use_block(index: usize, id: &str, name: &str, pieces: &[&str]) -> Vec<Frame> {
    let mut frames = vec![event(
        "content_block_start",
        json!({"index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
    )];
    frames.extend(pieces.iter().map(|p| {
        event(
            "content_block_delta",
            json!({"index": index, "delta": {"type": "input_json_delta", "partial_json": p}}),
        )
    }));
    frames.push(event("content_block_stop", json!({"index": index})));
    frames
}

/// `message_delta` with the stop reason and output usage, then `message_stop`.
pub fn message_end(stop_reason: &str, output_tokens: u64) -> Vec<Frame> {
    vec![
        event(
            "message_delta",
            json!({"delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": output_tokens}}),
        ),
        event("message_stop", json!({})),
    ]
}

/// A whole text answer cut into `pieces`.
pub fn text_reply(pieces: &[&str]) -> Reply {
    let mut frames = vec![message_start(10, 0), ping()];
    frames.extend(text_block(0, pieces));
    frames.extend(message_end("end_turn", pieces.len() as u64));
    Reply::Stream(frames)
}

/// The API's error JSON with `status`.
pub fn error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::Status {
        status,
        headers: Vec::new(),
        body: json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
    }
}

/// An `error` event inside the stream.
pub fn error_event(kind: &str, message: &str) -> Frame {
    event(
        "error",
        json!({"error": {"type": kind, "message": message}}),
    )
}

fn refuse(message: &str) -> Option<Reply> {
    Some(error(400, "invalid_request_error", message))
}

/// The checks the real API makes before streaming; `Some(refusal)` when it would refuse.
pub(super) fn check(
    key: Option<&str>,
    api_key: Option<&str>,
    version: Option<&str>,
    body: Option<&Value>,
) -> Option<Reply> {
    if let Some(key) = key {
        match api_key {
            None => {
                return Some(error(
                    401,
                    "authentication_error",
                    "x-api-key header is required",
                ));
            }
            Some(k) if k != key => {
                return Some(error(401, "authentication_error", "invalid x-api-key"));
            }
            Some(_) => {}
        }
    }
    if version.is_none() {
        return refuse("anthropic-version: header is required");
    }
    let Some(body) = body else {
        return refuse("There was an error parsing the body of your request.");
    };
    if !body.get("model").is_some_and(Value::is_string) {
        return refuse("model: Field required");
    }
    if !body.get("max_tokens").is_some_and(Value::is_u64) {
        return refuse("max_tokens: Field required");
    }
    if body.get("stream") != Some(&Value::Bool(true)) {
        return refuse("mock provider: only streaming requests (stream: true) are scripted");
    }
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return refuse("messages: Field required");
    };
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m.get("role").and_then(Value::as_str).unwrap_or_default())
        .collect();
    if roles.first().is_some_and(|r| *r != "user") {
        return refuse("messages: first message must use the \"user\" role");
    }
    if let Some(w) = roles.windows(2).find(|w| w[0] == w[1]) {
        return refuse(&format!(
            "messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"{}\" roles in a row",
            w[0]
        ));
    }
    if let Err(refusal) = anthropic_accepts(&Value::Array(messages.clone())) {
        return refuse(&refusal.0);
    }
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        for (i, t) in tools.iter().enumerate() {
            if !t.get("name").is_some_and(Value::is_string) {
                return refuse(&format!("tools.{i}.name: Field required"));
            }
            if !t.get("input_schema").is_some_and(Value::is_object) {
                return refuse(&format!("tools.{i}.input_schema: Field required"));
            }
        }
    }
    None
}
