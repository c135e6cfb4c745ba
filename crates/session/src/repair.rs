//! Crash repair (spec I4): a log left by a process that died mid-step is made whole again.
//!
//! Guarantees: every complete line is kept byte for byte (repair only cuts a torn last line and
//! appends); every `tool/call` still waiting for its result gets a synthetic `tool/result` with
//! `error: {name: "InterruptedError", code: "INTERRUPTED"}` saying the call may have run; every
//! call of a committed `assistant/message` whose `tool/call` was never written (or was torn) gets
//! a `tool/call` copied from the message and the same result saying it never started (a call is
//! durably recorded before anything of it runs), so every call the model made is answered in the
//! history sent back to it; the open step gets its `step/end`
//! and the open turn its `turn/end` with reason `{"kind":"interrupted"}`. A bad line anywhere
//! but the torn tail is an error naming its line, and nothing is changed.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use dsh_core::{ContentBlock, ErrorInfo, Json, codes};

use crate::check::Scan;
use crate::deferred::{ResultFields, ResultPlace};
use crate::error::{Problem, SessionError};
use crate::event::{Event, types};
use crate::framing::Framing;
use crate::header::{Header, HeaderError};
use crate::read::{header_error, lines, parse_event, parse_header};

/// The text of a synthetic result for a call that was in flight when the process died.
pub const INTERRUPTED_TEXT: &str = "Error: tool call interrupted: the session stopped while the call was in flight, so it may or may not have run";

/// The text of a synthetic result for a call the model made whose `tool/call` was never
/// recorded (or was torn): the pipeline records a call durably before anything of it runs, so
/// such a call never started.
pub const NOT_STARTED_TEXT: &str =
    "Error: tool call interrupted: the session stopped before the call started, so it did not run";

/// A torn last line that repair cut off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Its 1-based line.
    pub line: usize,
    /// How many bytes were cut.
    pub bytes: usize,
}

/// A call that repair closed with an `INTERRUPTED` result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterruptedCall {
    /// The model's call id.
    pub call_id: String,
    /// The seq of its `tool/call`.
    pub seq: u64,
    /// Whether the call may have started: `false` when its `tool/call` was never durably
    /// written, so repair wrote it (from the assistant message) beside its result.
    pub may_have_started: bool,
}

/// What crash repair did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// The torn last line that was cut, if any.
    pub torn_tail: Option<TornTail>,
    /// Whether the last complete line lacked its newline (one was added).
    pub added_newline: bool,
    /// Whether the header itself was torn (the file held no complete line).
    pub header_lost: bool,
    /// Calls closed with an `INTERRUPTED` result, in call order.
    pub interrupted_calls: Vec<InterruptedCall>,
    /// The step closed with `step/end`, as `(turn, step)`.
    pub closed_step: Option<(u64, u64)>,
    /// The turn closed with `turn/end` (reason `interrupted`).
    pub closed_turn: Option<u64>,
}

impl RepairReport {
    /// Whether the log needed no repair at all.
    pub fn is_clean(&self) -> bool {
        *self == RepairReport::default()
    }

    /// How many events repair appended.
    pub fn appended_events(&self) -> usize {
        self.interrupted_calls.len()
            + self
                .interrupted_calls
                .iter()
                .filter(|c| !c.may_have_started)
                .count()
            + usize::from(self.closed_step.is_some())
            + usize::from(self.closed_turn.is_some())
    }
}

/// What repair will do to a log, and the log as it will be.
pub(crate) struct Plan {
    /// Bytes of the file to keep.
    pub keep_len: usize,
    /// The header, if the kept bytes hold one.
    pub header: Option<Header>,
    /// Kept events followed by the appended ones, with their seqs.
    pub events: Vec<crate::Entry>,
    /// How many of `events` are appended by repair (the last ones).
    pub appended: usize,
    /// The seq after the last event.
    pub next_seq: u64,
    /// Problems of the repaired log (only ones repair cannot fix).
    pub problems: Vec<Problem>,
    /// The open turn and step after repair (always closed).
    pub framing: Framing,
    /// What was done.
    pub report: RepairReport,
}

impl Plan {
    /// The bytes to write after the kept prefix.
    pub fn suffix(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.report.added_newline {
            out.push(b'\n');
        }
        for (_, event) in &self.events[self.events.len() - self.appended..] {
            event.write_line(&mut out);
        }
        out
    }
}

