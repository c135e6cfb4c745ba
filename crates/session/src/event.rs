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

use dsh_core::{Content, ContentBlock, ContextMessage, ErrorInfo, Json};

use crate::deep;
use crate::deferred::{
    CallFields, Deferred, DispatchFields, ResultFields, content_len, dispatch_depth,
    dispatch_writer, result_depth, write_call, write_result_rest,
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

/// One event of the log. Cheap to clone (every field is shared).
#[derive(Clone)]
pub struct Event {
    event_type: Arc<str>,
    data: Arc<Payload>,
    source_event_seqs: Option<Arc<[u64]>>,
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
    fn new(surface_op: Option<SurfaceOp>, span: u64, verbatim: Option<Json>) -> Tail {
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

    fn set_surface_op(&mut self, op: Option<SurfaceOp>) {
        self.append = matches!(op, Some(SurfaceOp::Append));
        let other = op.filter(|o| !matches!(o, SurfaceOp::Append));
        let verbatim = self.rare.take().and_then(|r| r.verbatim);
        self.rare = Rare::boxed(other, verbatim);
    }

    fn set_verbatim(&mut self, verbatim: Option<Json>) {
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

impl Event {
    /// An event built by a typed constructor: `data` is the compact text `w` wrote, `facts`
    /// what the session reads back from it on the append path. Typed events are never chunk
    /// runs, so they occupy one seq.
    fn typed(
        event_type: &str,
        w: TextWriter,
        facts: Facts,
        surface_op: Option<SurfaceOp>,
    ) -> Event {
        Event {
            event_type: type_arc(event_type),
            data: Arc::new(Payload::from_text(w.finish(), facts)),
            source_event_seqs: None,
            tail: Tail::new(surface_op, 1, None),
        }
    }

    /// Any event, its data kept verbatim (`approval/*`, `hook/*`, `permission/*`, chunk runs...).
    pub fn other(event_type: &str, data: Json) -> Event {
        let span = span_for(event_type, data.value());
        Event {
            event_type: type_arc(event_type),
            data: Arc::new(Payload::from_json(data)),
            source_event_seqs: None,
            tail: Tail::new(None, span, None),
        }
    }

    /// The same event with a surface operation.
    pub fn with_surface_op(mut self, op: SurfaceOp) -> Event {
        self.tail.set_surface_op(Some(op));
        self.tail.set_verbatim(None);
        self
    }

    /// The same event with `sourceEventSeqs`.
    pub fn with_source_event_seqs(mut self, seqs: impl Into<Arc<[u64]>>) -> Event {
        self.source_event_seqs = Some(seqs.into());
        self.tail.set_verbatim(None);
        self
    }

    /// `tool/call {turn, step, callId, name, arguments}`; `arguments` is the model's raw string,
    /// exactly as it came (empty or invalid JSON included). The strings are copied once, into
    /// the event's compact text.
    pub fn tool_call(
        turn: u32,
        step: u32,
        call_id: &str,
        name: &str,
        raw_arguments: &str,
    ) -> Event {
        let (text, [call_id, name, arguments]) =
            write_call(turn, step, call_id, name, raw_arguments);
        let facts = Facts {
            turn: Some(turn),
            step: Some(step),
            call_id: call_id.into(),
            name: name.into(),
            arguments: arguments.into(),
            ..Facts::known()
        };
        // A flat object of strings and numbers: depth 1, whatever the (escaped) arguments hold.
        let payload = Payload::from_text_at_depth(text.into_boxed_str(), 1, facts);
        Event {
            event_type: type_arc(types::TOOL_CALL),
            data: Arc::new(payload),
            source_event_seqs: None,
            tail: Tail::new(None, 1, None),
        }
    }

    /// [`Event::tool_call`] over strings the caller already shares: the event keeps them (no
    /// copy) and writes its text the first time it is needed.
    pub fn tool_call_shared(
        turn: u32,
        step: u32,
        call_id: Arc<str>,
        name: Arc<str>,
        raw_arguments: Arc<str>,
    ) -> Event {
        let facts = Facts {
            turn: Some(turn),
            step: Some(step),
            ..Facts::known()
        };
        let fields = Deferred::Call(CallFields {
            turn,
            step,
            call_id,
            name,
            arguments: raw_arguments,
        });
        // A flat object of strings and numbers: depth 1, whatever the (escaped) arguments hold.
        Event {
            event_type: type_arc(types::TOOL_CALL),
            data: Arc::new(Payload::deferred(fields, 1, facts)),
            source_event_seqs: None,
            tail: Tail::new(None, 1, None),
        }
    }

    /// `tool/result {turn, step, message, error?, meta?}` with `surfaceOp: "append"` and
    /// `sourceEventSeqs: [call_seq]` (spec F5, L2). The message gets a fresh id. The content is
    /// copied once, into the event's compact text.
    #[allow(clippy::too_many_arguments)]
    pub fn tool_result(
        turn: u32,
        step: u32,
        call_id: &str,
        call_seq: u64,
        content: &[ContentBlock],
        is_error: bool,
        error: Option<&ErrorInfo>,
        meta: Option<&Json>,
    ) -> Event {
        let facts = Facts {
            turn: Some(turn),
            step: Some(step),
            ..Facts::known()
        };
        let mut w = TextWriter::with_capacity(256 + 2 * call_id.len() + content_len(content));
        w.u32("turn", turn);
        w.u32("step", step);
        Event::finish_result(w, facts, call_id, call_seq, content, is_error, error, meta)
    }

    /// [`Event::tool_result`] over a call id and content the caller already shares: the event
    /// keeps them (no copy) and writes its text the first time it is needed.
    #[allow(clippy::too_many_arguments)]
    pub fn tool_result_shared(
        turn: u32,
        step: u32,
        call_id: Arc<str>,
        call_seq: u64,
        content: Content,
        is_error: bool,
        error: Option<&ErrorInfo>,
        meta: Option<&Json>,
    ) -> Event {
        let facts = Facts {
            turn: Some(turn),
            step: Some(step),
            ..Facts::known()
        };
        let depth = result_depth(&content, meta);
        let fields = Deferred::Result(ResultFields {
            turn,
            step,
            call_id,
            content,
            is_error,
            error: error.map(|e| Box::new(e.clone())),
            meta: meta.cloned(),
            id: dsh_core::context::fresh_message_number(),
        });
        Event::result_event(Payload::deferred(fields, depth, facts), call_seq)
    }

    /// [`Event::tool_result`] with `turn` and `step` given as JSON values (crash repair copies
    /// them from the call, whatever they are).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tool_result_at(
        turn: Value,
        step: Value,
        call_id: &str,
        call_seq: u64,
        content: &[ContentBlock],
        is_error: bool,
        error: Option<&ErrorInfo>,
        meta: Option<&Json>,
    ) -> Event {
        let mut w = TextWriter::with_capacity(256 + 2 * call_id.len() + content_len(content));
        w.value("turn", &turn);
        w.value("step", &step);
        let facts = Facts::unknown();
        Event::finish_result(w, facts, call_id, call_seq, content, is_error, error, meta)
    }

    /// Writes the rest of a `tool/result` after its `turn` and `step` and builds the event.
    #[allow(clippy::too_many_arguments)]
    fn finish_result(
        mut w: TextWriter,
        mut facts: Facts,
        call_id: &str,
        call_seq: u64,
        content: &[ContentBlock],
        is_error: bool,
        error: Option<&ErrorInfo>,
        meta: Option<&Json>,
    ) -> Event {
        let id = dsh_core::context::fresh_message_id_ascii();
        facts.message = write_result_rest(&mut w, call_id, content, is_error, error, meta, &id);
        let depth = result_depth(content, meta);
        let payload = Payload::from_text_at_depth(w.finish(), depth, facts);
        Event::result_event(payload, call_seq)
    }

    fn result_event(payload: Payload, call_seq: u64) -> Event {
        Event {
            event_type: type_arc(types::TOOL_RESULT),
            data: Arc::new(payload),
            source_event_seqs: None,
            tail: Tail::new(None, 1, None),
        }
        .with_source_event_seqs([call_seq])
        .with_surface_op(SurfaceOp::Append)
    }

    /// `user/message {content, source, role, id}` with `surfaceOp: "append"`.
    pub fn user_message(ctx: &ContextMessage) -> Event {
        let mut w = TextWriter::with_capacity(128);
        w.value("content", &*ctx.content);
        w.value("source", &ctx.source);
        w.str("role", &ctx.role);
        w.str("id", &ctx.id);
        Event::typed(
            types::USER_MESSAGE,
            w,
            Facts::known(),
            Some(SurfaceOp::Append),
        )
    }

    /// `turn/start {turn}`.
    pub fn turn_start(turn: u32) -> Event {
        let mut w = TextWriter::with_capacity(16);
        w.u32("turn", turn);
        let facts = Facts {
            turn: Some(turn),
            ..Facts::known()
        };
        Event::typed(types::TURN_START, w, facts, None)
    }

    /// `turn/end {turn, reason}`, e.g. reason `{kind: "completed"}`.
    pub fn turn_end(turn: u32, reason: Json) -> Event {
        let mut w = TextWriter::with_capacity(48);
        w.u32("turn", turn);
        w.value("reason", &reason);
        let facts = Facts {
            turn: Some(turn),
            ..Facts::known()
        };
        Event::typed(types::TURN_END, w, facts, None)
    }

    /// `step/start {turn, step}`.
    pub fn step_start(turn: u32, step: u32) -> Event {
        Event::turn_step(types::STEP_START, turn, step)
    }

    /// `step/end {turn, step}`.
    pub fn step_end(turn: u32, step: u32) -> Event {
        Event::turn_step(types::STEP_END, turn, step)
    }

    fn turn_step(event_type: &str, turn: u32, step: u32) -> Event {
        let mut w = TextWriter::with_capacity(24);
        w.u32("turn", turn);
        w.u32("step", step);
        let facts = Facts {
            turn: Some(turn),
            step: Some(step),
            ..Facts::known()
        };
        Event::typed(event_type, w, facts, None)
    }

    /// `assistant/message {turn, step, message}` with `surfaceOp: "append"`; `message` is
    /// `{role: "assistant", content: [...], ...}`.
    pub fn assistant_message(turn: u32, step: u32, message: Json) -> Event {
        Event::assistant_message_with_usage(turn, step, message, None)
    }

    /// `assistant/message {turn, step, message, usage?}` with `surfaceOp: "append"`.
    pub fn assistant_message_with_usage(
        turn: u32,
        step: u32,
        message: Json,
        usage: Option<&Json>,
    ) -> Event {
        let mut w = TextWriter::with_capacity(128);
        w.u32("turn", turn);
        w.u32("step", step);
        let (message_start, message_end) = w.value_at("message", &message);
        if let Some(usage) = usage {
            w.value("usage", usage);
        }
        let facts = Facts {
            turn: Some(turn),
            step: Some(step),
            message: SubText::new(message_start, message_end, message.depth()),
            ..Facts::known()
        };
        Event::typed(types::ASSISTANT_MESSAGE, w, facts, Some(SurfaceOp::Append))
    }

    /// `tool/code-dispatch-start {rootCallId, parentCallId, subCallId, name, arguments}` (log-only).
    pub fn code_dispatch_start(
        root_call_id: &str,
        parent_call_id: &str,
        sub_call_id: &str,
        name: &str,
        arguments: &Json,
    ) -> Event {
        let w = dispatch_writer(
            root_call_id,
            parent_call_id,
            sub_call_id,
            name,
            arguments,
            None,
        );
        Event::typed(types::CODE_DISPATCH_START, w, Facts::unknown(), None)
    }

    /// `tool/code-dispatch {rootCallId, parentCallId, subCallId, name, arguments, isError,
    /// content}` (log-only).
    pub fn code_dispatch(
        root_call_id: &str,
        parent_call_id: &str,
        sub_call_id: &str,
        name: &str,
        arguments: &Json,
        is_error: bool,
        content: &[ContentBlock],
    ) -> Event {
        let w = dispatch_writer(
            root_call_id,
            parent_call_id,
            sub_call_id,
            name,
            arguments,
            Some((is_error, content)),
        );
        Event::typed(types::CODE_DISPATCH, w, Facts::unknown(), None)
    }

    /// [`Event::code_dispatch_start`] over ids, name and arguments the caller already shares:
    /// the event keeps them (no copy) and writes its text the first time it is needed.
    pub fn code_dispatch_start_shared(
        root_call_id: Arc<str>,
        parent_call_id: Arc<str>,
        sub_call_id: Arc<str>,
        name: Arc<str>,
        arguments: Json,
    ) -> Event {
        Event::dispatch_event(
            types::CODE_DISPATCH_START,
            DispatchFields {
                root_call_id,
                parent_call_id,
                sub_call_id,
                name,
                arguments,
                settled: None,
            },
        )
    }

    /// [`Event::code_dispatch`] over ids, name, arguments and content the caller already
    /// shares: the event keeps them (no copy) and writes its text the first time it is needed.
    pub fn code_dispatch_shared(
        root_call_id: Arc<str>,
        parent_call_id: Arc<str>,
        sub_call_id: Arc<str>,
        name: Arc<str>,
        arguments: Json,
        is_error: bool,
        content: Content,
    ) -> Event {
        Event::dispatch_event(
            types::CODE_DISPATCH,
            DispatchFields {
                root_call_id,
                parent_call_id,
                sub_call_id,
                name,
                arguments,
                settled: Some((is_error, content)),
            },
        )
    }

    fn dispatch_event(event_type: &str, fields: DispatchFields) -> Event {
        let depth = dispatch_depth(
            &fields.arguments,
            fields.settled.as_ref().map(|(_, c)| &c[..]),
        );
        Event {
            event_type: type_arc(event_type),
            data: Arc::new(Payload::deferred(
                Deferred::Dispatch(fields),
                depth,
                Facts::unknown(),
            )),
            source_event_seqs: None,
            tail: Tail::new(None, 1, None),
        }
    }

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
        self.source_event_seqs.as_deref()
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

    /// The event as one compact JSON line (without the newline).
    pub fn to_json_line(&self) -> String {
        let mut out = Vec::new();
        self.write_line(&mut out);
        out.pop();
        String::from_utf8(out).unwrap_or_default()
    }

    /// Appends the event's JSON text and a newline to `out`.
    pub(crate) fn write_line(&self, out: &mut Vec<u8>) {
        if self.tail.verbatim().is_none()
            && let Some(text) = self.data.text_or_written()
        {
            self.write_spliced(&text, out);
            out.push(b'\n');
            return;
        }
        // Serializing into a Vec cannot fail for these types (string keys, finite numbers).
        let depth = self.data.depth() + 2;
        let written = deep::with_stack(depth, || serde_json::to_writer(&mut *out, self));
        if written.is_err() {
            out.extend_from_slice(b"null");
        }
        out.push(b'\n');
    }

    /// Writes `{type, data, sourceEventSeqs?, surfaceOp?}` with `data` copied from its text:
    /// the same bytes serializing the tree would give.
    fn write_spliced(&self, text: &str, out: &mut Vec<u8>) {
        let start = out.len();
        out.reserve(text.len() + self.event_type.len() + 64);
        out.extend_from_slice(b"{\"type\":");
        let mut ok = serde_json::to_writer(&mut *out, &*self.event_type).is_ok();
        out.extend_from_slice(b",\"data\":");
        out.extend_from_slice(text.as_bytes());
        if let Some(seqs) = &self.source_event_seqs {
            out.extend_from_slice(b",\"sourceEventSeqs\":");
            ok &= serde_json::to_writer(&mut *out, &**seqs).is_ok();
        }
        if let Some(op) = self.tail.surface_op() {
            out.extend_from_slice(b",\"surfaceOp\":");
            ok &= serde_json::to_writer(&mut *out, op).is_ok();
        }
        out.push(b'}');
        if !ok {
            out.truncate(start);
            out.extend_from_slice(b"null");
        }
    }

    /// Reads one event from a parsed line value. Unknown types are kept verbatim; a line whose
    /// top-level keys are not `type, data, sourceEventSeqs?, surfaceOp?` in that order keeps its
    /// whole value for writing back.
    ///
    /// Must run on a stack sized for the value (see [`deep::parse_with`]).
    pub(crate) fn from_value(value: Value) -> Result<Event, String> {
        let verbatim = match value.as_object() {
            Some(map) if is_canonical_layout(map) => None,
            Some(_) => Some(value.clone()),
            None => return Err("an event line must be a JSON object".to_owned()),
        };
        let Value::Object(mut map) = value else {
            return Err("an event line must be a JSON object".to_owned());
        };
        let event_type = match map.get("type") {
            Some(Value::String(t)) => type_arc(t),
            Some(_) => return Err("event `type` must be a string".to_owned()),
            None => return Err("event has no `type`".to_owned()),
        };
        let Some(data) = map.shift_remove("data") else {
            return Err(format!("{event_type} event has no `data`"));
        };
        let source_event_seqs = match map.shift_remove("sourceEventSeqs") {
            None => None,
            Some(Value::Array(items)) => {
                let mut seqs = Vec::with_capacity(items.len());
                for item in &items {
                    match item.as_u64() {
                        Some(s) => seqs.push(s),
                        None => {
                            return Err(
                                "`sourceEventSeqs` must hold non-negative integers".to_owned()
                            );
                        }
                    }
                }
                Some(Arc::from(seqs))
            }
            Some(_) => return Err("`sourceEventSeqs` must be an array".to_owned()),
        };
        let surface_op = map.shift_remove("surfaceOp").map(SurfaceOp::from_value);
        let span = if event_type.ends_with(types::CHUNKS_SUFFIX) {
            chunk_span(&event_type, &data)?
        } else {
            1
        };
        let data = Json::new(data).map_err(|e| e.to_string())?;
        let verbatim = verbatim.map(Json::from_shallow);
        Ok(Event {
            event_type,
            data: Arc::new(Payload::from_json(data)),
            source_event_seqs,
            tail: Tail::new(surface_op, span, verbatim),
        })
    }

    /// Parses one event from its JSON line.
    pub fn from_json_line(line: &str) -> Result<Event, crate::error::LineError> {
        Event::read_line(line, &mut Scratch::default()).map_err(crate::error::LineError)
    }

    /// [`Event::from_json_line`] with the scan's buffers reused across lines. A line in the
    /// canonical form keeps its `data` as text (the tree is built on first use, like a typed
    /// event's); any other line is parsed into a tree and read from it.
    pub(crate) fn read_line(line: &str, scratch: &mut Scratch) -> Result<Event, String> {
        if let Some(event) = scan_line(line, scratch).and_then(Event::from_scanned) {
            return Ok(event);
        }
        deep::parse_with(line, Event::from_value)
    }

    /// The event of a line the scan accepted: the same one [`Event::from_value`] reads from
    /// its tree (`None` only if the surface operation does not parse, which the scan rules out).
    fn from_scanned(line: Scanned<'_>) -> Option<Event> {
        let surface_op = match line.surface_op {
            None => None,
            Some("\"append\"") => Some(SurfaceOp::Append),
            Some(text) => Some(SurfaceOp::Other(Json::parse(text).ok()?)),
        };
        Some(Event {
            event_type: type_arc(line.event_type),
            data: Arc::new(Payload::from_text_at_depth(
                Box::from(line.data),
                line.data_depth,
                line.facts,
            )),
            source_event_seqs: line.source_event_seqs.map(Arc::from),
            tail: Tail::new(surface_op, 1, None),
        })
    }

    /// Whether the data is still text only (its tree not built).
    #[cfg(test)]
    pub(crate) fn keeps_text(&self) -> bool {
        self.data.tree().is_none() && self.data.text().is_some()
    }

    /// `data.message` as a value of its own, parsed from the data's text when the tree has not
    /// been built and the facts know where it sits, or from text written from the typed fields
    /// (`None`: read it from the tree).
    pub(crate) fn message_from_text(&self) -> Option<Json> {
        if self.data.tree().is_some() {
            return None;
        }
        if let Some(fields) = self.data.fields() {
            // Written for the occasion and not kept (see `deferred.rs`).
            let (text, at) = fields.write_with_message();
            let at = at?;
            let text = text.get(at.start as usize..at.end as usize)?;
            return Json::parse_at_depth(text, at.depth as usize).ok();
        }
        let at = self.data.facts().message?;
        let text = self.data.text()?.get(at.start as usize..at.end as usize)?;
        Json::parse_at_depth(text, at.depth as usize).ok()
    }

    /// Reads `data.<key>` as an unsigned integer (`turn` and `step` of a typed event without
    /// building its tree).
    pub(crate) fn data_u64(&self, key: &str) -> Option<u64> {
        let facts = self.data.facts();
        if facts.known {
            match key {
                "turn" => return facts.turn.map(u64::from),
                "step" => return facts.step.map(u64::from),
                _ => {}
            }
        }
        self.data().value().get(key).and_then(Value::as_u64)
    }

    /// Reads `data.<key>` as a string (`callId`, `name` and `arguments` of a typed event without
    /// building its tree, when their text needed no escaping).
    pub(crate) fn data_str(&self, key: &str) -> Option<&str> {
        if let Some(field) = self.data.fields().and_then(|f| f.str_field(key)) {
            return field;
        }
        let facts = self.data.facts();
        if facts.known {
            let fact = match key {
                "callId" => facts.call_id,
                "name" => facts.name,
                "arguments" => facts.arguments,
                _ => StrFact::Parse.into(),
            };
            match fact.get() {
                StrFact::Absent => return None,
                StrFact::At(start, end) => {
                    if let Some(s) = self
                        .data
                        .text()
                        .and_then(|t| t.get(start as usize..end as usize))
                    {
                        return Some(s);
                    }
                }
                StrFact::Parse => {}
            }
        }
        self.data().value().get(key).and_then(Value::as_str)
    }

    /// A typed view of the event's payload (the Rust analogue of the reference's narrowing by
    /// `type`).
    pub fn kind(&self) -> EventKind<'_> {
        match &*self.event_type {
            types::TOOL_CALL => match self.as_tool_call() {
                Some(v) => EventKind::ToolCall(v),
                None => EventKind::Malformed,
            },
            types::TOOL_RESULT => match self.as_tool_result() {
                Some(v) => EventKind::ToolResult(v),
                None => EventKind::Malformed,
            },
            types::CODE_DISPATCH_START => EventKind::CodeDispatchStart,
            types::CODE_DISPATCH => EventKind::CodeDispatch,
            types::USER_MESSAGE => EventKind::UserMessage,
            types::ASSISTANT_MESSAGE => EventKind::AssistantMessage,
            types::TURN_START => EventKind::TurnStart {
                turn: self.data_u64("turn"),
            },
            types::TURN_END => EventKind::TurnEnd {
                turn: self.data_u64("turn"),
            },
            types::STEP_START => EventKind::StepStart {
                turn: self.data_u64("turn"),
                step: self.data_u64("step"),
            },
            types::STEP_END => EventKind::StepEnd {
                turn: self.data_u64("turn"),
                step: self.data_u64("step"),
            },
            t if t.ends_with(types::CHUNKS_SUFFIX) => EventKind::ChunkRun {
                count: self.tail.span(),
            },
            _ => EventKind::Other,
        }
    }

    /// The `tool/call` payload, if this is a well-formed `tool/call`.
    pub fn as_tool_call(&self) -> Option<ToolCallView<'_>> {
        if &*self.event_type != types::TOOL_CALL {
            return None;
        }
        Some(ToolCallView {
            turn: self.data_u64("turn"),
            step: self.data_u64("step"),
            call_id: self.data_str("callId")?,
            name: self.data_str("name")?,
            arguments: self.data_str("arguments")?,
        })
    }

    /// The `tool/result` payload, if this is a `tool/result` naming its call, in either the
    /// current shape (`message`) or the older flat shape (`callId, content, isError`).
    pub fn as_tool_result(&self) -> Option<ToolResultView<'_>> {
        if &*self.event_type != types::TOOL_RESULT {
            return None;
        }
        let data = self.data().value();
        let (call_id, block) = match data.get("message") {
            Some(message) => {
                let block = message
                    .get("content")
                    .and_then(Value::as_array)
                    .and_then(|c| {
                        c.iter()
                            .find(|b| b.get("type").and_then(Value::as_str) == Some("tool-result"))
                    });
                let from_source = message
                    .get("source")
                    .and_then(|s| s.get("callId"))
                    .and_then(Value::as_str);
                let from_block = block
                    .and_then(|b| b.get("toolCallId"))
                    .and_then(Value::as_str);
                (from_source.or(from_block)?, block)
            }
            None => (data.get("callId").and_then(Value::as_str)?, Some(data)),
        };
        Some(ToolResultView {
            turn: self.data_u64("turn"),
            step: self.data_u64("step"),
            call_id,
            is_error: block
                .and_then(|b| b.get("isError"))
                .and_then(Value::as_bool),
            content: block.and_then(|b| b.get("content")),
            error: data.get("error"),
            meta: data.get("meta"),
            call_seq: self.source_event_seqs().and_then(|s| s.first().copied()),
        })
    }
}

