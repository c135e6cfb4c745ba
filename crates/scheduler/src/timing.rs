//! Stage timing of a step's calls, recorded only when the host asks for it
//! ([`crate::RuntimeConfig::step_timing`]): each call keeps the instant it entered each stage,
//! and the step writes them all as one `dsh/step-timing` event after its last `tool/result`.
//!
//! The event is dsh's own: the reference harness's logs carry no timing, and a reader that does
//! not know the type skips it (the session crate reads it as [`dsh_session::EventKind::Other`];
//! the derived history, the checker and repair ignore it), so a log with it replays exactly as
//! one without. Its shape (times in microseconds from the step's start):
//!
//! ```json
//! {"type":"dsh/step-timing","data":{"turn":1,"step":2,"startedAt":1796360472558,
//!  "calls":[{"callId":"c1","recorded":40,"prepare":52,"approval":[60,910],
//!            "dispatch":915,"dispatched":1300,"finalize":1302,"done":1350}]}}
//! ```
//!
//! `startedAt` is the wall clock (milliseconds since the Unix epoch) when the step began; a mark
//! a call never reached (a denied call has no `dispatch`) is left out.
//!
//! A call whose body ran Code Mode sub-calls (`<parent>:code:<n>`, through a pool of the same
//! runtime) also has `"subs"`: each sub-call's marks, in commit order, on the step's clock
//! (`{"callId":"c1:code:1","prepare":..,"dispatch":..,"dispatched":..,"finalize":..,"done":..}`).
//! A sub-call's marks are kept by the runtime ([`SubTimings`]) from its commit until its root
//! call's step writes them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime};

use dsh_session::Event;

/// The event type of a step's timing.
pub const STEP_TIMING: &str = "dsh/step-timing";

/// A stage boundary of one call.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Mark {
    /// Prepare began (pre-execute hooks).
    Prepare,
    /// A question went to the approver.
    ApprovalAsked,
    /// The approver answered.
    ApprovalAnswered,
    /// The around-chain and the body began.
    Dispatch,
    /// The body (and its wrappers) returned.
    Dispatched,
    /// Finalize began (post-execute hooks, `finalize_content`, observers).
    Finalize,
    /// Finalize returned: the result is frozen.
    Done,
}

const MARKS: usize = 7;

/// The instants one call reached each [`Mark`] (unset when timing is off or never reached).
#[derive(Debug, Default)]
pub(crate) struct Marks {
    on: bool,
    at: [OnceLock<Instant>; MARKS],
}

impl Marks {
    /// Marks that record only when `on`.
    pub(crate) fn new(on: bool) -> Marks {
        Marks {
            on,
            at: Default::default(),
        }
    }

    /// Records that the call reached `mark` now (the first time only).
    pub(crate) fn set(&self, mark: Mark) {
        if self.on {
            let _ = self.at[mark as usize].set(Instant::now());
        }
    }

    /// The instants recorded so far.
    pub(crate) fn snapshot(&self) -> Snapshot {
        std::array::from_fn(|i| self.at[i].get().copied())
    }
}

/// The instants one call reached each [`Mark`], copied once the call is committed.
pub(crate) type Snapshot = [Option<Instant>; MARKS];

fn get(marks: &Snapshot, mark: Mark) -> Option<Instant> {
    marks[mark as usize]
}

/// Sub-calls' marks waiting for their root call's step, by root call id. Shared by every clone
/// of a runtime (the step's and Code Mode's pools run on clones of one).
#[derive(Clone, Debug, Default)]
pub(crate) struct SubTimings(Arc<Mutex<HashMap<String, Vec<SubMarks>>>>);

/// A sub-call's id and its marks.
pub(crate) type SubMarks = (Arc<str>, Snapshot);

/// Roots waiting at most: a root no step commits (a call run by [`crate::Runtime::execute`]
/// drops its own) must not make the map grow without end.
const MAX_ROOTS: usize = 1024;

impl SubTimings {
    /// Keeps a committed sub-call's marks for its root call.
    pub(crate) fn push(&self, root: &str, call_id: Arc<str>, marks: Snapshot) {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= MAX_ROOTS && !map.contains_key(root) {
            map.clear();
        }
        map.entry(root.to_owned())
            .or_default()
            .push((call_id, marks));
    }

    /// Takes the marks of root call `root`'s sub-calls, in commit order.
    pub(crate) fn take(&self, root: &str) -> Vec<SubMarks> {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.remove(root).unwrap_or_default()
    }
}

/// A step's clock and the timing of its calls, in commit (model) order, written as JSON text
/// right away (the event is one line of text: no tree of maps and key strings per call).
pub(crate) struct StepTiming {
    started: Instant,
    wall: SystemTime,
    /// The calls' entries, comma-separated.
    calls: Vec<u8>,
    count: usize,
}

impl StepTiming {
    /// Starts the step's clock.
    pub(crate) fn start() -> StepTiming {
        StepTiming {
            started: Instant::now(),
            wall: SystemTime::now(),
            calls: Vec::new(),
            count: 0,
        }
    }

    fn micros(&self, at: Instant) -> u64 {
        let us = at.saturating_duration_since(self.started).as_micros();
        u64::try_from(us).unwrap_or(u64::MAX)
    }

