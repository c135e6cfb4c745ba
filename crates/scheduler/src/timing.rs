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
//! a call never reached (a denied call has no `dispatch`) is left out. In a step of one call,
//! `prepare` is `recorded` and `finalize` is `dispatched`: on that path only the call's making
//! runs between the first two and nothing between the last two, so each pair is one clock read.
//!
//! A call whose body ran Code Mode sub-calls (`<parent>:code:<n>`, through a pool of the same
//! runtime) also has `"subs"`: each sub-call's marks, in commit order, on the step's clock
//! (`{"callId":"c1:code:1","prepare":..,"dispatch":..,"dispatched":..,"finalize":..,"done":..}`).
//! A sub-call's marks are kept by the runtime ([`SubTimings`]) from its commit until its root
//! call's step writes them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::SystemTime;

use dsh_session::{DataError, DataWriter, Event, Keys, OnDemandData};

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

/// The instants one call reached each [`Mark`] (unset when timing is off or never reached):
/// as [`now`] gives them (0: unset). An atomic word per mark, so a mark costs a
/// clock read and a store, and a call's marks take 56 bytes whether timing is on or not.
#[derive(Debug, Default)]
pub(crate) struct Marks {
    on: bool,
    at: [AtomicU64; MARKS],
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
            let slot = &self.at[mark as usize];
            if slot.load(Ordering::Relaxed) == 0 {
                slot.store(now(), Ordering::Relaxed);
            }
        }
    }

    /// Records that the call reached `mark` at `at` (a [`now`] reading), unless it already did.
    pub(crate) fn set_at(&self, mark: Mark, at: u64) {
        if self.on {
            let slot = &self.at[mark as usize];
            if slot.load(Ordering::Relaxed) == 0 {
                slot.store(at, Ordering::Relaxed);
            }
        }
    }

    /// Records that the call reached `to` at the instant it reached `from` (when `from` was
    /// reached and `to` was not yet): for two marks nothing runs between, one clock read.
    pub(crate) fn same_instant(&self, from: Mark, to: Mark) {
        if self.on {
            let at = self.at[from as usize].load(Ordering::Relaxed);
            let slot = &self.at[to as usize];
            if at != 0 && slot.load(Ordering::Relaxed) == 0 {
                slot.store(at, Ordering::Relaxed);
            }
        }
    }

    /// The instants recorded so far.
    pub(crate) fn snapshot(&self) -> Snapshot {
        std::array::from_fn(|i| self.at[i].load(Ordering::Relaxed))
    }
}

/// Now, as a mark holds it: nanoseconds on the monotonic clock (the one
/// [`std::time::Instant`] reads), never 0.
pub(crate) fn now() -> u64 {
    monotonic_ns().max(1)
}

