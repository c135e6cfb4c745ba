//! One record of the log, `{type, data, sourceEventSeqs?, surfaceOp?}` (spec L1, L2), with typed
//! constructors in the reference shapes and typed views for reading them back.
//!
//! Guarantees: an [`Event`] is immutable; its `data` is kept verbatim as a frozen [`Json`]; any
//! event type is accepted and written back unchanged; a line whose top-level keys are not in the
//! canonical order keeps its whole original value, so it is written back exactly as read. The
//! typed constructors, and the reader for a line already in the canonical compact form (see
//! [`crate::scan`]), keep `data` as its compact JSON text (see [`crate::payload`]) and build the
//! tree only when [`Event::data`] is first called; either way `data()` gives the same value.

use std::sync::Arc;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use dsh_core::{Content, ContextMessage, ErrorInfo, Json};

use crate::deep;
use crate::deferred::{
    CallFields, Deferred, DispatchFields, ResultFields, ResultPlace, dispatch_depth, result_depth,
};
use crate::payload::{Facts, Payload, StrFact, SubText, TextWriter};
use crate::scan::{Scanned, Scratch, scan_line};

/// The event types this crate knows by name. Any other type is kept verbatim.
pub mod types {
    /// A model call recorded before any policy runs.
    pub const TOOL_CALL: &str = "tool/call";
    /// The single result the model sees for a call.
    pub const TOOL_RESULT: &str = "tool/result";
    /// A Code Mode sub-call started (log-only).
    pub const CODE_DISPATCH_START: &str = "tool/code-dispatch-start";
    /// A Code Mode sub-call settled (log-only).
    pub const CODE_DISPATCH: &str = "tool/code-dispatch";
    /// A user-role message: a prompt or a context.
    pub const USER_MESSAGE: &str = "user/message";
    /// The model's message for a step.
    pub const ASSISTANT_MESSAGE: &str = "assistant/message";
    /// A turn opens.
    pub const TURN_START: &str = "turn/start";
    /// A turn closes, with a reason.
    pub const TURN_END: &str = "turn/end";
    /// A step opens.
    pub const STEP_START: &str = "step/start";
    /// A step closes.
    pub const STEP_END: &str = "step/end";
    /// Approval audit: a question was asked.
    pub const APPROVAL_ASKED: &str = "approval/asked";
    /// Approval audit: a question was decided.
    pub const APPROVAL_DECIDED: &str = "approval/decided";
    /// Approval policy change.
    pub const APPROVAL_POLICY: &str = "approval/policy";
    /// The suffix of compressed chunk runs (`reasoning-chunks`, `text-chunks`, `tool-call-chunks`).
    pub const CHUNKS_SUFFIX: &str = "-chunks";
}

/// The deepest `data` an appended event may hold: its log line wraps it in one more level, and
/// a line may nest at most [`dsh_core::json::MAX_DEPTH`] levels.
pub const MAX_DATA_DEPTH: usize = dsh_core::json::MAX_DEPTH - 1;

/// How an event changes the model-visible surface.
#[derive(Clone, Debug, PartialEq)]
pub enum SurfaceOp {
    /// `"append"`: the event's message is appended to the history.
    Append,
    /// Any other value (for example `{op: "replace", startSeq, endSeq}`), kept verbatim.
    Other(Json),
}

impl SurfaceOp {
    fn from_value(value: Value) -> SurfaceOp {
        match value {
            Value::String(s) if s == "append" => SurfaceOp::Append,
            other => SurfaceOp::Other(Json::from_shallow(other)),
        }
    }
}

impl Serialize for SurfaceOp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SurfaceOp::Append => s.serialize_str("append"),
            SurfaceOp::Other(v) => v.serialize(s),
        }
    }
}