    /// Adds one committed call: `recorded` is when its `tool/call` was durable; `subs` are its
    /// Code Mode sub-calls' marks.
    pub(crate) fn add(
        &mut self,
        call_id: &str,
        recorded: Option<Instant>,
        marks: &Snapshot,
        subs: Vec<SubMarks>,
    ) {
        let mut out = std::mem::take(&mut self.calls);
        if self.count > 0 {
            out.push(b',');
        }
        self.count += 1;
        self.entry(&mut out, call_id, recorded, marks);
        if !subs.is_empty() {
            out.extend_from_slice(b",\"subs\":[");
            for (i, (id, m)) in subs.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                self.entry(&mut out, id, None, m);
                out.push(b'}');
            }
            out.push(b']');
        }
        out.push(b'}');
        self.calls = out;
    }

    /// One entry, without its closing brace: `{"callId":..,"recorded":..,"prepare":..,...`.
    fn entry(&self, out: &mut Vec<u8>, call_id: &str, recorded: Option<Instant>, marks: &Snapshot) {
        use std::io::Write as _;
        // Writing into a `Vec` cannot fail.
        out.extend_from_slice(b"{\"callId\":");
        let _ = serde_json::to_writer(&mut *out, call_id);
        let put = |out: &mut Vec<u8>, key: &str, at: Option<Instant>| {
            if let Some(at) = at {
                let _ = write!(out, ",\"{key}\":{}", self.micros(at));
            }
        };
        put(out, "recorded", recorded);
        put(out, "prepare", get(marks, Mark::Prepare));
        if let (Some(a), Some(b)) = (
            get(marks, Mark::ApprovalAsked),
            get(marks, Mark::ApprovalAnswered),
        ) {
            let _ = write!(out, ",\"approval\":[{},{}]", self.micros(a), self.micros(b));
        }
        put(out, "dispatch", get(marks, Mark::Dispatch));
        put(out, "dispatched", get(marks, Mark::Dispatched));
        put(out, "finalize", get(marks, Mark::Finalize));
        put(out, "done", get(marks, Mark::Done));
    }

    /// The `dsh/step-timing` event, or `None` when the step committed no call.
    pub(crate) fn event(self, turn: u32, step: u32) -> Option<Event> {
        if self.count == 0 {
            return None;
        }
        let wall = self
            .wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        let calls = String::from_utf8_lossy(&self.calls);
        let line = format!(
            "{{\"type\":\"{STEP_TIMING}\",\"data\":{{\"turn\":{turn},\"step\":{step},\"startedAt\":{wall},\"calls\":[{calls}]}}}}"
        );
        match Event::from_json_line(&line) {
            Ok(event) => Some(event),
            Err(e) => {
                tracing::error!("dsh/step-timing not written: {e}");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn marks_at(start: Instant, us: &[(Mark, u64)]) -> Snapshot {
        let mut s: Snapshot = Default::default();
        for (mark, at) in us {
            s[*mark as usize] = Some(start + Duration::from_micros(*at));
        }
        s
    }

    #[test]
    fn sub_call_marks_wait_for_their_root_and_are_taken_once() {
        let subs = SubTimings::default();
        let start = Instant::now();
        subs.push("root", Arc::from("root:code:1"), marks_at(start, &[]));
        // A clone of the runtime shares them.
        subs.clone()
            .push("root", Arc::from("root:code:2"), marks_at(start, &[]));
        subs.push("other", Arc::from("other:code:1"), marks_at(start, &[]));
        let taken: Vec<String> = subs
            .take("root")
            .iter()
            .map(|(id, _)| id.to_string())
            .collect();
        assert_eq!(taken, ["root:code:1", "root:code:2"], "commit order");
        assert!(subs.take("root").is_empty(), "taken once");
        assert_eq!(subs.take("other").len(), 1);
    }

    #[test]
    fn roots_no_step_takes_do_not_grow_without_end() {
        let subs = SubTimings::default();
        let start = Instant::now();
        for i in 0..MAX_ROOTS + 10 {
            subs.push(&format!("r{i}"), Arc::from("x"), marks_at(start, &[]));
        }
        let waiting = subs.0.lock().map(|m| m.len()).unwrap_or(usize::MAX);
        assert!(waiting <= MAX_ROOTS, "{waiting}");
        assert_eq!(subs.take(&format!("r{}", MAX_ROOTS + 9)).len(), 1);
    }

    #[test]
    fn a_calls_entry_lists_its_sub_calls_on_the_steps_clock() {
        let mut timing = StepTiming::start();
        let t0 = timing.started;
        let root = marks_at(
            t0,
            &[
                (Mark::Prepare, 10),
                (Mark::Dispatch, 20),
                (Mark::Dispatched, 90),
                (Mark::Finalize, 91),
                (Mark::Done, 95),
            ],
        );
        let sub = marks_at(
            t0,
            &[
                (Mark::Prepare, 30),
                (Mark::Dispatch, 31),
                (Mark::Dispatched, 50),
                (Mark::Finalize, 51),
                (Mark::Done, 52),
            ],
        );
        timing.add("c1", None, &root, vec![(Arc::from("c1:code:1"), sub)]);
        timing.add("c2", None, &root, Vec::new());
        let event = timing.event(1, 2).expect("an event");
        let data = event.data().value().clone();
        assert_eq!(
            data["calls"][0]["subs"],
            serde_json::json!([{"callId": "c1:code:1", "prepare": 30, "dispatch": 31,
                                "dispatched": 50, "finalize": 51, "done": 52}])
        );
        assert!(data["calls"][1].get("subs").is_none(), "{data}");
        // The line is the one a tree of the same fields would serialize to, in this order.
        let line = event.to_json_line();
        assert!(
            line.starts_with(r#"{"type":"dsh/step-timing","data":{"turn":1,"step":2,"startedAt":"#),
            "{line}"
        );
        assert!(
            line.ends_with(r#"{"callId":"c2","prepare":10,"dispatch":20,"dispatched":90,"finalize":91,"done":95}]}}"#),
            "{line}"
        );
    }
}
