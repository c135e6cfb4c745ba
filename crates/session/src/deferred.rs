//! The data of `tool/call`, `tool/result` and `tool/code-dispatch*` events kept as the typed
//! fields they are written from: the arguments, ids and content are shared with the caller (no
//! copy), and the compact JSON text is written whenever someone needs it (a durable store's line,
//! a reader of the tree) and not kept, so a log does not hold its data twice.
//!
//! Guarantees: the text is a pure function of the fields, which are immutable, so it is the same
//! whenever it is written, byte for byte the text the eager writer would have produced (one
//! writer serves both); the message id is drawn when the event is built, not when it is written.

use std::sync::Arc;

use dsh_core::{Content, ContentBlock, ErrorInfo, Json};

use crate::payload::{StrFact, SubText, TextWriter};

/// The fields of a `tool/call`: `{turn, step, callId, name, arguments}`.
pub(crate) struct CallFields {
    pub turn: u32,
    pub step: u32,
    pub call_id: Arc<str>,
    pub name: Arc<str>,
    /// The model's raw argument string, verbatim.
    pub arguments: Arc<str>,
}

/// Where a `tool/result` sits: the `turn` and `step` it is written with.
pub(crate) enum ResultPlace {
    /// The step of a live call.
    Step {
        /// `turn`.
        turn: u32,
        /// `step`.
        step: u32,
    },
    /// Copied from a call found in a log (crash repair), whatever it held: absent is `null`.
    Copied {
        /// The call's `turn`, if it was an unsigned integer.
        turn: Option<u64>,
        /// The call's `step`, likewise.
        step: Option<u64>,
    },
}

/// The fields of a `tool/result`: `{turn, step, message, error?, meta?}`.
pub(crate) struct ResultFields {
    pub place: ResultPlace,
    pub call_id: Arc<str>,
    pub content: Content,
    pub is_error: bool,
    /// Boxed: most results have none, and the fields stay small.
    pub error: Option<Box<ErrorInfo>>,
    pub meta: Option<Json>,
    /// The message number drawn when the event was built; its id is written with the text.
    pub id: u64,
}

/// The fields of a `tool/code-dispatch-start` (`{rootCallId, parentCallId, subCallId, name,
/// arguments}`) or, with `settled`, of a `tool/code-dispatch` (`..., isError, content}`).
pub(crate) struct DispatchFields {
    pub root_call_id: Arc<str>,
    pub parent_call_id: Arc<str>,
    pub sub_call_id: Arc<str>,
    pub name: Arc<str>,
    pub arguments: Json,
    /// `isError` and `content` of a settled sub-call.
    pub settled: Option<(bool, Content)>,
}

/// Typed fields whose text is written on demand.
pub(crate) enum Deferred {
    /// A `tool/call`.
    Call(CallFields),
    /// A `tool/result`.
    Result(ResultFields),
    /// A `tool/code-dispatch-start` or `tool/code-dispatch`.
    Dispatch(DispatchFields),
}

impl Deferred {
    /// The compact JSON text of the data.
    pub fn write(&self) -> String {
        self.write_with_message().0
    }

    /// The compact JSON text of the data, and where its `message` sits (results only).
    pub fn write_with_message(&self) -> (String, Option<SubText>) {
        match self {
            Deferred::Call(c) => (
                write_call(c.turn, c.step, &c.call_id, &c.name, &c.arguments).0,
                None,
            ),
            Deferred::Result(r) => {
                let mut w =
                    TextWriter::with_capacity(256 + 2 * r.call_id.len() + content_len(&r.content));
                match r.place {
                    ResultPlace::Step { turn, step } => {
                        w.u32("turn", turn);
                        w.u32("step", step);
                    }
                    ResultPlace::Copied { turn, step } => {
                        w.value("turn", &turn);
                        w.value("step", &step);
                    }
                }
                let message = write_result_rest(
                    &mut w,
                    &r.call_id,
                    &r.content,
                    r.is_error,
                    r.error.as_deref(),
                    r.meta.as_ref(),
                    &dsh_core::context::message_id_ascii(r.id),
                );
                (w.finish_string(), message)
            }
            Deferred::Dispatch(d) => (
                dispatch_writer(
                    &d.root_call_id,
                    &d.parent_call_id,
                    &d.sub_call_id,
                    &d.name,
                    &d.arguments,
                    d.settled.as_ref().map(|(e, c)| (*e, &c[..])),
                )
                .finish_string(),
                None,
            ),
        }
    }

