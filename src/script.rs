//! Scripted models: JSON Lines, one assistant message per line, in the OpenAI Chat Completions
//! shape (`tool_calls` with `function.arguments` as a string) or the Anthropic Messages shape
//! (`tool_use` blocks), turned into the reference's assistant message
//! (`{role, content: [{type: "text"} | {type: "tool-call", id, name, arguments}], source, id}`).
//!
//! The whole script is validated before anything runs: a bad line is an error naming its number.
//! A message without tool calls ends the turn, so only the last line may lack them.
//!
//! Nothing is guessed: a key the two shapes do not define (`tool_call`, `inputs`, `{"foo":1}`)
//! is refused with the keys that are known and, when one is close, the one that was probably
//! meant; a line with neither `content` nor `tool_calls` is refused rather than run as a turn
//! with no calls. A whole Chat Completions response (`{"object":"chat.completion","choices":
//! [...]}`) with exactly one choice is accepted by taking that choice's `message`.

use std::collections::HashSet;
use std::fmt;

use dsh_core::Json;
use serde_json::{Value, json};

/// A bad script line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "script line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ScriptError {}

/// A validated script: one reference-shape assistant message per step.
#[derive(Clone, Debug)]
pub struct Script {
    /// The steps, in order.
    pub steps: Vec<Json>,
    /// The script line of each step.
    pub lines: Vec<usize>,
}