fn interrupted_info() -> ErrorInfo {
    ErrorInfo {
        name: Arc::from(codes::INTERRUPTED_ERROR),
        code: Arc::from(codes::INTERRUPTED),
    }
}

fn framing_event(event_type: &str, fields: Vec<(&str, Value)>) -> Event {
    let mut m = Map::new();
    for (k, v) in fields {
        m.insert(k.to_owned(), v);
    }
    Event::other(event_type, Json::from_shallow(Value::Object(m)))
}

/// The error `tool/result` that closes a call the session stopped before it could answer.
fn interrupted_result(
    turn: Option<u64>,
    step: Option<u64>,
    call_id: &str,
    call_seq: u64,
    content: [ContentBlock; 1],
) -> Event {
    let fields = ResultFields {
        place: ResultPlace::Copied { turn, step },
        call_id: Arc::from(call_id),
        content: Arc::new(content),
        is_error: true,
        error: Some(Box::new(interrupted_info())),
        meta: None,
        id: dsh_core::context::fresh_message_number(),
    };
    Event::result_from(fields, call_seq)
}

fn as_value(v: Option<u64>) -> Value {
    v.map_or(Value::Null, Value::from)
}

/// Plans the repair of a log's bytes.
pub(crate) fn plan(bytes: &[u8]) -> Result<Plan, SessionError> {
    let mut keep_len = bytes.len();
    let mut header: Option<Header> = None;
    let mut events: Vec<crate::Entry> = Vec::new();
    let mut report = RepairReport::default();
    let mut scan = Scan::new();
    let mut seq = 0u64;
    let mut scratch = crate::scan::Scratch::default();
    let mut last_line = 0usize;
    for line in lines(bytes) {
        if line.is_blank() {
            if !line.terminated {
                keep_len = line.start;
                report.torn_tail = Some(TornTail {
                    line: line.number,
                    bytes: line.bytes.len(),
                });
            }
            continue;
        }
        if header.is_none() {
            match parse_header(line.bytes) {
                Ok(h) => {
                    header = Some(h);
                    report.added_newline = !line.terminated;
                    last_line = line.number;
                }
                Err(HeaderError::Json(_)) if !line.terminated => {
                    keep_len = line.start;
                    report.header_lost = true;
                    report.torn_tail = Some(TornTail {
                        line: line.number,
                        bytes: line.bytes.len(),
                    });
                }
                Err(e) => return Err(header_error(line.number, e)),
            }
            continue;
        }
        match parse_event(line.bytes, &mut scratch) {
            Ok(event) => {
                scan.event(line.number, seq, &event);
                let span = event.seq_span();
                events.push((seq, event));
                seq += span;
                report.added_newline = !line.terminated;
                last_line = line.number;
            }
            Err(_) if !line.terminated => {
                keep_len = line.start;
                report.torn_tail = Some(TornTail {
                    line: line.number,
                    bytes: line.bytes.len(),
                });
            }
            Err(message) => {
                return Err(SessionError::Corrupt {
                    line: line.number,
                    message,
                });
            }
        }
    }

    let kept = events.len();
    let mut closing = Vec::new();
    for call in scan.pending_calls() {
        let content = [ContentBlock::text(INTERRUPTED_TEXT)];
        closing.push(interrupted_result(
            call.turn,
            call.step,
            &call.call_id,
            call.seq,
            content,
        ));
        report.interrupted_calls.push(InterruptedCall {
            call_id: call.call_id.to_string(),
            seq: call.seq,
            may_have_started: true,
        });
    }
    // Calls the model made whose `tool/call` never reached the log: each gets the pair the
    // scheduler would have written (spec C3), so the history sent back to a model answers it.
    let mut next = seq + closing.len() as u64;
    for call in scan.pending_visible() {
        let call_seq = next;
        closing.push(framing_event(
            types::TOOL_CALL,
            vec![
                ("turn", as_value(call.turn)),
                ("step", as_value(call.step)),
                ("callId", Value::from(&*call.call_id)),
                ("name", Value::from(&*call.name)),
                ("arguments", Value::from(&*call.arguments)),
            ],
        ));
        let content = [ContentBlock::text(NOT_STARTED_TEXT)];
        closing.push(interrupted_result(
            call.turn,
            call.step,
            &call.call_id,
            call_seq,
            content,
        ));
        next += 2;
        report.interrupted_calls.push(InterruptedCall {
            call_id: call.call_id.to_string(),
            seq: call_seq,
            may_have_started: false,
        });
    }
    let framing = scan.framing();
    // Steps that ran side by side in the open turn (an MCP gateway's calls): each step still
    // holding an unanswered call is open too, though the framing follows only the last one.
    let mut side_steps: Vec<(u64, u64)> = Vec::new();
    let steps_of_pending = scan
        .pending_calls()
        .into_iter()
        .map(|c| (c.turn, c.step))
        .chain(scan.pending_visible().iter().map(|c| (c.turn, c.step)));
    for (turn, step) in steps_of_pending {
        if let (Some(turn), Some(step)) = (turn, step)
            && framing.turn == Some(turn)
            && framing.step != Some((turn, step))
            && !side_steps.contains(&(turn, step))
        {
            side_steps.push((turn, step));
        }
    }
    for (turn, step) in side_steps {
        closing.push(framing_event(
            types::STEP_END,
            vec![("turn", Value::from(turn)), ("step", Value::from(step))],
        ));
    }
    if let Some((turn, step)) = framing.step {
        closing.push(framing_event(
            types::STEP_END,
            vec![("turn", Value::from(turn)), ("step", Value::from(step))],
        ));
        report.closed_step = Some((turn, step));
    }
    if let Some(turn) = framing.turn {
        let mut reason = Map::new();
        reason.insert("kind".into(), Value::from("interrupted"));
        closing.push(framing_event(
            types::TURN_END,
            vec![
                ("turn", Value::from(turn)),
                ("reason", Value::Object(reason)),
            ],
        ));
        report.closed_turn = Some(turn);
    }
    for (i, event) in closing.into_iter().enumerate() {
        scan.event(last_line + 1 + i, seq, &event);
        let span = event.seq_span();
        events.push((seq, event));
        seq += span;
    }
    let appended = events.len() - kept;
    let outcome = scan.finish();
    Ok(Plan {
        keep_len,
        header,
        events,
        appended,
        next_seq: seq,
        problems: outcome.problems,
        framing: outcome.framing,
        report,
    })
}

