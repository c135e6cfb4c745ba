//! The log checker (spec L4, I1): every problem with its 1-based file line.
//!
//! It reports bad lines (not UTF-8, bad JSON, too deep), a header of an unknown version, calls
//! without results, results without calls, results whose `sourceEventSeqs[0]` is not their
//! call's seq (or is out of range), pairs split across steps or turns, duplicate results,
//! duplicate call ids within a step, empty call ids (in a `tool/call` or an assistant message's
//! `tool-call` block), and `sourceEventSeqs` pointing forward. It never changes
//! anything: repair (spec I4) is [`crate::repair_bytes`].

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use crate::error::{Problem, SessionError};
use crate::event::{Event, types};
use crate::framing::Framing;
use crate::read::{lines, parse_event, parse_header};
use crate::visible::{VisibleCall, calls_of};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallState {
    Pending,
    Paired { line: usize },
    Orphaned { boundary_line: usize },
}

#[derive(Clone, Debug)]
struct CallRec {
    line: usize,
    call_id: Arc<str>,
    turn: Option<u64>,
    step: Option<u64>,
    state: CallState,
}

/// A call still waiting for its result when the scan ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PendingCall {
    pub seq: u64,
    pub line: usize,
    pub call_id: Arc<str>,
    pub turn: Option<u64>,
    pub step: Option<u64>,
}

/// What a scan found.
pub(crate) struct ScanOutcome {
    /// Every problem, sorted by line.
    pub problems: Vec<Problem>,
    /// The open turn and step at the end.
    pub framing: Framing,
}

/// `(turn, step, callId)` of a call.
type StepCallKey = (Option<u64>, Option<u64>, Arc<str>);

/// An incremental pairing scan over a log's events.
#[derive(Default)]
pub(crate) struct Scan {
    problems: Vec<Problem>,
    calls: HashMap<u64, CallRec>,
    pending: BTreeSet<u64>,
    pending_by_id: HashMap<Arc<str>, u64>,
    step_ids: HashMap<StepCallKey, usize>,
    framing: Framing,
    seqs_reliable: bool,
    /// Calls of assistant messages whose `tool/call` has not been seen yet.
    visible: Vec<VisibleCall>,
    /// Every call id of the session's assistant messages, with the line of its first message.
    visible_ids: HashMap<Arc<str>, usize>,
}

fn turn_step(turn: Option<u64>, step: Option<u64>) -> String {
    let show = |v: Option<u64>| v.map_or_else(|| "?".to_owned(), |v| v.to_string());
    format!("turn {} step {}", show(turn), show(step))
}

impl Scan {
    /// A scan at the start of a log.
    pub fn new() -> Scan {
        Scan {
            seqs_reliable: true,
            ..Scan::default()
        }
    }

    fn problem(&mut self, line: usize, message: String) {
        self.problems.push(Problem {
            line,
            message,
            in_flight: false,
        });
    }

    /// Records a line that did not read; later seq references can no longer be trusted.
    pub fn bad_line(&mut self, line: usize, message: String) {
        self.problem(line, message);
        self.seqs_reliable = false;
    }

    /// Folds one event read from file line `line`, at seq `seq`.
    pub fn event(&mut self, line: usize, seq: u64, event: &Event) {
        if let Some(seqs) = event.source_event_seqs() {
            let skip = usize::from(event.event_type() == types::TOOL_RESULT);
            if self.seqs_reliable
                && let Some(&bad) = seqs.iter().skip(skip).find(|&&s| s >= seq)
            {
                self.problem(
                    line,
                    format!(
                        "sourceEventSeqs entry {bad} is out of range (this event is seq {seq})"
                    ),
                );
            }
        }
        match event.event_type() {
            types::ASSISTANT_MESSAGE => self.assistant(line, event),
            types::TOOL_CALL => self.call(line, seq, event),
            types::TOOL_RESULT => self.result(line, seq, event),
            types::STEP_END => {
                let (turn, step) = match (event.data_u64("turn"), event.data_u64("step")) {
                    (Some(t), Some(s)) => (Some(t), Some(s)),
                    _ => match self.framing.step {
                        Some((t, s)) => (Some(t), Some(s)),
                        None => (None, None),
                    },
                };
                self.close_calls(line, "step", |c| c.turn == turn && c.step == step);
                self.close_visible(line, "step", |c| c.turn == turn && c.step == step);
            }
            types::TURN_END => {
                let turn = event.data_u64("turn").or(self.framing.turn);
                self.close_calls(line, "turn", |c| c.turn == turn);
                self.close_visible(line, "turn", |c| c.turn == turn);
            }
            _ => {}
        }
        self.framing.apply(event);
    }