/// `sourceEventSeqs`: a single seq (a `tool/result`'s call, the common case) kept inline, more
/// behind a thin `Arc` (so that the whole stays 16 bytes and an event 56).
#[derive(Clone)]
pub(crate) enum Seqs {
    One(u64),
    Many(Arc<Box<[u64]>>),
}

impl Seqs {
    fn as_slice(&self) -> &[u64] {
        match self {
            Seqs::One(seq) => std::slice::from_ref(seq),
            Seqs::Many(seqs) => seqs,
        }
    }
}

impl From<Vec<u64>> for Seqs {
    fn from(seqs: Vec<u64>) -> Seqs {
        match seqs[..] {
            [one] => Seqs::One(one),
            _ => Seqs::Many(Arc::new(seqs.into_boxed_slice())),
        }
    }
}

impl From<Arc<[u64]>> for Seqs {
    fn from(seqs: Arc<[u64]>) -> Seqs {
        match seqs[..] {
            [one] => Seqs::One(one),
            _ => Seqs::Many(Arc::new(Box::from(&seqs[..]))),
        }
    }
}

/// One event of the log. Cheap to clone: its type and data are shared (`Arc`); only the rare
/// tail (a surface op other than `append`, an original line kept verbatim) is copied.
#[derive(Clone)]
pub struct Event {
    event_type: Arc<str>,
    data: Arc<Payload>,
    source_event_seqs: Option<Seqs>,
    /// The surface op, the seq span and the original line, packed.
    tail: Tail,
}

/// The parts of an event that are usually empty or small, packed so that an event stays small:
/// a log holds one per event (resident memory).
#[derive(Clone, PartialEq)]
struct Tail {
    /// `surfaceOp: "append"`, the usual one, kept without a box.
    append: bool,
    /// How many seqs the event occupies; 0 marks a chunk run with no entries (refused on append).
    span: u32,
    /// Any other surface op, and the original line, when there is one.
    rare: Option<Box<Rare>>,
}

/// See [`Tail`].
#[derive(Clone, PartialEq)]
struct Rare {
    /// A surface op other than `append`.
    surface_op: Option<SurfaceOp>,
    /// The whole original line, when its top-level layout was not the canonical one.
    verbatim: Option<Json>,
}

/// The `append` surface op, lent out by [`Event::surface_op`].
static APPEND: SurfaceOp = SurfaceOp::Append;

impl Tail {
    /// A tail with nothing rare: the surface op `append`, or none.
    #[inline]
    fn plain(append: bool, span: u64) -> Tail {
        Tail {
            append,
            span: u32::try_from(span).unwrap_or(u32::MAX),
            rare: None,
        }
    }

    fn new(surface_op: Option<SurfaceOp>, span: u64, verbatim: Option<Json>) -> Tail {
        match (&surface_op, &verbatim) {
            (None, None) => return Tail::plain(false, span),
            (Some(SurfaceOp::Append), None) => return Tail::plain(true, span),
            _ => {}
        }
        let mut tail = Tail {
            append: false,
            span: u32::try_from(span).unwrap_or(u32::MAX),
            rare: None,
        };
        tail.set_surface_op(surface_op);
        tail.set_verbatim(verbatim);
        tail
    }

    fn surface_op(&self) -> Option<&SurfaceOp> {
        if self.append {
            Some(&APPEND)
        } else {
            self.rare.as_ref().and_then(|r| r.surface_op.as_ref())
        }
    }

    fn verbatim(&self) -> Option<&Json> {
        self.rare.as_ref().and_then(|r| r.verbatim.as_ref())
    }

    #[inline]
    fn set_surface_op(&mut self, op: Option<SurfaceOp>) {
        self.append = matches!(op, Some(SurfaceOp::Append));
        let other = op.filter(|o| !matches!(o, SurfaceOp::Append));
        // The usual case (no other op, nothing rare yet) touches no box.
        if other.is_none() && self.rare.is_none() {
            return;
        }
        let verbatim = self.rare.take().and_then(|r| r.verbatim);
        self.rare = Rare::boxed(other, verbatim);
    }