/// The monotonic clock in nanoseconds, read as one `clock_gettime` (the vDSO) and a multiply.
/// Going through [`std::time::Instant`] and a [`std::time::Duration`] from an epoch cost about
/// 100 instructions more a mark: nearly a third of what timing added to a one-call step.
#[cfg(unix)]
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// The monotonic clock in nanoseconds past the first reading.
#[cfg(not(unix))]
fn monotonic_ns() -> u64 {
    use std::time::Instant;
    static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
    u64::try_from(EPOCH.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// How long the wall clock read at one instant is used for later ones (see [`wall_ms`]).
const REANCHOR_NS: u64 = 1_000_000_000;

/// The last reading of the wall clock, carried forward by [`WallClock::at`].
struct WallClock {
    /// `wall_ms - monotonic_ms` at that reading.
    offset_ms: AtomicI64,
    /// When it was read, as [`now`] gives it (0: never).
    read_at: AtomicU64,
}

/// The process's carried wall clock.
static WALL: WallClock = WallClock {
    offset_ms: AtomicI64::new(0),
    read_at: AtomicU64::new(0),
};

/// The wall clock (milliseconds since the Unix epoch) at `at` (as [`now`] gives it): read at
/// most once a second of the monotonic clock and carried forward from the last reading in
/// between, so a step reads one clock at its start, not two (a clock read costs ~30 ns on a
/// virtual machine, a sizeable share of a one-call step). A jump of the wall clock (a
/// correction, a resume from suspend) shows within a second. Two threads reading it again at
/// once, or a thread paused between its two clock reads, can leave the carried value off by
/// about a millisecond for up to a second; `startedAt` is written in milliseconds.
fn wall_ms(at: u64) -> u64 {
    WALL.at(at)
}

impl WallClock {
    fn at(&self, at: u64) -> u64 {
        let read_at = self.read_at.load(Ordering::Acquire);
        if read_at != 0 && at >= read_at && at - read_at < REANCHOR_NS {
            let ms =
                self.offset_ms.load(Ordering::Relaxed) + i64::try_from(at / 1_000_000).unwrap_or(0);
            return u64::try_from(ms).unwrap_or(0);
        }
        let wall = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        let offset = i64::try_from(wall)
            .unwrap_or(i64::MAX)
            .saturating_sub(i64::try_from(at / 1_000_000).unwrap_or(0));
        self.offset_ms.store(offset, Ordering::Relaxed);
        self.read_at.store(at, Ordering::Release);
        wall
    }
}

/// The instants one call reached each [`Mark`], copied once the call is committed.
/// Each as [`now`] gives it, 0 when unset.
pub(crate) type Snapshot = [u64; MARKS];

fn get(marks: &Snapshot, mark: Mark) -> Option<u64> {
    Some(marks[mark as usize]).filter(|&at| at != 0)
}

/// Sub-calls' marks waiting for their root call's step, by root call id. Shared by every clone
/// of a runtime (the step's and Code Mode's pools run on clones of one).
#[derive(Clone, Debug, Default)]
pub(crate) struct SubTimings(Arc<Waiting>);

#[derive(Debug, Default)]
struct Waiting {
    /// How many roots the map holds, so a step whose calls ran no sub-call (the usual case)
    /// takes nothing without locking it. A sub-call commits before its root's body returns,
    /// hence before the root is committed: the count is up to date when the root looks.
    roots: AtomicUsize,
    map: Mutex<HashMap<String, Vec<SubMarks>>>,
}

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
            .map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= MAX_ROOTS && !map.contains_key(root) {
            map.clear();
        }
        map.entry(root.to_owned())
            .or_default()
            .push((call_id, marks));
        self.0.roots.store(map.len(), Ordering::Release);
    }

    /// Takes the marks of root call `root`'s sub-calls, in commit order.
    pub(crate) fn take(&self, root: &str) -> Vec<SubMarks> {
        if self.0.roots.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let mut map = self
            .0
            .map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let taken = map.remove(root).unwrap_or_default();
        self.0.roots.store(map.len(), Ordering::Release);
        taken
    }
}

/// When each recorded call's `tool/call` was durable, as groups of calls recorded together
/// (`[previous end, end)` at one instant), read in model order as the calls commit. The first
/// group is kept inline: a step of one call allocates nothing for it.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    /// The group the next committed call is looked up in: its end and instant.
    front: Option<(usize, u64)>,
    /// Later groups.
    rest: std::collections::VecDeque<(usize, u64)>,
}

impl Recorded {
    /// Calls up to `end` (exclusive) were recorded at `at`.
    pub(crate) fn push(&mut self, end: usize, at: u64) {
        if self.front.is_none() {
            self.front = Some((end, at));
        } else {
            self.rest.push_back((end, at));
        }
    }

    /// When call `i` was recorded; `i` only grows from one call to the next.
    pub(crate) fn at(&mut self, i: usize) -> Option<u64> {
        while let Some((end, _)) = self.front
            && i >= end
        {
            self.front = self.rest.pop_front();
        }
        self.front.map(|(_, at)| at)
    }
}

/// The keys of the event's objects, in the order they are written.
struct Shapes {
    /// `{turn, step, startedAt, calls}`.
    top: Keys,
    /// A call's (or sub-call's) entry.
    call: Keys,
}