    /// Records the calls of an assistant message; a call id the session already used is a
    /// problem (an exported history would hold two calls with one id).
    fn assistant(&mut self, line: usize, event: &Event) {
        for call in calls_of(line, event) {
            if call.call_id.is_empty() {
                self.problem(
                    line,
                    format!(
                        "the model's call of \"{}\" has an empty id: its result cannot name it, and providers refuse an empty tool_call_id; give the call an id unique in the session, the same in its tool/call and its tool/result",
                        call.name
                    ),
                );
            } else if let Some(&first) = self.visible_ids.get(&call.call_id) {
                let message = if first == line {
                    format!(
                        "call id \"{}\" appears twice in this assistant message",
                        call.call_id
                    )
                } else {
                    format!(
                        "call id \"{}\" was already used by the assistant message on line {first}: an exported history would hold two calls with one id",
                        call.call_id
                    )
                };
                self.problem(line, message);
            } else {
                self.visible_ids.insert(call.call_id.clone(), line);
            }
            self.visible.push(call);
        }
    }

    /// Reports the calls of assistant messages that never got a `tool/call` before a boundary.
    fn close_visible(&mut self, line: usize, what: &str, matches: impl Fn(&VisibleCall) -> bool) {
        let (closed, open): (Vec<_>, Vec<_>) = std::mem::take(&mut self.visible)
            .into_iter()
            .partition(|c| matches(c));
        self.visible = open;
        for c in closed {
            self.problem(
                c.line,
                format!(
                    "the model's call \"{}\" ({}) has no tool/call and no tool/result: its {what} ended on line {line}",
                    c.call_id, c.name
                ),
            );
        }
    }

    fn call(&mut self, line: usize, seq: u64, event: &Event) {
        // What `as_tool_call` checks, without unescaping the arguments (or building the tree
        // to do so): the three fields are strings.
        let call_id = match event.data_str("callId") {
            Some(id) if event.data_is_str("name") && event.data_is_str("arguments") => id,
            _ => {
                self.problem(
                    line,
                    "tool/call lacks a string callId, name or arguments".to_owned(),
                );
                return;
            }
        };
        if call_id.is_empty() {
            self.problem(
                line,
                "tool/call has an empty callId: its result cannot name it, and providers refuse an empty tool_call_id; give it the id of the model's call it records, the same in its tool/result".to_owned(),
            );
        }
        let (turn, step) = (event.data_u64("turn"), event.data_u64("step"));
        if let Some(at) = self.visible.iter().position(|c| {
            *c.call_id == *call_id
                && (turn.is_none() || c.turn == turn)
                && (step.is_none() || c.step == step)
        }) {
            self.visible.remove(at);
        }
        let call_id: Arc<str> = Arc::from(call_id);
        let key = (turn, step, call_id.clone());
        if let Some(first) = self.step_ids.get(&key) {
            let message = format!(
                "duplicate callId \"{}\" in {} (first tool/call on line {first})",
                call_id,
                turn_step(turn, step)
            );
            self.problem(line, message);
        } else {
            self.step_ids.insert(key, line);
        }
        self.calls.insert(
            seq,
            CallRec {
                line,
                call_id: call_id.clone(),
                turn,
                step,
                state: CallState::Pending,
            },
        );
        self.pending.insert(seq);
        self.pending_by_id.insert(call_id, seq);
    }

