//! Typed views of an [`Event`]'s payload, read without building its tree where the facts allow.

use super::*;

impl Event {
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

    /// The text of `data.message`, when the data is text and the facts know where it sits.
    pub(crate) fn message_text(&self) -> Option<&str> {
        self.message_text_at().map(|(text, _)| text)
    }

    /// [`Event::message_text`] with its nesting depth.
    pub(crate) fn message_text_at(&self) -> Option<(&str, usize)> {
        let at = self.data.facts().message?;
        let text = self.data.text()?.get(at.start as usize..at.end as usize)?;
        Some((text, at.depth as usize))
    }

    /// The call a `tool/result` answers (its view's `call_id`), read from the message's text
    /// without building the tree when the text allows (see `skim.rs`).
    pub(crate) fn result_call_id(&self) -> Option<std::borrow::Cow<'_, str>> {
        if &*self.event_type != types::TOOL_RESULT {
            return None;
        }
        if self.data.tree().is_none()
            && let Some(id) = self.message_text().and_then(crate::skim::result_call_id)
        {
            return id;
        }
        self.as_tool_result()
            .map(|r| std::borrow::Cow::Borrowed(r.call_id))
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

    /// Whether `data.<key>` is a string (`callId`, `name` and `arguments` of a typed event
    /// known without building its tree, even when their text holds escapes).
    pub(crate) fn data_is_str(&self, key: &str) -> bool {
        if let Some(field) = self.data.fields().and_then(|f| f.str_field(key)) {
            return field.is_some();
        }
        let facts = self.data.facts();
        if facts.known {
            let (fact, bit) = match key {
                "callId" => (facts.call_id, Facts::ESCAPED_CALL_ID),
                "name" => (facts.name, Facts::ESCAPED_NAME),
                "arguments" => (facts.arguments, Facts::ESCAPED_ARGUMENTS),
                _ => (StrFact::Parse.into(), 0),
            };
            match fact.get() {
                StrFact::Absent => return false,
                StrFact::At(..) => return true,
                StrFact::Parse if facts.escaped & bit != 0 => return true,
                StrFact::Parse => {}
            }
        }
        self.data().value().get(key).is_some_and(Value::is_string)
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

    /// The sub-call a `tool/code-dispatch-start` or `tool/code-dispatch` is about (its
    /// `subCallId`), read from the typed fields of an event built in this process without
    /// building its tree.
    pub fn sub_call_id(&self) -> Option<&str> {
        match &*self.event_type {
            types::CODE_DISPATCH_START | types::CODE_DISPATCH => self.data_str("subCallId"),
            _ => None,
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
    use super::*;

    #[test]
    fn a_dispatch_names_its_sub_call_without_building_its_tree() {
        let args = || Json::from_shallow(serde_json::json!({"text": "hi"}));
        let start = Event::code_dispatch_start("root", "root", "sub-1", "echo", args());
        let done = Event::code_dispatch("root", "root", "sub-2", "echo", args(), false, vec![]);
        assert_eq!(start.sub_call_id(), Some("sub-1"));
        assert_eq!(done.sub_call_id(), Some("sub-2"));
        assert!(start.data.tree().is_none(), "the tree was built");
        // Read back from its line, the same answer.
        let read = Event::from_json_line(&start.to_json_line()).expect("reads");
        assert_eq!(read.sub_call_id(), Some("sub-1"));
        assert_eq!(Event::turn_start(1).sub_call_id(), None);
    }
}