    #[inline]
    fn set_verbatim(&mut self, verbatim: Option<Json>) {
        if verbatim.is_none() && self.rare.is_none() {
            return;
        }
        let other = self.rare.take().and_then(|r| r.surface_op);
        self.rare = Rare::boxed(other, verbatim);
    }

    fn span(&self) -> u64 {
        u64::from(self.span)
    }
}

impl Rare {
    fn boxed(surface_op: Option<SurfaceOp>, verbatim: Option<Json>) -> Option<Box<Rare>> {
        (surface_op.is_some() || verbatim.is_some()).then(|| {
            Box::new(Rare {
                surface_op,
                verbatim,
            })
        })
    }
}

/// The shared `tool/call` type string (the types made once per call, direct or from a
/// program, skip [`type_arc`]'s search).
static TOOL_CALL_TYPE: std::sync::LazyLock<Arc<str>> =
    std::sync::LazyLock::new(|| type_arc(types::TOOL_CALL));
/// The shared `tool/result` type string.
static TOOL_RESULT_TYPE: std::sync::LazyLock<Arc<str>> =
    std::sync::LazyLock::new(|| type_arc(types::TOOL_RESULT));
/// The shared `tool/code-dispatch-start` type string.
static CODE_DISPATCH_START_TYPE: std::sync::LazyLock<Arc<str>> =
    std::sync::LazyLock::new(|| type_arc(types::CODE_DISPATCH_START));
/// The shared `tool/code-dispatch` type string.
static CODE_DISPATCH_TYPE: std::sync::LazyLock<Arc<str>> =
    std::sync::LazyLock::new(|| type_arc(types::CODE_DISPATCH));

/// The type string, shared for the types this crate knows (no allocation per event).
fn type_arc(event_type: &str) -> Arc<str> {
    use std::sync::LazyLock;
    static KNOWN: LazyLock<[Arc<str>; 13]> = LazyLock::new(|| {
        [
            types::TOOL_CALL,
            types::TOOL_RESULT,
            types::CODE_DISPATCH_START,
            types::CODE_DISPATCH,
            types::USER_MESSAGE,
            types::ASSISTANT_MESSAGE,
            types::TURN_START,
            types::TURN_END,
            types::STEP_START,
            types::STEP_END,
            types::APPROVAL_ASKED,
            types::APPROVAL_DECIDED,
            types::APPROVAL_POLICY,
        ]
        .map(Arc::from)
    });
    match KNOWN.iter().find(|t| ***t == *event_type) {
        Some(t) => t.clone(),
        None => Arc::from(event_type),
    }
}

/// The number of seqs a `-chunks` run stands for: the length of its `texts` (or, for tool-call
/// chunks, `args`) array, which must be non-empty.
pub(crate) fn chunk_span(event_type: &str, data: &Value) -> Result<u64, String> {
    let key = if event_type == "tool-call-chunks" {
        "args"
    } else if event_type == "text-chunks"
        || event_type == "reasoning-chunks"
        || data.get("texts").is_some_and(Value::is_array)
    {
        "texts"
    } else {
        "args"
    };
    match data.get(key) {
        Some(Value::Array(items)) if !items.is_empty() => Ok(items.len() as u64),
        _ => Err(format!(
            "{event_type} must carry a non-empty `{key}` array (it stands for one event per entry)"
        )),
    }
}

fn span_for(event_type: &str, data: &Value) -> u64 {
    if event_type.ends_with(types::CHUNKS_SUFFIX) {
        chunk_span(event_type, data).unwrap_or(0)
    } else {
        1
    }
}

mod build;
mod codec;
mod view;

pub use view::{EventKind, ToolCallView, ToolResultView};

impl Event {
    /// The event's type.
    pub fn event_type(&self) -> &str {
        &self.event_type
    }