    /// A top-level string field the fields hold: `Some(value)` when this kind of data has the
    /// field (`value` is `None` when it is absent), `None` when the fields cannot say.
    pub fn str_field(&self, key: &str) -> Option<Option<&str>> {
        match (self, key) {
            (Deferred::Call(c), "callId") => Some(Some(&c.call_id)),
            (Deferred::Call(c), "name") => Some(Some(&c.name)),
            (Deferred::Call(c), "arguments") => Some(Some(&c.arguments)),
            (Deferred::Result(_), "callId" | "name" | "arguments") => Some(None),
            (Deferred::Dispatch(d), "subCallId") => Some(Some(&d.sub_call_id)),
            // As for their text-backed form, the tree answers.
            (Deferred::Dispatch(_), _) => None,
            _ => None,
        }
    }
}

/// Writes a `tool/call`'s data; returns the text and where `callId`, `name` and `arguments`
/// sit in it (when they needed no escaping).
pub(crate) fn write_call(
    turn: u32,
    step: u32,
    call_id: &str,
    name: &str,
    arguments: &str,
) -> (String, [StrFact; 3]) {
    let mut w = TextWriter::with_capacity(
        64 + call_id.len() + name.len() + arguments.len() + arguments.len() / 8,
    );
    w.u32("turn", turn);
    w.u32("step", step);
    let facts = [
        w.str("callId", call_id),
        w.str("name", name),
        w.str("arguments", arguments),
    ];
    (w.finish_string(), facts)
}

/// A guess at the length of content blocks' text, to size the buffer they are written into.
pub(crate) fn content_len(content: &[ContentBlock]) -> usize {
    content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.len() + 24,
            ContentBlock::Image { data, mime_type } => data.len() + mime_type.len() + 48,
            ContentBlock::Other(_) => 64,
        })
        .sum()
}

/// Writes `message, error?, meta?` of a `tool/result` after its `turn` and `step`; returns where
/// `message` sits in the text.
pub(crate) fn write_result_rest(
    w: &mut TextWriter,
    call_id: &str,
    content: &[ContentBlock],
    is_error: bool,
    error: Option<&ErrorInfo>,
    meta: Option<&Json>,
    id: &[u8; 36],
) -> Option<SubText> {
    // `message` spelled out: its keys and nesting are fixed, only the values vary.
    const MESSAGE: &str = r#","message":"#;
    let start = w.len() + MESSAGE.len();
    w.raw(MESSAGE);
    w.raw(r#"{"source":{"kind":"tool","callId":"#);
    w.string(call_id);
    w.raw(r#"},"content":[{"type":"tool-result","toolCallId":"#);
    w.string(call_id);
    w.raw(r#","content":"#);
    w.blocks(content);
    w.raw(if is_error {
        r#","isError":true}],"role":"user","id":""#
    } else {
        r#","isError":false}],"role":"user","id":""#
    });
    w.raw(std::str::from_utf8(id).unwrap_or("00000000-0000-4000-8000-000000000000"));
    w.raw(r#""}"#);
    let end = w.len();
    if let Some(info) = error {
        w.open("error");
        w.str("name", &info.name);
        w.str("code", &info.code);
        w.close();
    }
    if let Some(meta) = meta {
        w.value("meta", meta);
    }
    // message > content > item > content > block.
    SubText::new(start, end, 4 + blocks_depth(content))
}

/// The deepest block's depth (1 for text and images).
fn blocks_depth(content: &[ContentBlock]) -> usize {
    content
        .iter()
        .map(|b| match b {
            ContentBlock::Other(j) => j.depth(),
            _ => 1,
        })
        .max()
        .unwrap_or(0)
}

/// The nesting depth of a `tool/result`'s data, from its shape: data > message > content > item
/// > content > block, and data > meta.
pub(crate) fn result_depth(content: &[ContentBlock], meta: Option<&Json>) -> usize {
    (5 + blocks_depth(content)).max(1 + meta.map_or(0, Json::depth))
}

/// The writer of a `tool/code-dispatch-start` (`settled: None`) or `tool/code-dispatch` data,
/// shared by the eager and the deferred constructors so both write the same bytes.
pub(crate) fn dispatch_writer(
    root_call_id: &str,
    parent_call_id: &str,
    sub_call_id: &str,
    name: &str,
    arguments: &Json,
    settled: Option<(bool, &[ContentBlock])>,
) -> TextWriter {
    let mut w = TextWriter::with_capacity(128);
    w.str("rootCallId", root_call_id);
    w.str("parentCallId", parent_call_id);
    w.str("subCallId", sub_call_id);
    w.str("name", name);
    w.value("arguments", arguments);
    if let Some((is_error, content)) = settled {
        w.bool("isError", is_error);
        w.value("content", content);
    }
    w
}

/// The nesting depth of a `tool/code-dispatch*` data, from its shape: data > arguments, and
/// data > content > block.
pub(crate) fn dispatch_depth(arguments: &Json, content: Option<&[ContentBlock]>) -> usize {
    let content = content.map_or(0, |blocks| 1 + blocks_depth(blocks));
    1 + arguments.depth().max(content)
}
