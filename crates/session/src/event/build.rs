//! The typed constructors of [`Event`]: every event shape this crate writes, in the reference
//! shapes, keeping `data` as compact text (or as the caller's shared fields).

use super::*;
use crate::DataError;

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
            data: Payload::from_text(w.finish(), facts),
            source_event_seqs: None,
            tail: Tail::new(surface_op, 1, None),
        }
    }

    /// An event of type `event_type` whose `data` is the object `data` wrote: kept as that
    /// text, which is already canonical (see [`crate::DataWriter`]), so nothing parses or scans
    /// it; the line reads back to the same event and writes back byte for byte. Refused when
    /// the writer was misused or the type is a chunk run. The type is shared as given (a
    /// caller writing many events of one type keeps one `Arc`).
    pub fn from_data(
        event_type: Arc<str>,
        data: crate::DataWriter<'_>,
    ) -> Result<Event, DataError> {
        if event_type.ends_with(types::CHUNKS_SUFFIX) {
            return Err(DataError::ChunkRun(event_type.to_string()));
        }
        let (text, depth, facts) = data.finish()?;
        Ok(Event {
            event_type,
            data: Payload::from_text_at_depth(text, depth, facts),
            source_event_seqs: None,
            tail: Tail::new(None, 1, None),
        })
    }

    /// An event of type `event_type` whose `data` is kept as the caller's typed fields and
    /// written (through a [`crate::DataWriter`]) only when needed: a durable log's line, as the
    /// event is appended; a reader of the tree; an export (an in-memory log never writes it). The text is the one
    /// [`Event::from_data`] would keep for the same writer, byte for byte. Refused when the
    /// type is a chunk run. The fields are kept inline in the event's shared data (a boxed
    /// `dyn OnDemandData` is accepted as well).
    pub fn on_demand(
        event_type: Arc<str>,
        data: impl crate::OnDemandData,
    ) -> Result<Event, DataError> {
        if event_type.ends_with(types::CHUNKS_SUFFIX) {
            return Err(DataError::ChunkRun(event_type.to_string()));
        }
        Ok(Event {
            event_type,
            data: Payload::on_demand(data),
            source_event_seqs: None,
            tail: Tail::new(None, 1, None),
        })
    }

    /// Any event, its data kept verbatim (`approval/*`, `hook/*`, `permission/*`, chunk runs...).
    pub fn other(event_type: &str, data: Json) -> Event {
        let span = span_for(event_type, data.value());
        Event {
            event_type: type_arc(event_type),
            data: Payload::from_json(data),
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
        self.source_event_seqs = Some(Seqs::from(seqs.into()));
        self.tail.set_verbatim(None);
        self
    }

    /// `tool/call {turn, step, callId, name, arguments}`; `arguments` is the model's raw string,
    /// exactly as it came (empty or invalid JSON included). The event keeps the strings it is
    /// given (an `Arc<str>` is shared, a `&str` copied once) and writes its text the first time
    /// it is needed.
    pub fn tool_call(
        turn: u32,
        step: u32,
        call_id: impl Into<Arc<str>>,
        name: impl Into<Arc<str>>,
        raw_arguments: impl Into<Arc<str>>,
    ) -> Event {
        let (call_id, name, raw_arguments) = (call_id.into(), name.into(), raw_arguments.into());
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
            event_type: TOOL_CALL_TYPE.clone(),
            data: Payload::deferred(fields, 1, facts),
            source_event_seqs: None,
            tail: Tail::plain(false, 1),
        }
    }

    /// `tool/result {turn, step, message, error?, meta?}` with `surfaceOp: "append"` and
    /// `sourceEventSeqs: [call_seq]` (spec F5, L2). The message gets a fresh id. The event keeps
    /// the call id and content it is given (shared when they already are) and writes its text
    /// the first time it is needed.
    #[allow(clippy::too_many_arguments)]
    pub fn tool_result(
        turn: u32,
        step: u32,
        call_id: impl Into<Arc<str>>,
        call_seq: u64,
        content: impl Into<Content>,
        is_error: bool,
        error: Option<&ErrorInfo>,
        meta: Option<&Json>,
    ) -> Event {
        let place = ResultPlace::Step { turn, step };
        let fields = ResultFields {
            place,
            call_id: call_id.into(),
            content: content.into(),
            is_error,
            error: error.map(|e| Box::new(e.clone())),
            meta: meta.cloned(),
            id: dsh_core::context::fresh_message_number(),
        };
        Event::result_from(fields, call_seq)
    }

    /// The one builder of `tool/result` events: [`Event::tool_result`] for a live call, crash
    /// repair for a call found in a log (its `turn` and `step` copied as they were).
    pub(crate) fn result_from(fields: ResultFields, call_seq: u64) -> Event {
        let facts = match fields.place {
            ResultPlace::Step { turn, step } => Facts {
                turn: Some(turn),
                step: Some(step),
                ..Facts::known()
            },
            ResultPlace::Copied { .. } => Facts::unknown(),
        };
        let depth = result_depth(&fields.content, fields.meta.as_ref());
        let payload = Payload::deferred(Deferred::Result(fields), depth, facts);
        Event::result_event(payload, call_seq)
    }

    /// `sourceEventSeqs: [call_seq]` is kept without an allocation.
    fn result_event(payload: Arc<Payload>, call_seq: u64) -> Event {
        Event {
            event_type: TOOL_RESULT_TYPE.clone(),
            data: payload,
            source_event_seqs: Some(Seqs::One(call_seq)),
            tail: Tail::plain(true, 1),
        }
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

    /// `tool/code-dispatch-start {rootCallId, parentCallId, subCallId, name, arguments}`
    /// (log-only). The event keeps the ids, name and arguments it is given (shared when they
    /// already are) and writes its text the first time it is needed.
    pub fn code_dispatch_start(
        root_call_id: impl Into<Arc<str>>,
        parent_call_id: impl Into<Arc<str>>,
        sub_call_id: impl Into<Arc<str>>,
        name: impl Into<Arc<str>>,
        arguments: Json,
    ) -> Event {
        Event::dispatch_event(
            &CODE_DISPATCH_START_TYPE,
            DispatchFields {
                root_call_id: root_call_id.into(),
                parent_call_id: parent_call_id.into(),
                sub_call_id: sub_call_id.into(),
                name: name.into(),
                arguments,
                settled: None,
            },
        )
    }

    /// `tool/code-dispatch {rootCallId, parentCallId, subCallId, name, arguments, isError,
    /// content}` (log-only), keeping what it is given as [`Event::code_dispatch_start`] does.
    pub fn code_dispatch(
        root_call_id: impl Into<Arc<str>>,
        parent_call_id: impl Into<Arc<str>>,
        sub_call_id: impl Into<Arc<str>>,
        name: impl Into<Arc<str>>,
        arguments: Json,
        is_error: bool,
        content: impl Into<Content>,
    ) -> Event {
        Event::dispatch_event(
            &CODE_DISPATCH_TYPE,
            DispatchFields {
                root_call_id: root_call_id.into(),
                parent_call_id: parent_call_id.into(),
                sub_call_id: sub_call_id.into(),
                name: name.into(),
                arguments,
                settled: Some((is_error, content.into())),
            },
        )
    }

    fn dispatch_event(event_type: &Arc<str>, fields: DispatchFields) -> Event {
        let depth = dispatch_depth(
            &fields.arguments,
            fields.settled.as_ref().map(|(_, c)| &c[..]),
        );
        Event {
            event_type: event_type.clone(),
            data: Payload::deferred(Deferred::Dispatch(fields), depth, Facts::unknown()),
            source_event_seqs: None,
            tail: Tail::new(None, 1, None),
        }
    }
}
