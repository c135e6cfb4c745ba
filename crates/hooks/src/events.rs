//! The `hook/invoked` and `hook/result` events, in the reference shapes (`dialect: "claude-code"`,
//! `handlerId` pairing the two), with `callId`, `toolName` and `command` added on `hook/invoked`
//! and `error` / `failClosed` on a `hook/result` whose hook failed.

use std::time::Duration;

use dsh_core::Json;
use dsh_session::Event;
use serde_json::{Map, Value};

use crate::settings::HookEvent;

/// The `hook/invoked` event type.
pub const HOOK_INVOKED: &str = "hook/invoked";
/// The `hook/result` event type.
pub const HOOK_RESULT: &str = "hook/result";
/// The `dialect` of every event this crate writes.
pub const DIALECT: &str = "claude-code";

/// The handler id of the `n`th invocation at `event`: `claude-code:PostToolUse:1`.
pub fn handler_id(event: HookEvent, n: u64) -> String {
    format!("{DIALECT}:{}:{n}", event.as_str())
}

fn with_turn(turn: Option<u32>) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(t) = turn {
        m.insert("turn".into(), Value::from(t));
    }
    m
}

/// What one invocation was about.
pub struct Invocation<'a> {
    /// The open turn, if any.
    pub turn: Option<u32>,
    /// The point.
    pub event: HookEvent,
    /// Its handler id.
    pub handler_id: &'a str,
    /// The matcher text of the hook's group.
    pub matcher: &'a str,
    /// The call's id.
    pub call_id: &'a str,
    /// Our tool name.
    pub tool: &'a str,
    /// The command run.
    pub command: &'a str,
}

/// `hook/invoked {turn, point, dialect, handlerId, matcher, callId, toolName, command}`.
pub fn invoked(inv: &Invocation<'_>) -> Event {
    let mut m = with_turn(inv.turn);
    m.insert("point".into(), Value::from(inv.event.as_str()));
    m.insert("dialect".into(), Value::from(DIALECT));
    m.insert("handlerId".into(), Value::from(inv.handler_id));
    m.insert("matcher".into(), Value::from(inv.matcher));
    m.insert("callId".into(), Value::from(inv.call_id));
    m.insert("toolName".into(), Value::from(inv.tool));
    m.insert("command".into(), Value::from(inv.command));
    Event::other(HOOK_INVOKED, Json::from_shallow(Value::Object(m)))
}

/// How one invocation ended.
pub struct Settled<'a> {
    /// `pass`, `allow`, `ask`, `deny`, `block` or `error`.
    pub decision: &'a str,
    /// The exit code, when the process exited.
    pub exit_code: Option<i32>,
    /// The start of its stderr, when it wrote any.
    pub stderr_summary: Option<&'a str>,
    /// The hook error, if any.
    pub error: Option<&'a str>,
    /// Whether the error decided the call because the hook fails closed.
    pub fail_closed: bool,
    /// Wall time.
    pub duration: Duration,
}

/// `hook/result {turn, point, handlerId, decision, exitCode?, stderrSummary?, error?, failClosed?,
/// durationMs}`.
pub fn result(turn: Option<u32>, event: HookEvent, handler_id: &str, s: &Settled<'_>) -> Event {
    let mut m = with_turn(turn);
    m.insert("point".into(), Value::from(event.as_str()));
    m.insert("handlerId".into(), Value::from(handler_id));
    m.insert("decision".into(), Value::from(s.decision));
    if let Some(code) = s.exit_code {
        m.insert("exitCode".into(), Value::from(code));
    }
    if let Some(text) = s.stderr_summary {
        m.insert("stderrSummary".into(), Value::from(text));
    }
    if let Some(e) = s.error {
        m.insert("error".into(), Value::from(e));
    }
    if s.fail_closed {
        m.insert("failClosed".into(), Value::Bool(true));
    }
    let ms = s.duration.as_secs_f64() * 1000.0;
    m.insert(
        "durationMs".into(),
        serde_json::Number::from_f64(ms).map_or(Value::from(0), Value::Number),
    );
    Event::other(HOOK_RESULT, Json::from_shallow(Value::Object(m)))
}
