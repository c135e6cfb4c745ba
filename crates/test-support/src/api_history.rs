//! Would a provider accept this history? Checks of an exported `messages` array against the
//! request rules the OpenAI Chat Completions and Anthropic Messages APIs document (and state in
//! their 400 errors), so tests can assert that what dsh exports would be taken back by the real
//! APIs as request history.
//!
//! OpenAI (`POST /v1/chat/completions`, `messages`):
//! - every message has a `role` of `system`, `developer`, `user`, `assistant` or `tool`;
//! - an assistant message has `content` (string, array or null; null only with `tool_calls`);
//!   `tool_calls`, when present, is a non-empty array of `{id, type: "function", function:
//!   {name, arguments}}` with string `id` (at most 40 characters), `name` and `arguments`;
//! - "An assistant message with 'tool_calls' must be followed by tool messages responding to each
//!   'tool_call_id'": the messages right after it are `tool` messages, one per call id, before
//!   any other message;
//! - "messages with role 'tool' must be a response to a preceding message with 'tool_calls'": a
//!   `tool` message answers a call of that run, with a string `tool_call_id` and `content`;
//! - call ids are unique in the request.
//!
//! Anthropic (`POST /v1/messages`, `messages`):
//! - roles are `user` and `assistant` only, and content is a string or a non-empty array of
//!   blocks (every message but a final assistant one non-empty); text blocks are non-empty;
//! - `tool_use` blocks have an `id` matching `^[a-zA-Z0-9_-]+$`, a `name` and an object
//!   `input`; ids are unique in the request;
//! - "`tool_use` ids were found without `tool_result` blocks immediately after": each `tool_use`
//!   of an assistant message has its `tool_result` in the very next message, a user message;
//! - "unexpected `tool_use_id` found in `tool_result` blocks ... Each `tool_result` block must have
//!   a corresponding `tool_use` block in the previous message";
//! - in a user message, `tool_result` blocks come first, before any other block;
//! - `thinking` blocks carry a string `signature`, `redacted_thinking` blocks a string `data`.

use std::collections::HashSet;

use serde_json::Value;

/// Why a provider would refuse a history: its 400 message, naming the message at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

impl Refusal {
    /// Whether the message contains `text`.
    pub fn contains(&self, text: &str) -> bool {
        self.0.contains(text)
    }
}