    fn result(&mut self, line: usize, seq: u64, event: &Event) {
        let Some(id) = event.result_call_id() else {
            self.problem(
                line,
                "tool/result names no call (no message.source.callId)".to_owned(),
            );
            return;
        };
        let id = &*id;
        let call_seq = event.source_event_seqs().and_then(|s| s.first().copied());
        let (turn, step) = (event.data_u64("turn"), event.data_u64("step"));
        let target = match call_seq {
            None => {
                self.problem(
                    line,
                    format!("tool/result for call \"{id}\" has no sourceEventSeqs pointing at its tool/call"),
                );
                self.pending_by_id.get(id).copied()
            }
            Some(_) if !self.seqs_reliable => self.pending_by_id.get(id).copied(),
            Some(s) if s >= seq => {
                self.problem(
                    line,
                    format!(
                        "tool/result for call \"{id}\" points at seq {s} (sourceEventSeqs[0]), out of range (the result is seq {seq})"
                    ),
                );
                None
            }
            Some(s) => match self.calls.get(&s) {
                Some(call) if &*call.call_id == id => Some(s),
                Some(call) => {
                    let message = format!(
                        "tool/result for call \"{id}\" points at seq {s} (sourceEventSeqs[0]), which is the tool/call of \"{}\" (line {})",
                        call.call_id, call.line
                    );
                    self.problem(line, message);
                    None
                }
                None => {
                    let message = if self.pending_by_id.contains_key(id)
                        || self.calls.values().any(|c| &*c.call_id == id)
                    {
                        format!(
                            "tool/result for call \"{id}\" points at seq {s} (sourceEventSeqs[0]), which is not its tool/call"
                        )
                    } else {
                        format!(
                            "tool/result for call \"{id}\" has no tool/call (sourceEventSeqs[0] = {s} is not a tool/call)"
                        )
                    };
                    self.problem(line, message);
                    None
                }
            },
        };
        let Some(target) = target else {
            if call_seq.is_none() || !self.seqs_reliable {
                self.problem(
                    line,
                    format!("tool/result for call \"{id}\" has no tool/call"),
                );
            }
            return;
        };
        let Some(call) = self.calls.get_mut(&target) else {
            return;
        };
        match call.state {
            CallState::Paired { line: first } => {
                let message = format!(
                    "duplicate tool/result for call \"{id}\" (its first result is on line {first})"
                );
                self.problem(line, message);
            }
            CallState::Orphaned { boundary_line } => {
                call.state = CallState::Paired { line };
                let message = format!(
                    "tool/result for call \"{id}\" is split from its tool/call (line {}) by the boundary on line {boundary_line}",
                    call.line
                );
                self.problem(line, message);
            }
            CallState::Pending => {
                call.state = CallState::Paired { line };
                let (call_turn, call_step, call_line) = (call.turn, call.step, call.line);
                self.pending.remove(&target);
                if self.pending_by_id.get(id) == Some(&target) {
                    self.pending_by_id.remove(id);
                }
                if (turn, step) != (call_turn, call_step) {
                    let message = format!(
                        "tool/result for call \"{id}\" is in {}, but its tool/call (line {call_line}) is in {}",
                        turn_step(turn, step),
                        turn_step(call_turn, call_step)
                    );
                    self.problem(line, message);
                }
            }
        }
    }

    fn close_calls(&mut self, line: usize, what: &str, matches: impl Fn(&CallRec) -> bool) {
        let closing: Vec<u64> = self
            .pending
            .iter()
            .copied()
            .filter(|s| self.calls.get(s).is_some_and(&matches))
            .collect();
        for seq in closing {
            self.pending.remove(&seq);
            let Some(call) = self.calls.get_mut(&seq) else {
                continue;
            };
            call.state = CallState::Orphaned {
                boundary_line: line,
            };
            let (call_line, id) = (call.line, call.call_id.clone());
            if self.pending_by_id.get(&id) == Some(&seq) {
                self.pending_by_id.remove(&id);
            }
            self.problem(
                call_line,
                format!(
                    "tool/call \"{id}\" (seq {seq}) has no tool/result before its {what} ended on line {line}"
                ),
            );
        }
    }

    /// Calls waiting for their result, in seq order.
    pub fn pending_calls(&self) -> Vec<PendingCall> {
        let mut pending = Vec::with_capacity(self.pending.len());
        for &seq in &self.pending {
            if let Some(call) = self.calls.get(&seq) {
                pending.push(PendingCall {
                    seq,
                    line: call.line,
                    call_id: call.call_id.clone(),
                    turn: call.turn,
                    step: call.step,
                });
            }
        }
        pending
    }

    /// Calls of assistant messages with neither `tool/call` nor result yet, in message order.
    pub fn pending_visible(&self) -> &[VisibleCall] {
        &self.visible
    }

    /// The open turn and step so far.
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Ends the scan: calls still pending are unpaired, and so are calls of assistant messages
    /// that never got their `tool/call`.
    pub fn finish(mut self) -> ScanOutcome {
        let pending = self.pending_calls();
        for p in &pending {
            self.problems.push(Problem {
                line: p.line,
                message: format!(
                    "tool/call \"{}\" (seq {}) has no tool/result",
                    p.call_id, p.seq
                ),
                in_flight: true,
            });
        }
        for c in std::mem::take(&mut self.visible) {
            self.problems.push(Problem {
                line: c.line,
                message: format!(
                    "the model's call \"{}\" ({}) has no tool/call and no tool/result",
                    c.call_id, c.name
                ),
                in_flight: true,
            });
        }
        self.problems.sort_by_key(|p| p.line);
        ScanOutcome {
            problems: self.problems,
            framing: self.framing,
        }
    }
}

