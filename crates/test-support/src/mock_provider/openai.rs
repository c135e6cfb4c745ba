//! The OpenAI Chat Completions side of the mock: chunk builders in the exact wire format
//! (`data: {chunk}` events, `data: [DONE]`), the API's error JSON, and the request checks.

use serde_json::{Value, json};

use super::{Frame, Reply};
use crate::api_history::openai_accepts;

/// One `data:` event.
pub fn data(chunk: &Value) -> Frame {
    Frame::Bytes(format!("data: {chunk}\n\n"))
}

/// The end marker `data: [DONE]`.
pub fn done() -> Frame {
    Frame::Bytes("data: [DONE]\n\n".to_owned())
}

/// A `chat.completion.chunk` with one choice.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "mock-model",
        "system_fingerprint": "fp_mock",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
    })
}

/// The usage chunk `stream_options.include_usage` asks for (empty `choices`).
pub fn usage(prompt: u64, completion: u64, cached: u64, reasoning: u64) -> Value {
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "mock-model",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        },
    })
}

/// A first chunk with the role, as servers send it.
pub fn role() -> Frame {
    data(&chunk(json!({"role": "assistant", "content": ""}), None))
}

/// Text deltas, one event each.
pub fn text(pieces: &[&str]) -> Vec<Frame> {
    pieces
        .iter()
        .map(|p| data(&chunk(json!({"content": p}), None)))
        .collect()
}

/// DeepSeek `reasoning_content` deltas, one event each.
pub fn reasoning(pieces: &[&str]) -> Vec<Frame> {
    pieces
        .iter()
        .map(|p| {
            data(&chunk(
                json!({"content": null, "reasoning_content": p}),
                None,
            ))
        })
        .collect()
}

/// One tool call at `index`: a first delta with id, name and empty arguments, then the
/// arguments text cut into `pieces`.
pub fn tool_call(index: usize, id: &str, name: &str, pieces: &[&str]) -> Vec<Frame> {
    let mut frames = vec![data(&chunk(
        json!({"tool_calls": [{"index": index, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""}}]}),
        None,
    ))];
    frames.extend(pieces.iter().map(|p| {
        data(&chunk(
            json!({"tool_calls": [{"index": index, "function": {"arguments": p}}]}),
            None,
        ))
    }));
    frames
}

/// The closing events: a chunk with `finish_reason`, the usage chunk, `[DONE]`.
pub fn finish(reason: &str, prompt: u64, completion: u64) -> Vec<Frame> {
    vec![
        data(&chunk(json!({}), Some(reason))),
        data(&usage(prompt, completion, 0, 0)),
        done(),
    ]
}

/// A whole text answer cut into `pieces`.
pub fn text_reply(pieces: &[&str]) -> Reply {
    let mut frames = vec![role()];
    frames.extend(text(pieces));
    frames.extend(finish("stop", 10, pieces.len() as u64));
    Reply::Stream(frames)
}

/// The API's error JSON with `status`.
pub fn error(status: u16, message: &str, kind: &str, code: Option<&str>) -> Reply {
    Reply::Status {
        status,
        headers: Vec::new(),
        body: json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
            .to_string(),
    }
}

fn refuse(message: &str) -> Option<Reply> {
    Some(error(400, message, "invalid_request_error", None))
}

/// The checks the real API makes before streaming: the key (when one is required), the body's
/// shape, and the history rules; `Some(refusal)` when it would refuse.
pub(super) fn check(
    key: Option<&str>,
    authorization: Option<&str>,
    body: Option<&Value>,
) -> Option<Reply> {
    if let Some(key) = key {
        let given = authorization.and_then(|a| a.strip_prefix("Bearer "));
        match given {
            None => {
                return Some(error(
                    401,
                    "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                    "invalid_request_error",
                    None,
                ));
            }
            Some(g) if g != key => {
                let shown: String = g.chars().take(4).collect();
                return Some(error(
                    401,
                    &format!(
                        "Incorrect API key provided: {shown}****. You can find your API key at https://platform.openai.com/account/api-keys."
                    ),
                    "invalid_request_error",
                    Some("invalid_api_key"),
                ));
            }
            Some(_) => {}
        }
    }
    let Some(body) = body else {
        return refuse(
            "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
        );
    };
    if !body.get("model").is_some_and(Value::is_string) {
        return refuse("you must provide a model parameter");
    }
    if body.get("stream") != Some(&Value::Bool(true)) {
        return refuse("mock provider: only streaming requests (stream: true) are scripted");
    }
    let Some(messages) = body.get("messages") else {
        return refuse("Missing required parameter: 'messages'.");
    };
    if let Err(refusal) = openai_accepts(messages) {
        return refuse(&format!("Invalid parameter: {refusal}"));
    }
    if let Some(tools) = body.get("tools") {
        let Some(tools) = tools.as_array() else {
            return refuse("Invalid type for 'tools': expected an array.");
        };
        for (i, t) in tools.iter().enumerate() {
            let f = t.get("function");
            if t.get("type").and_then(Value::as_str) != Some("function")
                || !f.and_then(|f| f.get("name")).is_some_and(Value::is_string)
            {
                return refuse(&format!(
                    "Missing required parameter: 'tools[{i}].function'."
                ));
            }
            if f.and_then(|f| f.get("parameters"))
                .is_some_and(|p| !p.is_object())
            {
                return refuse(&format!(
                    "Invalid type for 'tools[{i}].function.parameters': expected an object."
                ));
            }
        }
    }
    None
}
