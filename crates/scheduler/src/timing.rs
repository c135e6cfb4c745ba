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

use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

use dsh_core::Json;
use dsh_session::Event;
use serde_json::{Map, Value};

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

    fn get(&self, mark: Mark) -> Option<Instant> {
        self.at[mark as usize].get().copied()
    }
}

/// A step's clock and the timing of its calls, in commit (model) order.
pub(crate) struct StepTiming {
    started: Instant,
    wall: SystemTime,
    calls: Vec<Value>,
}

impl StepTiming {
    /// Starts the step's clock.
    pub(crate) fn start() -> StepTiming {
        StepTiming {
            started: Instant::now(),
            wall: SystemTime::now(),
            calls: Vec::new(),
        }
    }

    fn micros(&self, at: Instant) -> Value {
        let us = at.saturating_duration_since(self.started).as_micros();
        Value::from(u64::try_from(us).unwrap_or(u64::MAX))
    }

    /// Adds one committed call: `recorded` is when its `tool/call` was durable.
    pub(crate) fn add(&mut self, call_id: &str, recorded: Option<Instant>, marks: &Marks) {
        let mut o = Map::new();
        o.insert("callId".into(), Value::from(call_id));
        if let Some(r) = recorded {
            o.insert("recorded".into(), self.micros(r));
        }
        let mut put = |key: &str, mark: Mark| {
            if let Some(at) = marks.get(mark) {
                o.insert(key.into(), self.micros(at));
            }
        };
        put("prepare", Mark::Prepare);
        if let (Some(a), Some(b)) = (
            marks.get(Mark::ApprovalAsked),
            marks.get(Mark::ApprovalAnswered),
        ) {
            o.insert(
                "approval".into(),
                Value::Array(vec![self.micros(a), self.micros(b)]),
            );
        }
        let mut put = |key: &str, mark: Mark| {
            if let Some(at) = marks.get(mark) {
                o.insert(key.into(), self.micros(at));
            }
        };
        put("dispatch", Mark::Dispatch);
        put("dispatched", Mark::Dispatched);
        put("finalize", Mark::Finalize);
        put("done", Mark::Done);
        self.calls.push(Value::Object(o));
    }

    /// The `dsh/step-timing` event, or `None` when the step committed no call.
    pub(crate) fn event(self, turn: u32, step: u32) -> Option<Event> {
        if self.calls.is_empty() {
            return None;
        }
        let wall = self
            .wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        let mut data = Map::new();
        data.insert("turn".into(), Value::from(turn));
        data.insert("step".into(), Value::from(step));
        data.insert("startedAt".into(), Value::from(wall));
        data.insert("calls".into(), Value::Array(self.calls));
        Some(Event::other(
            STEP_TIMING,
            Json::from_shallow(Value::Object(data)),
        ))
    }
}
