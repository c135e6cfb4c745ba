//! The Claude Code hook protocol: the JSON a hook reads on stdin, and what its exit code and
//! stdout mean (exit 0 with optional JSON, exit 2 blocks with stderr, anything else is an error).
//!
//! Guarantees: interpretation is total and pure (every output maps to one [`Reading`]); a hook
//! error never weakens a decision (an `allow` in an output that also carries an error is
//! dropped, a `deny` or `ask` is kept); arguments are never rewritten, so `updatedInput` is
//! refused as an error instead of being silently dropped.

use std::path::Path;

use dsh_core::Json;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::settings::HookEvent;

/// What a hook is told about the call, serialized as its stdin.
#[derive(Serialize)]
pub struct HookInput<'a> {
    /// The session id.
    pub session_id: &'a str,
    /// The session log, or `""` for a session kept in memory.
    pub transcript_path: &'a str,
    /// The working directory the hook runs in (the workspace).
    pub cwd: &'a str,
    /// `PreToolUse` or `PostToolUse`.
    pub hook_event_name: &'a str,
    /// The Claude Code name of the tool when it has one, else our name.
    pub tool_name: &'a str,
    /// The call's frozen arguments (the raw text, as a string, when they were not JSON).
    pub tool_input: &'a Json,
    /// The model's call id.
    pub tool_use_id: &'a str,
    /// PostToolUse only: the tool's canonical value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_response: Option<&'a Json>,
}

impl HookInput<'_> {
    /// The stdin bytes (one JSON object and a newline).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).unwrap_or_else(|_| b"{}".to_vec());
        out.push(b'\n');
        out
    }
}

/// The path as a hook sees it in `cwd` or `transcript_path`.
pub fn path_text(p: &Path) -> String {
    p.display().to_string()
}

/// A hook's verdict on the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// No opinion (exit 0 with no decision).
    Pass,
    /// `permissionDecision: "allow"`: no objection (never overrides other policy).
    Allow,
    /// `permissionDecision: "ask"`.
    Ask,
    /// PreToolUse: deny the call; PostToolUse: block the result.
    Deny,
}

impl Verdict {
    /// The `decision` word of a `hook/result` event at `event`.
    pub fn word(self, event: HookEvent) -> &'static str {
        match (self, event) {
            (Verdict::Pass, _) => "pass",
            (Verdict::Allow, _) => "allow",
            (Verdict::Ask, _) => "ask",
            (Verdict::Deny, HookEvent::PreToolUse) => "deny",
            (Verdict::Deny, HookEvent::PostToolUse) => "block",
        }
    }
}

/// How the process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It did not exit normally: killed by a signal, timed out, cancelled, or never started.
    Failed(String),
}

/// What one run of a hook means.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// The verdict (before the hook's failure policy is applied).
    pub verdict: Option<Verdict>,
    /// The reason for a deny, ask or block.
    pub reason: Option<String>,
    /// Additional contexts for the model, in output order.
    pub contexts: Vec<String>,
    /// The hook error, if the run or its output was not valid.
    pub error: Option<String>,
}

impl Reading {
    fn error(message: impl Into<String>) -> Reading {
        Reading {
            error: Some(message.into()),
            ..Reading::default()
        }
    }
}

fn default_reason(event: HookEvent) -> &'static str {
    match event {
        HookEvent::PreToolUse => "denied by a PreToolUse hook",
        HookEvent::PostToolUse => "tool result blocked by a PostToolUse hook",
    }
}

fn text_of(v: Option<&Value>, key: &str) -> Result<Option<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

/// Interprets a finished run: its exit, stdout and stderr.
pub fn interpret(event: HookEvent, exit: &Exit, stdout: &str, stderr: &str) -> Reading {
    match exit {
        Exit::Failed(why) => Reading::error(why.clone()),
        Exit::Code(2) => {
            let reason = stderr.trim();
            Reading {
                verdict: Some(Verdict::Deny),
                reason: Some(if reason.is_empty() {
                    default_reason(event).to_owned()
                } else {
                    reason.to_owned()
                }),
                ..Reading::default()
            }
        }
        Exit::Code(0) => interpret_stdout(event, stdout),
        Exit::Code(code) => {
            let detail = stderr.trim();
            Reading::error(if detail.is_empty() {
                format!("exited with status {code}")
            } else {
                format!("exited with status {code}: {}", summary(detail, 500))
            })
        }
    }
}