/// Repairs a log held in memory: returns the repaired bytes and what was done. Every complete
/// line of `bytes` is kept unchanged; the result is `bytes` cut at the torn tail, then the
/// closing events.
pub fn repair_bytes(bytes: &[u8]) -> Result<(Vec<u8>, RepairReport), SessionError> {
    let plan = plan(bytes)?;
    let mut out = bytes[..plan.keep_len].to_vec();
    out.extend_from_slice(&plan.suffix());
    Ok((out, plan.report))
}

/// Repairs a log file in place (spec I4), holding its lock meanwhile. A file whose only line is
/// a torn header is emptied (a log that was never started).
pub fn repair(path: &Path) -> Result<RepairReport, SessionError> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| SessionError::io("open", path, e))?;
    crate::jsonl::lock(&file, path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| SessionError::io("read", path, e))?;
    let plan = plan(&bytes)?;
    apply(&mut file, path, &plan, None)?;
    Ok(plan.report)
}

/// Applies a plan to the open file: cuts the torn tail, writes `prefix` (a new header, if any)
/// and the closing events, and syncs. Does nothing to a log that needs no repair.
pub(crate) fn apply(
    file: &mut std::fs::File,
    path: &Path,
    plan: &Plan,
    new_header: Option<&Header>,
) -> Result<(), SessionError> {
    let mut suffix = Vec::new();
    if let Some(h) = new_header {
        h.write_line(&mut suffix);
    }
    suffix.extend_from_slice(&plan.suffix());
    let len = plan.keep_len as u64;
    let current = file
        .metadata()
        .map_err(|e| SessionError::io("read", path, e))?
        .len();
    if current != len {
        file.set_len(len)
            .map_err(|e| SessionError::io("repair", path, e))?;
    }
    file.seek(SeekFrom::Start(len))
        .map_err(|e| SessionError::io("repair", path, e))?;
    if !suffix.is_empty() {
        file.write_all(&suffix)
            .map_err(|e| SessionError::io("write", path, e))?;
    }
    if current != len || !suffix.is_empty() {
        file.sync_data()
            .map_err(|e| SessionError::io("sync", path, e))?;
    }
    Ok(())
}