const TURN: usize = 0;
const STEP: usize = 1;
const STARTED_AT: usize = 2;
const CALLS: usize = 3;

const CALL_ID: usize = 0;
const RECORDED: usize = 1;
/// `prepare`; the marks before `approval` follow [`Mark`]'s order from here.
const PREPARE: usize = 2;
const APPROVAL: usize = 3;
/// `dispatch`, `dispatched`, `finalize`, `done`: [`Mark::Dispatch`] and on, in order.
const DISPATCH: usize = 4;
const SUBS: usize = 8;

static SHAPES: LazyLock<Result<Shapes, DataError>> = LazyLock::new(|| {
    Ok(Shapes {
        top: Keys::new(&["turn", "step", "startedAt", "calls"])?,
        call: Keys::new(&[
            "callId",
            "recorded",
            "prepare",
            "approval",
            "dispatch",
            "dispatched",
            "finalize",
            "done",
            "subs",
        ])?,
    })
});

/// A step's clock and the timing of its calls, in commit (model) order. The event keeps them as
/// they are and writes its canonical JSON text only when someone needs it (a durable log's line,
/// written as the event is appended; a reader of the tree): a step on an in-memory log pays for
/// a few words a call, not for the text (see [`dsh_session::OnDemandData`]).
pub(crate) struct StepTiming {
    /// The step's start, as [`now`] gives it.
    started: u64,
    /// The wall clock at the step's start, in milliseconds since the Unix epoch.
    wall: u64,
    turn: u32,
    step: u32,
    /// The first committed call's marks, inline: a step of one call (the usual case)
    /// allocates nothing for them.
    first: Option<Entry>,
    /// The later calls' marks.
    rest: Vec<Entry>,
}

/// One committed call's marks.
struct Entry {
    call_id: Arc<str>,
    /// When its `tool/call` was durable, as [`now`] gives it (0: unknown).
    recorded: u64,
    marks: Snapshot,
    /// Its Code Mode sub-calls' marks, in commit order.
    subs: Vec<SubMarks>,
}

impl StepTiming {
    /// Starts the clock of step `step` of turn `turn`.
    pub(crate) fn start(turn: u32, step: u32) -> StepTiming {
        let started = now();
        let wall = wall_ms(started);
        StepTiming {
            started,
            wall,
            turn,
            step,
            first: None,
            rest: Vec::new(),
        }
    }

    /// Adds one committed call: `recorded` is when its `tool/call` was durable (as [`now`]
    /// gives it); `subs` are its Code Mode sub-calls' marks.
    pub(crate) fn add(
        &mut self,
        call_id: &Arc<str>,
        recorded: Option<u64>,
        marks: &Snapshot,
        subs: Vec<SubMarks>,
    ) {
        let entry = Entry {
            call_id: call_id.clone(),
            recorded: recorded.unwrap_or(0),
            marks: *marks,
            subs,
        };
        if self.first.is_none() {
            self.first = Some(entry);
        } else {
            self.rest.push(entry);
        }
    }

    /// The committed calls' marks, in commit order.
    fn calls(&self) -> impl Iterator<Item = &Entry> {
        self.first.iter().chain(&self.rest)
    }