fn at(i: usize, what: &str) -> String {
    format!("messages[{i}]: {what}")
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Checks an OpenAI Chat Completions `messages` array; the error names the first message the
/// API would refuse and why.
pub fn openai_accepts(messages: &Value) -> Result<(), Refusal> {
    openai_rules(messages).map_err(Refusal)
}

fn openai_rules(messages: &Value) -> Result<(), String> {
    let list = messages
        .as_array()
        .ok_or_else(|| "messages must be an array".to_owned())?;
    let mut ids = HashSet::new();
    // Calls of the last assistant message still waiting for their tool message.
    let mut waiting: Vec<String> = Vec::new();
    let mut answering = false;
    for (i, m) in list.iter().enumerate() {
        let role = str_of(m, "role").ok_or_else(|| at(i, "no role"))?;
        if role != "tool" && !waiting.is_empty() {
            return Err(at(
                i,
                &format!(
                    "an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'; these did not have response messages: {}",
                    waiting.join(", ")
                ),
            ));
        }
        match role {
            "system" | "developer" | "user" => {
                answering = false;
                match m.get("content") {
                    Some(Value::String(_)) | Some(Value::Array(_)) => {}
                    _ => return Err(at(i, "content must be a string or an array")),
                }
            }
            "assistant" => {
                let calls = m.get("tool_calls");
                match (m.get("content"), calls) {
                    (Some(Value::String(_)) | Some(Value::Array(_)), _) => {}
                    (Some(Value::Null) | None, Some(_)) => {}
                    _ => return Err(at(i, "content is required unless tool_calls is given")),
                }
                answering = false;
                if let Some(calls) = calls {
                    let calls = calls
                        .as_array()
                        .ok_or_else(|| at(i, "tool_calls must be an array"))?;
                    if calls.is_empty() {
                        return Err(at(i, "tool_calls must not be an empty array"));
                    }
                    for (k, c) in calls.iter().enumerate() {
                        let id = str_of(c, "id").ok_or_else(|| {
                            at(i, &format!("tool_calls[{k}].id must be a string"))
                        })?;
                        if id.chars().count() > 40 {
                            return Err(at(
                                i,
                                &format!("tool_calls[{k}].id: string too long (maximum length 40)"),
                            ));
                        }
                        if str_of(c, "type") != Some("function") {
                            return Err(at(
                                i,
                                &format!("tool_calls[{k}].type must be \"function\""),
                            ));
                        }
                        let f = c.get("function");
                        if f.and_then(|f| str_of(f, "name")).is_none()
                            || f.and_then(|f| str_of(f, "arguments")).is_none()
                        {
                            return Err(at(
                                i,
                                &format!(
                                    "tool_calls[{k}].function needs string name and arguments"
                                ),
                            ));
                        }
                        if !ids.insert(id.to_owned()) {
                            return Err(at(i, &format!("duplicate tool call id {id}")));
                        }
                        waiting.push(id.to_owned());
                    }
                    answering = true;
                }
            }
            "tool" => {
                let id = str_of(m, "tool_call_id")
                    .ok_or_else(|| at(i, "tool_call_id must be a string"))?;
                if !matches!(
                    m.get("content"),
                    Some(Value::String(_)) | Some(Value::Array(_))
                ) {
                    return Err(at(i, "content must be a string or an array"));
                }
                let Some(k) = waiting.iter().position(|w| w == id).filter(|_| answering) else {
                    return Err(at(
                        i,
                        &format!(
                            "messages with role 'tool' must be a response to a preceding message with 'tool_calls' (tool_call_id {id})"
                        ),
                    ));
                };
                waiting.remove(k);
            }
            other => return Err(at(i, &format!("unknown role {other}"))),
        }
    }
    if !waiting.is_empty() {
        return Err(format!(
            "the last assistant message's tool_call_ids did not have response messages: {}",
            waiting.join(", ")
        ));
    }
    Ok(())
}

fn anthropic_id_ok(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Checks an Anthropic Messages `messages` array; the error names the first message the API
/// would refuse and why.
pub fn anthropic_accepts(messages: &Value) -> Result<(), Refusal> {
    anthropic_rules(messages).map_err(Refusal)
}

fn anthropic_rules(messages: &Value) -> Result<(), String> {
    let list = messages
        .as_array()
        .ok_or_else(|| "messages must be an array".to_owned())?;
    let mut ids = HashSet::new();
    let mut waiting: Vec<String> = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let role = str_of(m, "role").ok_or_else(|| at(i, "no role"))?;
        let last = i + 1 == list.len();
        let blocks: Vec<Value> = match m.get("content") {
            Some(Value::String(s)) if s.is_empty() && !(last && role == "assistant") => {
                return Err(at(i, "text content must be non-empty"));
            }
            Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
            Some(Value::Array(a)) => a.clone(),
            _ => return Err(at(i, "content must be a string or an array")),
        };
        if blocks.is_empty() && !(last && role == "assistant") {
            return Err(at(
                i,
                "all messages must have non-empty content except for the optional final assistant message",
            ));
        }
        match role {
            "assistant" => {
                if !waiting.is_empty() {
                    return Err(at(
                        i,
                        &format!(
                            "`tool_use` ids were found without `tool_result` blocks immediately after: {}",
                            waiting.join(", ")
                        ),
                    ));
                }
                for (k, b) in blocks.iter().enumerate() {
                    match str_of(b, "type") {
                        Some("text") if str_of(b, "text").is_some_and(|t| !t.is_empty()) => {}
                        Some("text") => {
                            return Err(at(
                                i,
                                &format!("content[{k}]: text content blocks must be non-empty"),
                            ));
                        }
                        Some("thinking") => {
                            if str_of(b, "thinking").is_none() || str_of(b, "signature").is_none() {
                                return Err(at(
                                    i,
                                    &format!(
                                        "content[{k}]: thinking blocks need string thinking and signature"
                                    ),
                                ));
                            }
                        }
                        Some("redacted_thinking") => {
                            if str_of(b, "data").is_none() {
                                return Err(at(
                                    i,
                                    &format!("content[{k}]: redacted_thinking needs string data"),
                                ));
                            }
                        }
                        Some("tool_use") => {
                            let id = str_of(b, "id").unwrap_or_default();
                            if !anthropic_id_ok(id) {
                                return Err(at(
                                    i,
                                    &format!(
                                        "content[{k}].id: String should match pattern '^[a-zA-Z0-9_-]+$' (got {id:?})"
                                    ),
                                ));
                            }
                            if str_of(b, "name").is_none()
                                || !b.get("input").is_some_and(Value::is_object)
                            {
                                return Err(at(
                                    i,
                                    &format!(
                                        "content[{k}]: tool_use needs a name and an object input"
                                    ),
                                ));
                            }
                            if !ids.insert(id.to_owned()) {
                                return Err(at(
                                    i,
                                    &format!("content[{k}]: `tool_use` ids must be unique ({id})"),
                                ));
                            }
                            waiting.push(id.to_owned());
                        }
                        other => {
                            return Err(at(
                                i,
                                &format!(
                                    "content[{k}]: block type {other:?} is not valid in an assistant message"
                                ),
                            ));
                        }
                    }
                }
            }
            "user" => {
                let mut results_done = false;
                let mut answered = Vec::new();
                for (k, b) in blocks.iter().enumerate() {
                    match str_of(b, "type") {
                        Some("tool_result") => {
                            if results_done {
                                return Err(at(
                                    i,
                                    &format!(
                                        "content[{k}]: tool_result blocks must come first in a user message"
                                    ),
                                ));
                            }
                            let id = str_of(b, "tool_use_id").unwrap_or_default();
                            if !waiting.iter().any(|w| w == id) || answered.contains(&id) {
                                return Err(at(
                                    i,
                                    &format!(
                                        "content[{k}]: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                                    ),
                                ));
                            }
                            answered.push(id);
                            match b.get("content") {
                                None | Some(Value::String(_)) => {}
                                Some(Value::Array(inner)) => {
                                    for c in inner {
                                        match str_of(c, "type") {
                                            Some("text")
                                                if str_of(c, "text")
                                                    .is_some_and(|t| !t.is_empty()) => {}
                                            Some("image") => {}
                                            _ => {
                                                return Err(at(
                                                    i,
                                                    &format!(
                                                        "content[{k}]: tool_result content holds text (non-empty) and image blocks only"
                                                    ),
                                                ));
                                            }
                                        }
                                    }
                                }
                                Some(_) => {
                                    return Err(at(
                                        i,
                                        &format!(
                                            "content[{k}]: tool_result content must be a string or an array"
                                        ),
                                    ));
                                }
                            }
                        }
                        Some("text") if str_of(b, "text").is_some_and(|t| !t.is_empty()) => {
                            results_done = true
                        }
                        Some("text") => {
                            return Err(at(
                                i,
                                &format!("content[{k}]: text content blocks must be non-empty"),
                            ));
                        }
                        Some("image") | Some("document") => results_done = true,
                        other => {
                            return Err(at(
                                i,
                                &format!(
                                    "content[{k}]: block type {other:?} is not valid in a user message"
                                ),
                            ));
                        }
                    }
                }
                let missing: Vec<String> = waiting
                    .iter()
                    .filter(|w| !answered.contains(&w.as_str()))
                    .cloned()
                    .collect();
                if !missing.is_empty() {
                    return Err(at(
                        i,
                        &format!(
                            "`tool_use` ids were found without `tool_result` blocks immediately after: {}",
                            missing.join(", ")
                        ),
                    ));
                }
                waiting.clear();
            }
            other => {
                return Err(at(
                    i,
                    &format!("role must be user or assistant, got {other}"),
                ));
            }
        }
    }
    if !waiting.is_empty() {
        return Err(format!(
            "`tool_use` ids were found without `tool_result` blocks immediately after: {}",
            waiting.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_refuses_an_unanswered_call_and_accepts_the_answered_one() {
        let call = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "read", "arguments": "{}"}}]});
        let answer = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "x"});
        let user = json!({"role": "user", "content": "go"});
        let err = openai_accepts(&json!([user, call, answer("a"), user])).unwrap_err();
        assert!(err.contains("did not have response messages: b"), "{err}");
        assert!(openai_accepts(&json!([user, call, answer("b"), answer("a"), user])).is_ok());
        let err = openai_accepts(&json!([user, answer("a")])).unwrap_err();
        assert!(err.contains("must be a response"), "{err}");
        let err = openai_accepts(&json!([call, answer("a"), answer("b"), call])).unwrap_err();
        assert!(err.contains("duplicate tool call id"), "{err}");
    }

    #[test]
    fn anthropic_refuses_bad_ids_missing_results_and_text_before_results() {
        let call = |id: &str| {
            json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "read", "input": {}}]})
        };
        let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": [{"type": "text", "text": "x"}]});
        let text = json!({"type": "text", "text": "more"});
        assert!(
            anthropic_accepts(
                &json!([call("a"), {"role": "user", "content": [result("a"), text]}])
            )
            .is_ok()
        );
        let err = anthropic_accepts(
            &json!([call("a"), {"role": "user", "content": [text, result("a")]}]),
        )
        .unwrap_err();
        assert!(err.contains("must come first"), "{err}");
        let err =
            anthropic_accepts(&json!([call("a.b"), {"role": "user", "content": [result("a.b")]}]))
                .unwrap_err();
        assert!(err.contains("pattern"), "{err}");
        let err = anthropic_accepts(&json!([call("a"), {"role": "user", "content": [text]}]))
            .unwrap_err();
        assert!(err.contains("without `tool_result`"), "{err}");
        let err = anthropic_accepts(&json!([call("a")])).unwrap_err();
        assert!(err.contains("without `tool_result`"), "{err}");
        let thinking =
            json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]});
        assert!(
            anthropic_accepts(&json!([thinking]))
                .unwrap_err()
                .contains("signature")
        );
    }
}