fn is_canonical_layout(map: &Map<String, Value>) -> bool {
    let mut keys = map.keys().map(String::as_str);
    if keys.next() != Some("type") || keys.next() != Some("data") {
        return false;
    }
    let mut rest: Vec<&str> = keys.collect();
    if rest.first() == Some(&"sourceEventSeqs") {
        rest.remove(0);
    }
    if rest.first() == Some(&"surfaceOp") {
        rest.remove(0);
    }
    rest.is_empty()
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if let Some(v) = self.tail.verbatim() {
            return v.serialize(s);
        }
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", &*self.event_type)?;
        m.serialize_entry("data", self.data())?;
        if let Some(seqs) = &self.source_event_seqs {
            m.serialize_entry("sourceEventSeqs", &**seqs)?;
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
            && self.source_event_seqs == other.source_event_seqs
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
            .field("source_event_seqs", &self.source_event_seqs)
            .field("span", &self.tail.span)
            .field("verbatim", &self.tail.verbatim())
            .finish()
    }
}

/// A typed view of an event's payload.
#[derive(Clone, Debug, PartialEq)]
pub enum EventKind<'a> {
    /// `tool/call`.
    ToolCall(ToolCallView<'a>),
    /// `tool/result`.
    ToolResult(ToolResultView<'a>),
    /// `tool/code-dispatch-start`.
    CodeDispatchStart,
    /// `tool/code-dispatch`.
    CodeDispatch,
    /// `user/message`.
    UserMessage,
    /// `assistant/message`.
    AssistantMessage,
    /// `turn/start`.
    TurnStart {
        /// `data.turn`.
        turn: Option<u64>,
    },
    /// `turn/end`.
    TurnEnd {
        /// `data.turn`.
        turn: Option<u64>,
    },
    /// `step/start`.
    StepStart {
        /// `data.turn`.
        turn: Option<u64>,
        /// `data.step`.
        step: Option<u64>,
    },
    /// `step/end`.
    StepEnd {
        /// `data.turn`.
        turn: Option<u64>,
        /// `data.step`.
        step: Option<u64>,
    },
    /// A `*-chunks` run standing for `count` chunk events.
    ChunkRun {
        /// Seqs the run occupies.
        count: u64,
    },
    /// A `tool/call` or `tool/result` missing the fields that identify it.
    Malformed,
    /// Any other type, kept verbatim.
    Other,
}

/// The payload of a `tool/call`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolCallView<'a> {
    /// `turn`.
    pub turn: Option<u64>,
    /// `step`.
    pub step: Option<u64>,
    /// The model's call id.
    pub call_id: &'a str,
    /// The tool name.
    pub name: &'a str,
    /// The raw argument string, exactly as the model sent it.
    pub arguments: &'a str,
}

/// The payload of a `tool/result`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ToolResultView<'a> {
    /// `turn`.
    pub turn: Option<u64>,
    /// `step`.
    pub step: Option<u64>,
    /// The call id the result answers.
    pub call_id: &'a str,
    /// The tool-result block's `isError`.
    pub is_error: Option<bool>,
    /// The tool-result block's content blocks.
    pub content: Option<&'a Value>,
    /// The event's `error {name, code}`, when the failure was typed.
    pub error: Option<&'a Value>,
    /// The event's `meta`, when the tool gave one.
    pub meta: Option<&'a Value>,
    /// `sourceEventSeqs[0]`: the seq of the matching `tool/call`.
    pub call_seq: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::{Event, SurfaceOp};
    use dsh_core::Json;
    use serde_json::json;

    #[test]
    fn an_event_fits_the_smaller_malloc_size_class() {
        // 56 bytes behind the Arc's two counts is 72: an 80-byte chunk, not 96 (row 7).
        assert!(
            std::mem::size_of::<Event>() <= 56,
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