    /// The `dsh/step-timing` event, or `None` when the step committed no call.
    pub(crate) fn event(self) -> Option<Event> {
        self.first.as_ref()?;
        let shapes = match &*SHAPES {
            Ok(shapes) => shapes,
            Err(e) => {
                tracing::error!("dsh/step-timing not written: {e}");
                return None;
            }
        };
        static TYPE: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(STEP_TIMING));
        match Event::on_demand(
            TYPE.clone(),
            Timed {
                timing: self,
                shapes,
            },
        ) {
            Ok(event) => Some(event),
            Err(e) => {
                tracing::error!("dsh/step-timing not written: {e}");
                None
            }
        }
    }

    /// Microseconds from the step's start to `at` (as [`now`] gives it).
    fn micros(&self, at: u64) -> u64 {
        at.saturating_sub(self.started) / 1000
    }

    /// One entry's fields: `callId`, `recorded`, `prepare`, ... (a mark never reached is left
    /// out).
    fn entry(
        &self,
        data: &mut DataWriter<'static>,
        call_id: &str,
        recorded: u64,
        marks: &Snapshot,
    ) {
        data.str(CALL_ID, call_id);
        if recorded != 0 {
            data.u64(RECORDED, self.micros(recorded));
        }
        if let Some(at) = get(marks, Mark::Prepare) {
            data.u64(PREPARE, self.micros(at));
        }
        if let (Some(a), Some(b)) = (
            get(marks, Mark::ApprovalAsked),
            get(marks, Mark::ApprovalAnswered),
        ) {
            data.open_array(APPROVAL);
            data.item_u64(self.micros(a));
            data.item_u64(self.micros(b));
            data.close();
        }
        let later = [Mark::Dispatch, Mark::Dispatched, Mark::Finalize, Mark::Done];
        for (i, mark) in later.into_iter().enumerate() {
            if let Some(at) = get(marks, mark) {
                data.u64(DISPATCH + i, self.micros(at));
            }
        }
    }
}

/// Whether a call's marks hold the approval pair (written as a nested array).
fn has_approval(marks: &Snapshot) -> bool {
    get(marks, Mark::ApprovalAsked).is_some() && get(marks, Mark::ApprovalAnswered).is_some()
}

/// A step's timing as its event keeps it, with the shapes its text is written in.
struct Timed {
    timing: StepTiming,
    shapes: &'static Shapes,
}