    /// The shared type string.
    pub fn event_type_arc(&self) -> &Arc<str> {
        &self.event_type
    }

    /// The event's data, verbatim. For an event built by a typed constructor the tree is built
    /// from its text on the first call and shared afterwards.
    pub fn data(&self) -> &Json {
        self.data.json()
    }

    /// The facts kept beside the data's text.
    #[cfg(test)]
    pub(crate) fn data_facts(&self) -> &crate::payload::Facts {
        self.data.facts()
    }

    /// Nesting depth of the data, known without building its tree.
    pub(crate) fn data_depth(&self) -> usize {
        self.data.depth()
    }

    /// The surface operation, if any.
    pub fn surface_op(&self) -> Option<&SurfaceOp> {
        self.tail.surface_op()
    }

    /// `sourceEventSeqs`, if any.
    pub fn source_event_seqs(&self) -> Option<&[u64]> {
        self.source_event_seqs.as_ref().map(Seqs::as_slice)
    }

    /// How many seqs the event occupies: 1, or for a `-chunks` run the number of its
    /// `texts`/`args` entries (0 only for a malformed run, which no log may hold).
    pub fn seq_span(&self) -> u64 {
        self.tail.span()
    }

    /// Whether this is a compressed chunk run (`*-chunks`).
    pub fn is_chunk_run(&self) -> bool {
        self.event_type.ends_with(types::CHUNKS_SUFFIX)
    }

    /// Why the event cannot be appended, if it cannot (a chunk run without entries).
    pub(crate) fn shape_error(&self) -> Option<String> {
        if self.tail.span == 0 {
            chunk_span(&self.event_type, self.data().value()).err()
        } else {
            None
        }
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if let Some(v) = self.tail.verbatim() {
            return v.serialize(s);
        }
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", &*self.event_type)?;
        m.serialize_entry("data", self.data())?;
        if let Some(seqs) = self.source_event_seqs() {
            m.serialize_entry("sourceEventSeqs", seqs)?;
        }
        if let Some(op) = self.tail.surface_op() {
            m.serialize_entry("surfaceOp", op)?;
        }
        m.end()
    }
}

impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        self.event_type == other.event_type
            && self.tail.span == other.tail.span
            && self.tail.surface_op() == other.tail.surface_op()
            && self.source_event_seqs() == other.source_event_seqs()
            && self.tail.verbatim() == other.tail.verbatim()
            && (Arc::ptr_eq(&self.data, &other.data) || self.data() == other.data())
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("event_type", &self.event_type)
            .field("data", self.data())
            .field("surface_op", &self.tail.surface_op())
            .field("source_event_seqs", &self.source_event_seqs())
            .field("span", &self.tail.span)
            .field("verbatim", &self.tail.verbatim())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::{Event, SurfaceOp};
    use dsh_core::Json;
    use serde_json::json;

    #[test]
    fn an_event_is_four_pairs_of_words() {
        // A log holds its events by value: the type and the data (two shared handles of two
        // words each: a string, and the data's source behind its vtable), the seqs and the tail
        // (row 7 measures what a log holds).
        assert!(
            std::mem::size_of::<Event>() <= 64,
            "{}",
            std::mem::size_of::<Event>()
        );
    }

    #[test]
    fn the_packed_surface_op_reads_back_as_set() {
        let e = Event::other("x/y", Json::from_shallow(json!({})));
        assert_eq!(e.surface_op(), None);
        let e = e.with_surface_op(SurfaceOp::Append);
        assert_eq!(e.surface_op(), Some(&SurfaceOp::Append));
        let other = SurfaceOp::Other(Json::from_shallow(json!({"op": "replace"})));
        let e = e.with_surface_op(other.clone());
        assert_eq!(e.surface_op(), Some(&other));
        assert!(
            e.to_json_line()
                .ends_with(r#""surfaceOp":{"op":"replace"}}"#)
        );
    }
}