impl Script {
    /// Refuses a script reusing a call id that `used` (a resumed session's ids) already holds,
    /// naming the script line.
    pub fn check_unused(
        &self,
        used: &std::collections::HashSet<String>,
    ) -> Result<(), ScriptError> {
        for (step, line) in self.steps.iter().zip(&self.lines) {
            if let Some(id) = call_ids(step.value()).find(|id| used.contains(*id)) {
                return Err(ScriptError {
                    line: *line,
                    message: format!(
                        "call id \"{id}\" is already used in the session being resumed: call ids must be unique in a session"
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Parses and validates a whole script. Blank lines are skipped.
pub fn parse_script(text: &str) -> Result<Script, ScriptError> {
    let mut steps = Vec::new();
    let mut lines = Vec::new();
    // A message without tool calls ends the turn: nothing may follow it.
    let mut ended_at: Option<usize> = None;
    // Call ids are unique per session: the line that first used each.
    let mut first_use: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let err = |message: String| ScriptError {
            line: line_no,
            message,
        };
        if let Some(end) = ended_at {
            return Err(err(format!(
                "the message on line {end} has no tool calls, so it ends the turn and this line would never run"
            )));
        }
        let value = dsh_core::json::parse_value(line).map_err(|e| err(e.to_string()))?;
        let parsed = parse_message(&value);
        // A line may nest thousands of levels: drop it without recursion.
        dsh_core::json::dismantle(value);
        let message = parsed.map_err(|e| err(e.0))?;
        for id in call_ids(&message) {
            if let Some(first) = first_use.insert(id.to_owned(), line_no) {
                return Err(err(format!(
                    "call id \"{id}\" was already used on line {first}: call ids must be unique in a session (the providers refuse a history with two calls of one id)"
                )));
            }
        }
        let calls = message["content"]
            .as_array()
            .is_some_and(|b| b.iter().any(|b| b["type"] == "tool-call"));
        if !calls {
            ended_at = Some(line_no);
        }
        lines.push(line_no);
        steps.push(Json::new(message).map_err(|e| ScriptError {
            line: line_no,
            message: e.to_string(),
        })?);
    }
    if steps.is_empty() {
        return Err(ScriptError {
            line: 1,
            message: "the script holds no assistant message".into(),
        });
    }
    Ok(Script { steps, lines })
}

/// The call ids of a reference-shape assistant message, in block order.
pub fn call_ids(message: &Value) -> impl Iterator<Item = &str> {
    message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool-call")
        .filter_map(|b| b["id"].as_str())
}

fn non_empty_str<'a>(v: Option<&'a Value>, what: &str) -> Result<&'a str, String> {
    match v.and_then(Value::as_str) {
        Some(s) if !s.is_empty() => Ok(s),
        Some(_) => Err(format!("{what} must not be empty")),
        None => Err(format!("{what} must be a string")),
    }
}

/// Compact JSON text of a borrowed value, serialized on a stack grown for its depth: a tool
/// input may nest up to `dsh_core::json::MAX_DEPTH` levels, which plain recursion (a clone, a
/// serialization) would not survive.
fn json_text(v: &Value) -> Result<String, dsh_core::JsonError> {
    let depth = dsh_core::json::depth_of(v);
    if depth > dsh_core::json::MAX_DEPTH {
        return Err(dsh_core::JsonError::TooDeep {
            max: dsh_core::json::MAX_DEPTH,
        });
    }
    let write =
        || serde_json::to_string(v).map_err(|e| dsh_core::JsonError::Snapshot(e.to_string()));
    if depth <= 64 {
        write()
    } else {
        stacker::grow(depth.saturating_mul(1024) + (1 << 20), write)
    }
}

/// A value quoted in an error message: scalars and shallow containers as compact JSON (cut at
/// 100 characters), deeper ones by kind only (printing them would recurse once per level).
fn shown(v: &Value) -> String {
    if (v.is_array() || v.is_object()) && dsh_core::json::depth_of(v) > 16 {
        let kind = if v.is_array() { "array" } else { "object" };
        return format!("a deeply nested {kind}");
    }
    let text = v.to_string();
    if text.chars().count() > 100 {
        let cut: String = text.chars().take(99).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// Keys an assistant message may carry: the two shapes' own and the envelope fields their APIs
/// return beside them (ids, model, usage, stop reasons), which carry nothing to run.
const MESSAGE_KEYS: &[&str] = &[
    "role",
    "content",
    "tool_calls",
    // OpenAI message fields that carry no call.
    "refusal",
    "annotations",
    "audio",
    "name",
    "reasoning_content",
    // Anthropic Messages response fields.
    "id",
    "type",
    "model",
    "stop_reason",
    "stop_sequence",
    "usage",
];
const TOOL_USE_KEYS: &[&str] = &["type", "id", "name", "input", "cache_control"];
const TEXT_KEYS: &[&str] = &["type", "text", "citations", "cache_control"];
const THINKING_KEYS: &[&str] = &["type", "thinking", "text", "signature"];
const TOOL_CALL_KEYS: &[&str] = &["id", "type", "function", "index"];
const FUNCTION_KEYS: &[&str] = &["name", "arguments"];

/// Refuses a key of `obj` not in `known`, naming it, the likely intended key and the known ones.
fn known_keys(
    obj: &serde_json::Map<String, Value>,
    known: &[&str],
    at: &str,
) -> Result<(), String> {
    for key in obj.keys() {
        if known.contains(&key.as_str()) {
            continue;
        }
        let near = known.iter().find(|k| close(key, k));
        let hint = near.map_or(String::new(), |k| format!(" (did you mean \"{k}\"?)"));
        return Err(format!(
            "{at}unknown key \"{}\"{hint}; known keys: {}",
            key.escape_debug(),
            known.join(", ")
        ));
    }
    Ok(())
}

/// Two keys one edit apart (a letter added, dropped or changed), or equal but for case or
/// `_`/`-`: the typos a hand-written script makes (`tool_call`, `inputs`, `toolCalls`).
fn close(a: &str, b: &str) -> bool {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['_', '-'], "");
    if norm(a) == norm(b) {
        return true;
    }
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let (short, long) = if a.len() <= b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    match long.len() - short.len() {
        0 => {
            short
                .iter()
                .zip(long.iter())
                .filter(|(x, y)| x != y)
                .count()
                == 1
        }
        1 => (0..long.len()).any(|skip| {
            long.iter()
                .enumerate()
                .filter(|(i, _)| *i != skip)
                .map(|(_, c)| c)
                .eq(short.iter())
        }),
        _ => false,
    }
}

/// A whole Chat Completions response: its one choice's message; several choices are refused
/// (which one should run is not ours to guess).
fn unwrap_completion(obj: &serde_json::Map<String, Value>) -> Result<Option<&Value>, String> {
    let Some(choices) = obj.get("choices") else {
        return Ok(None);
    };
    let Some(choices) = choices.as_array() else {
        return Err("choices must be an array (a Chat Completions response)".into());
    };
    match choices.as_slice() {
        [one] => one
            .get("message")
            .filter(|m| m.is_object())
            .map(Some)
            .ok_or_else(|| "choices[0] has no \"message\" object".to_owned()),
        [] => Err("a Chat Completions response with no choices holds no message".into()),
        many => Err(format!(
            "a Chat Completions response with {} choices: keep one (its \"message\")",
            many.len()
        )),
    }
}

/// Converts one assistant message of either shape into the reference shape.
pub fn parse_message(v: &Value) -> Result<Value, MessageError> {
    parse_message_text(v).map_err(MessageError)
}

/// Why one line is not an assistant message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MessageError(pub String);

fn parse_message_text(v: &Value) -> Result<Value, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| "an assistant message must be a JSON object".to_owned())?;
    if let Some(message) = unwrap_completion(obj)? {
        return parse_message(message).map_err(|e| format!("choices[0].message: {e}"));
    }
    known_keys(obj, MESSAGE_KEYS, "")?;
    if let Some(role) = obj.get("role")
        && role.as_str() != Some("assistant")
    {
        return Err(format!("role must be \"assistant\", got {}", shown(role)));
    }
    if !obj.contains_key("content") && !obj.contains_key("tool_calls") {
        return Err(
            "an assistant message needs \"content\" or \"tool_calls\"; this one has neither, so it would run no call"
                .into(),
        );
    }
    if let Some(ty) = obj.get("type")
        && ty.as_str() != Some("message")
    {
        return Err(format!(
            "type must be \"message\" (an Anthropic response), got {}",
            shown(ty)
        ));
    }
    let mut blocks: Vec<Value> = Vec::new();
    let mut ids = HashSet::new();
    let mut push_call = |id: &str, name: &str, arguments: String, blocks: &mut Vec<Value>| {
        if !ids.insert(id.to_owned()) {
            return Err(format!("duplicate tool call id \"{id}\""));
        }
        blocks.push(json!({"type": "tool-call", "id": id, "name": name, "arguments": arguments}));
        Ok(())
    };
    match obj.get("reasoning_content") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) => {
            if !t.is_empty() {
                blocks.push(json!({"type": "reasoning", "text": t}));
            }
        }
        Some(other) => {
            return Err(format!(
                "reasoning_content must be a string, got {}",
                shown(other)
            ));
        }
    }
    match obj.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => {
            if !s.is_empty() {
                blocks.push(json!({"type": "text", "text": s}));
            }
        }
        Some(Value::Array(items)) => {
            for (k, b) in items.iter().enumerate() {
                let ty = b.get("type").and_then(Value::as_str).unwrap_or_default();
                let at = format!("content[{k}]: ");
                let keys = match ty {
                    "text" => TEXT_KEYS,
                    "thinking" | "reasoning" => THINKING_KEYS,
                    "tool_use" => TOOL_USE_KEYS,
                    _ => &[][..],
                };
                if let Some(block) = b.as_object()
                    && !keys.is_empty()
                {
                    known_keys(block, keys, &at)?;
                }
                match ty {
                    "text" => {
                        let t = b.get("text").and_then(Value::as_str).ok_or_else(|| {
                            format!("content[{k}]: a text block needs a string \"text\"")
                        })?;
                        blocks.push(json!({"type": "text", "text": t}));
                    }
                    "thinking" | "reasoning" => {
                        let t = b
                            .get("thinking")
                            .or_else(|| b.get("text"))
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        // Anthropic needs the signature to continue a tool-use turn.
                        match b.get("signature") {
                            None | Some(Value::Null) => {
                                blocks.push(json!({"type": "reasoning", "text": t}));
                            }
                            Some(Value::String(sig)) => blocks.push(json!({
                                "type": "reasoning",
                                "text": t,
                                "providerMetadata": {"anthropic": {"signature": sig}},
                            })),
                            Some(_) => {
                                return Err(format!("content[{k}].signature must be a string"));
                            }
                        }
                    }
                    "redacted_thinking" => {
                        let data = non_empty_str(b.get("data"), &format!("content[{k}].data"))?;
                        blocks.push(json!({
                            "type": "reasoning",
                            "text": "",
                            "providerMetadata": {"anthropic": {"redactedData": data}},
                        }));
                    }
                    "tool_use" => {
                        let id = non_empty_str(b.get("id"), &format!("content[{k}].id"))?;
                        let name = non_empty_str(b.get("name"), &format!("content[{k}].name"))?;
                        let args = match b.get("input") {
                            None => "{}".to_owned(),
                            Some(input) if input.is_object() => {
                                json_text(input).map_err(|e| format!("content[{k}].input: {e}"))?
                            }
                            Some(_) => {
                                return Err(format!("content[{k}].input must be a JSON object"));
                            }
                        };
                        push_call(id, name, args, &mut blocks)?;
                    }
                    other => {
                        return Err(format!(
                            "content[{k}]: unsupported block type \"{other}\" (text, thinking, redacted_thinking, tool_use)"
                        ));
                    }
                }
            }
        }
        Some(other) => {
            return Err(format!(
                "content must be a string, an array or null, got {}",
                shown(other)
            ));
        }
    }
    match obj.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (k, c) in calls.iter().enumerate() {
                let call = c
                    .as_object()
                    .ok_or_else(|| format!("tool_calls[{k}] must be a JSON object"))?;
                known_keys(call, TOOL_CALL_KEYS, &format!("tool_calls[{k}]: "))?;
                let id = non_empty_str(c.get("id"), &format!("tool_calls[{k}].id"))?;
                let f = c
                    .get("function")
                    .ok_or_else(|| format!("tool_calls[{k}] has no \"function\""))?;
                let function = f
                    .as_object()
                    .ok_or_else(|| format!("tool_calls[{k}].function must be a JSON object"))?;
                known_keys(
                    function,
                    FUNCTION_KEYS,
                    &format!("tool_calls[{k}].function: "),
                )?;
                let name = non_empty_str(f.get("name"), &format!("tool_calls[{k}].function.name"))?;
                let args = match f.get("arguments") {
                    Some(Value::String(s)) => s.clone(),
                    None => String::new(),
                    Some(_) => {
                        return Err(format!(
                            "tool_calls[{k}].function.arguments must be a string (the raw JSON text the model wrote)"
                        ));
                    }
                };
                push_call(id, name, args, &mut blocks)?;
            }
        }
        Some(_) => return Err("tool_calls must be an array".into()),
    }
    Ok(json!({
        "role": "assistant",
        "content": blocks,
        "source": {"kind": "model", "provider": "script", "model": "scripted"},
        "id": dsh_core::context::fresh_message_id().to_string(),
    }))
}