/// Checks a log's bytes and returns every problem with its line; an empty list means the log is
/// well formed. An empty file is a log that was never started and has no problems.
pub fn check_bytes(bytes: &[u8]) -> Vec<Problem> {
    let mut scan = Scan::new();
    let mut header_seen = false;
    let mut seq = 0u64;
    let mut scratch = crate::scan::Scratch::default();
    for line in lines(bytes) {
        if line.is_blank() {
            continue;
        }
        let torn = if line.terminated {
            ""
        } else {
            " (the last line has no newline: a torn write?)"
        };
        if !header_seen {
            header_seen = true;
            if line.number != 1 {
                scan.problem(line.number, "the header is not on line 1".to_owned());
            }
            if let Err(e) = parse_header(line.bytes) {
                scan.problem(line.number, format!("{e}{torn}"));
            }
            continue;
        }
        match parse_event(line.bytes, &mut scratch) {
            Ok(event) => {
                scan.event(line.number, seq, &event);
                seq += event.seq_span();
            }
            Err(message) => {
                scan.bad_line(line.number, format!("{message}{torn}"));
                seq += 1;
            }
        }
    }
    scan.finish().problems
}

/// Checks a log given as text (see [`check_bytes`]).
pub fn check_log(text: &str) -> Vec<Problem> {
    check_bytes(text.as_bytes())
}

/// Checks a log file (see [`check_bytes`]).
pub fn check_file(path: &Path) -> Result<Vec<Problem>, SessionError> {
    let bytes = std::fs::read(path).map_err(|e| SessionError::io("read", path, e))?;
    Ok(check_bytes(&bytes))
}

/// A log file's problems, and whether a writer holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileCheck {
    /// Every problem, sorted by line.
    pub problems: Vec<Problem>,
    /// Whether a writer held the file's lock when it was checked: the session is still being
    /// written, so calls unanswered at its end ([`Problem::in_flight`]) may be running.
    pub live: bool,
}

/// Checks a log file (see [`check_bytes`]) and tells whether a writer holds it: a session still
/// being written is told apart from one left by a dead process, whose unanswered calls only
/// repair will close.
pub fn check_file_status(path: &Path) -> Result<FileCheck, SessionError> {
    let file = std::fs::File::open(path).map_err(|e| SessionError::io("read", path, e))?;
    let live = match file.try_lock_shared() {
        Ok(()) => false,
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(std::fs::TryLockError::Error(e)) => return Err(SessionError::io("lock", path, e)),
    };
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut &file, &mut bytes)
        .map_err(|e| SessionError::io("read", path, e))?;
    Ok(FileCheck {
        problems: check_bytes(&bytes),
        live,
    })
}

/// One event with its seq, as [`check_events`] takes it: a `(seq, &Event)` pair (from
/// [`crate::Events::pairs`]) or an entry of [`crate::Events`] (from `&session.events()`).
pub trait SeqEvent<'a> {
    /// The seq and the event.
    fn seq_event(self) -> (u64, &'a Event);
}

impl<'a> SeqEvent<'a> for (u64, &'a Event) {
    fn seq_event(self) -> (u64, &'a Event) {
        self
    }
}

impl<'a> SeqEvent<'a> for &'a crate::Entry {
    fn seq_event(self) -> (u64, &'a Event) {
        (self.0, &self.1)
    }
}

/// Checks events already in memory, numbering them as file lines 2, 3, ... (as a log written
/// from them would be). Takes what a session holds as it is:
///
/// ```
/// # async fn demo() -> Result<(), dsh_session::SessionError> {
/// let session = dsh_session::Session::in_memory("s1");
/// assert!(dsh_session::check_events(&session.events()).is_empty());
/// # Ok(()) }
/// ```
pub fn check_events<'a, E: SeqEvent<'a>>(events: impl IntoIterator<Item = E>) -> Vec<Problem> {
    let mut scan = Scan::new();
    for (i, e) in events.into_iter().enumerate() {
        let (seq, event) = e.seq_event();
        scan.event(i + 2, seq, event);
    }
    scan.finish().problems
}