/// Interprets the stdout of a hook that exited 0: nothing (no opinion) or a JSON object in the
/// hook output shape. Anything else is a hook error, never a silent pass: a hook that prints
/// garbage has not said what it meant (by default the error changes nothing but is reported).
pub fn interpret_stdout(event: HookEvent, stdout: &str) -> Reading {
    let text = stdout.trim();
    if text.is_empty() {
        return Reading::default();
    }
    if !(text.starts_with('{') || text.starts_with('[')) {
        return Reading::error(format!(
            "invalid JSON output: exit 0 with output must print a JSON object, got {:?}",
            summary(text, 200)
        ));
    }
    let json = match Json::parse(text) {
        Ok(j) => j,
        Err(e) => return Reading::error(format!("invalid JSON output: {e}")),
    };
    let Some(obj) = json.value().as_object() else {
        return Reading::error("invalid JSON output: the output must be a JSON object");
    };
    let mut reading = Reading::default();
    if let Err(e) = read_object(event, obj, &mut reading) {
        reading.error = Some(format!("invalid hook output: {e}"));
    }
    // An error never weakens: an allow in a faulty output is dropped; deny, ask and block stay.
    if reading.error.is_some() && reading.verdict == Some(Verdict::Allow) {
        reading.verdict = None;
    }
    reading
}

fn read_object(
    event: HookEvent,
    obj: &Map<String, Value>,
    out: &mut Reading,
) -> Result<(), String> {
    let specific = match obj.get("hookSpecificOutput") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => return Err("`hookSpecificOutput` must be an object".to_owned()),
    };
    let mut problems: Vec<String> = Vec::new();
    if let Some(s) = specific {
        match s.get("hookEventName") {
            None | Some(Value::Null) => {}
            Some(Value::String(n)) if n == event.as_str() => {}
            Some(other) => problems.push(format!(
                "`hookSpecificOutput.hookEventName` is {other}, expected \"{}\"",
                event.as_str()
            )),
        }
        if s.contains_key("updatedInput") {
            problems.push(
                "`updatedInput` is refused: dsh never rewrites a call's arguments (spec S1)"
                    .to_owned(),
            );
        }
        if s.contains_key("updatedMCPToolOutput") {
            problems.push(
                "`updatedMCPToolOutput` is refused: a PostToolUse hook may block, not rewrite"
                    .to_owned(),
            );
        }
    }
    // Contexts: the specific one first, then the top-level one.
    for (v, key) in [
        (
            specific.and_then(|s| s.get("additionalContext")),
            "hookSpecificOutput.additionalContext",
        ),
        (obj.get("additionalContext"), "additionalContext"),
    ] {
        match text_of(v, key) {
            Ok(Some(c)) if !c.trim().is_empty() => out.contexts.push(c),
            Ok(_) => {}
            Err(e) => problems.push(e),
        }
    }
    let reason = text_of(obj.get("reason"), "reason").unwrap_or_else(|e| {
        problems.push(e);
        None
    });
    match event {
        HookEvent::PreToolUse => {
            let specific_decision = match specific.map(|s| s.get("permissionDecision")) {
                None | Some(None) | Some(Some(Value::Null)) => None,
                Some(Some(Value::String(d))) => match d.as_str() {
                    "allow" => Some(Verdict::Allow),
                    "deny" => Some(Verdict::Deny),
                    "ask" => Some(Verdict::Ask),
                    other => {
                        problems.push(format!(
                            "`permissionDecision` \"{other}\" must be \"allow\", \"deny\" or \"ask\""
                        ));
                        None
                    }
                },
                Some(Some(_)) => {
                    problems.push("`permissionDecision` must be a string".to_owned());
                    None
                }
            };
            let specific_reason = text_of(
                specific.and_then(|s| s.get("permissionDecisionReason")),
                "permissionDecisionReason",
            )
            .unwrap_or_else(|e| {
                problems.push(e);
                None
            });
            // The older top-level form: `decision: "approve" | "block"` with `reason`.
            let legacy = match obj.get("decision") {
                None | Some(Value::Null) => None,
                Some(Value::String(d)) if d == "approve" => Some(Verdict::Allow),
                Some(Value::String(d)) if d == "block" => Some(Verdict::Deny),
                Some(other) => {
                    problems.push(format!(
                        "`decision` {other} must be \"approve\" or \"block\" for PreToolUse"
                    ));
                    None
                }
            };
            if let Some(v) = specific_decision {
                out.verdict = Some(v);
                out.reason = specific_reason.or(reason);
            } else if let Some(v) = legacy {
                out.verdict = Some(v);
                out.reason = reason.or(specific_reason);
            }
        }
        HookEvent::PostToolUse => match obj.get("decision") {
            None | Some(Value::Null) => {}
            Some(Value::String(d)) if d == "block" => {
                out.verdict = Some(Verdict::Deny);
                out.reason = reason;
            }
            Some(other) => problems.push(format!(
                "`decision` {other} must be \"block\" for PostToolUse"
            )),
        },
    }
    // `continue: false` stops everything in Claude Code; here it is the strongest refusal.
    if obj.get("continue") == Some(&Value::Bool(false)) {
        let stop = text_of(obj.get("stopReason"), "stopReason").unwrap_or_else(|e| {
            problems.push(e);
            None
        });
        out.verdict = Some(Verdict::Deny);
        out.reason = stop.or(out.reason.take());
    }
    if out.verdict == Some(Verdict::Deny) && out.reason.is_none() {
        out.reason = Some(default_reason(event).to_owned());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// At most `max` characters of `text`, with `…` when cut.
pub fn summary(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((i, _)) => format!("{}…", &text[..i]),
    }
}