impl OnDemandData for Timed {
    fn write(&self) -> DataWriter<'static> {
        let (timing, shapes) = (&self.timing, self.shapes);
        let calls = usize::from(timing.first.is_some()) + timing.rest.len();
        let mut data = DataWriter::new(&shapes.top, 64 + 160 * calls);
        data.u64(TURN, u64::from(timing.turn));
        data.u64(STEP, u64::from(timing.step));
        data.u64(STARTED_AT, timing.wall);
        data.open_array(CALLS);
        for call in timing.calls() {
            data.item_object(&shapes.call);
            timing.entry(&mut data, &call.call_id, call.recorded, &call.marks);
            if !call.subs.is_empty() {
                data.open_array(SUBS);
                for (id, marks) in &call.subs {
                    data.item_object(&shapes.call);
                    timing.entry(&mut data, id, 0, marks);
                    data.close();
                }
                data.close();
            }
            data.close();
        }
        data.close();
        data
    }

    fn depth(&self) -> usize {
        // data > calls > a call's entry (3), > its approval pair (4); > subs > a sub-call's
        // entry (5), > its approval pair (6).
        self.timing
            .calls()
            .map(|call| {
                let own = if has_approval(&call.marks) { 4 } else { 3 };
                let subs = if call.subs.is_empty() {
                    0
                } else if call.subs.iter().any(|(_, m)| has_approval(m)) {
                    6
                } else {
                    5
                };
                own.max(subs)
            })
            .max()
            .unwrap_or(2)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use proptest::prelude::*;

    use super::*;

    fn marks_at(start: u64, us: &[(Mark, u64)]) -> Snapshot {
        let mut s: Snapshot = Default::default();
        for (mark, at) in us {
            s[*mark as usize] = start + at * 1000;
        }
        s
    }

    #[test]
    fn a_mark_keeps_the_first_instant_and_only_when_on() {
        let before = now();
        let marks = Marks::new(true);
        marks.set(Mark::Prepare);
        let first = get(&marks.snapshot(), Mark::Prepare).expect("marked");
        marks.set(Mark::Prepare);
        marks.set(Mark::Done);
        let snap = marks.snapshot();
        assert_eq!(get(&snap, Mark::Prepare), Some(first), "first time only");
        assert!(first >= before, "{first} {before}");
        // Nanoseconds of the clock `Instant` reads: an interval inside one `Instant` measured
        // is never longer than it, and not much shorter. The second holds unless the thread
        // was preempted between two paired reads, so it is asked of one of a few tries.
        let mut measured = Vec::new();
        for _ in 0..5 {
            let (i0, n0) = (Instant::now(), now());
            while i0.elapsed() < Duration::from_millis(5) {
                std::hint::spin_loop();
            }
            let (n1, i1) = (now(), Instant::now());
            let outer = u64::try_from(i1.duration_since(i0).as_nanos()).unwrap_or(u64::MAX);
            let inner = n1 - n0;
            assert!(inner <= outer, "{inner} ns in {outer} ns");
            measured.push((inner, outer));
            if inner >= outer / 2 {
                break;
            }
        }
        assert!(
            measured.iter().any(|&(inner, outer)| inner >= outer / 2),
            "(inner, outer) ns: {measured:?}"
        );
        assert!(get(&snap, Mark::Done).is_some_and(|done| done >= first));
        assert!(get(&snap, Mark::Dispatch).is_none(), "never reached");
        let off = Marks::new(false);
        off.set(Mark::Prepare);
        assert!(off.snapshot().iter().all(|&at| at == 0));
    }

    #[test]
    fn the_wall_clock_is_carried_forward_within_a_second_and_read_again_after() {
        // A clock of its own: other tests read the process's meanwhile.
        let clock = WallClock {
            offset_ms: AtomicI64::new(0),
            read_at: AtomicU64::new(0),
        };
        let at = now();
        let first = clock.at(at);
        let system = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(0))
            .unwrap_or(0);
        assert!(first.abs_diff(system) < 2_000, "{first} against {system}");
        // 250 ms later on the monotonic clock, within the second: carried forward.
        let later = clock.at(at + 250_000_000);
        assert!(
            (249..=251).contains(&later.saturating_sub(first)),
            "{first} {later}"
        );
        // Past the second: the wall clock is read again and the carried value is replaced.
        let past = at + 2 * REANCHOR_NS;
        let again = clock.at(past);
        assert_eq!(clock.read_at.load(Ordering::Acquire), past);
        assert!(again.abs_diff(system) < 2_000, "{again} against {system}");
    }

    #[test]
    fn each_call_reads_the_instant_of_its_group() {
        let t0 = now();
        let at = |us: u64| t0 + us * 1000;
        let mut recorded = Recorded::default();
        recorded.push(1, at(1));
        recorded.push(4, at(2));
        recorded.push(5, at(3));
        let seen: Vec<Option<u64>> = (0..6).map(|i| recorded.at(i)).collect();
        assert_eq!(
            seen,
            [
                Some(at(1)),
                Some(at(2)),
                Some(at(2)),
                Some(at(2)),
                Some(at(3)),
                None
            ]
        );
    }

    #[test]
    fn sub_call_marks_wait_for_their_root_and_are_taken_once() {
        let subs = SubTimings::default();
        let start = now();
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
        let start = now();
        for i in 0..MAX_ROOTS + 10 {
            subs.push(&format!("r{i}"), Arc::from("x"), marks_at(start, &[]));
        }
        let waiting = subs.0.map.lock().map(|m| m.len()).unwrap_or(usize::MAX);
        assert!(waiting <= MAX_ROOTS, "{waiting}");
        assert_eq!(subs.take(&format!("r{}", MAX_ROOTS + 9)).len(), 1);
    }

    #[test]
    fn a_calls_entry_lists_its_sub_calls_on_the_steps_clock() {
        let mut timing = StepTiming::start(1, 2);
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
        timing.add(
            &Arc::from("c1"),
            None,
            &root,
            vec![(Arc::from("c1:code:1"), sub)],
        );
        timing.add(&Arc::from("c2"), None, &root, Vec::new());
        let event = timing.event().expect("an event");
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

    /// Microseconds from the step's start for each mark (`None`: never reached).
    type MarksUs = [Option<u64>; MARKS];

    /// A call's id, `recorded`, marks and sub-calls, as the property test draws them.
    type CallInput = (String, Option<u64>, MarksUs, Vec<(String, MarksUs)>);

    /// What the event was before it was written as text: a tree of the same fields, serialized
    /// and read back through the full line reader.
    fn tree_event(
        turn: u32,
        step: u32,
        started_at: &serde_json::Value,
        calls: &[CallInput],
    ) -> Event {
        use serde_json::{Map, Value, json};
        let entry = |id: &str, recorded: Option<u64>, m: &MarksUs| {
            let mut e = Map::new();
            e.insert("callId".into(), json!(id));
            let mut put = |key: &str, v: Option<u64>| {
                if let Some(v) = v {
                    e.insert(key.into(), json!(v));
                }
            };
            put("recorded", recorded);
            put("prepare", m[Mark::Prepare as usize]);
            if let (Some(a), Some(b)) = (
                m[Mark::ApprovalAsked as usize],
                m[Mark::ApprovalAnswered as usize],
            ) {
                e.insert("approval".into(), json!([a, b]));
            }
            let mut put = |key: &str, v: Option<u64>| {
                if let Some(v) = v {
                    e.insert(key.into(), json!(v));
                }
            };
            put("dispatch", m[Mark::Dispatch as usize]);
            put("dispatched", m[Mark::Dispatched as usize]);
            put("finalize", m[Mark::Finalize as usize]);
            put("done", m[Mark::Done as usize]);
            e
        };
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, recorded, m, subs)| {
                let mut e = entry(id, *recorded, m);
                if !subs.is_empty() {
                    let subs = subs
                        .iter()
                        .map(|(id, m)| Value::Object(entry(id, None, m)))
                        .collect();
                    e.insert("subs".into(), Value::Array(subs));
                }
                Value::Object(e)
            })
            .collect();
        let line = json!({"type": STEP_TIMING, "data": {"turn": turn, "step": step,
                          "startedAt": started_at, "calls": calls}});
        Event::from_json_line(&line.to_string()).expect("a line")
    }

    fn at(start: u64, marks: &MarksUs) -> Snapshot {
        std::array::from_fn(|i| marks[i].map_or(0, |us| start + us * 1000))
    }

    fn us() -> impl Strategy<Value = Option<u64>> {
        prop::option::of(prop_oneof![0u64..2_000, any::<u32>().prop_map(u64::from)])
    }

    fn call_id() -> impl Strategy<Value = String> {
        prop_oneof!["c[0-9]{1,3}(:code:[0-9])?", any::<String>()]
    }

    proptest! {
        #[test]
        fn the_text_event_is_the_one_the_tree_gave(
            turn in any::<u32>(),
            step in any::<u32>(),
            calls in prop::collection::vec(
                (call_id(), us(), prop::array::uniform7(us()),
                 prop::collection::vec((call_id(), prop::array::uniform7(us())), 0..3)),
                1..4,
            ),
        ) {
            let mut timing = StepTiming::start(turn, step);
            let t0 = timing.started;
            for (id, recorded, marks, subs) in &calls {
                let subs = subs
                    .iter()
                    .map(|(id, m)| (Arc::from(id.as_str()), at(t0, m)))
                    .collect();
                let recorded = recorded.map(|us| t0 + us * 1000);
                timing.add(&Arc::from(id.as_str()), recorded, &at(t0, marks), subs);
            }
            let event = timing.event().expect("an event");
            let tree = tree_event(turn, step, &event.data().value()["startedAt"], &calls);
            prop_assert_eq!(event.to_json_line(), tree.to_json_line());
            prop_assert_eq!(&event, &tree);
            // The log reader takes the line back unchanged.
            let read = Event::from_json_line(&event.to_json_line()).expect("reads");
            prop_assert_eq!(read.to_json_line(), event.to_json_line());
        }
    }

    #[test]
    fn a_step_that_committed_no_call_writes_no_event() {
        assert!(StepTiming::start(1, 1).event().is_none());
    }
}
