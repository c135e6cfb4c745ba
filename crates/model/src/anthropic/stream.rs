//! Reading a Messages stream (`event:`/`data:` pairs from `message_start` to `message_stop`)
//! into chunks.
//!
//! Guarantees: content blocks keep the API's order; `input_json_delta` fragments are passed on
//! untouched as a tool call's raw arguments (a call that streamed none gets `{}`, the input the
//! API reports for it); `thinking_delta`, `signature_delta` and `redacted_thinking` become
//! reasoning chunks; `ping` and unknown events are skipped (the API may add events); an `error`
//! event fails the stream with the API's type and message; usage (input from `message_start`,
//! output from `message_delta`) and the stop reason are sent at `message_stop`.

use std::collections::{HashMap, VecDeque};

use crate::sse_parser::SseEvent as Event;
use serde::Deserialize;
use serde_json::Value;

use crate::chunk::{BlockKind, Chunk, FinishReason, Usage};
use crate::error::ModelError;
use crate::http::shorten;
use crate::sse::Decoder;

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Wire {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: ApiError,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Default)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct ApiError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: String },
    #[serde(rename = "signature_delta")]
    Signature { signature: String },
    #[serde(other)]
    Unknown,
}

/// The decoder state of one Messages stream.
pub(crate) struct AnthropicDecoder {
    provider: String,
    /// The API's block index to ours, with the kind and whether arguments streamed.
    blocks: HashMap<usize, (usize, BlockKind, bool)>,
    next_index: usize,
    usage: Usage,
    stop: Option<FinishReason>,
}

impl AnthropicDecoder {
    pub(crate) fn new(provider: &str) -> AnthropicDecoder {
        AnthropicDecoder {
            provider: provider.to_owned(),
            blocks: HashMap::new(),
            next_index: 0,
            usage: Usage::default(),
            stop: None,
        }
    }

    fn malformed(&self, detail: String, source: Option<serde_json::Error>) -> ModelError {
        ModelError::Malformed {
            provider: self.provider.clone(),
            detail,
            source,
        }
    }

    fn merge(&mut self, u: &WireUsage) {
        let set = |field: &mut u64, v: Option<u64>| {
            if let Some(v) = v {
                *field = v;
            }
        };
        set(&mut self.usage.input_tokens, u.input_tokens);
        set(&mut self.usage.output_tokens, u.output_tokens);
        set(&mut self.usage.cache_read_tokens, u.cache_read_input_tokens);
        set(
            &mut self.usage.cache_write_tokens,
            u.cache_creation_input_tokens,
        );
    }

    fn start(
        &mut self,
        wire: usize,
        block: &Value,
        out: &mut VecDeque<Chunk>,
    ) -> Result<(), ModelError> {
        let text = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or_default();
        let kind = match text("type") {
            "text" => BlockKind::Text,
            "thinking" | "redacted_thinking" => BlockKind::Reasoning,
            "tool_use" | "server_tool_use" => BlockKind::ToolCall,
            // Block kinds this crate does not model (web search results, ...) are skipped.
            _ => return Ok(()),
        };
        if self.blocks.contains_key(&wire) {
            return Err(self.malformed(format!("content block {wire} started twice"), None));
        }
        let index = self.next_index;
        self.next_index += 1;
        self.blocks.insert(wire, (index, kind, false));
        out.push_back(Chunk::BlockStart { index, kind });
        match text("type") {
            "text" if !text("text").is_empty() => out.push_back(Chunk::TextDelta {
                index,
                text: text("text").to_owned(),
            }),
            "thinking" => {
                if !text("thinking").is_empty() {
                    out.push_back(Chunk::ReasoningDelta {
                        index,
                        text: text("thinking").to_owned(),
                    });
                }
                if !text("signature").is_empty() {
                    out.push_back(Chunk::ReasoningSignature {
                        index,
                        signature: text("signature").to_owned(),
                    });
                }
            }
            "redacted_thinking" => out.push_back(Chunk::ReasoningRedacted {
                index,
                data: text("data").to_owned(),
            }),
            "tool_use" | "server_tool_use" => out.push_back(Chunk::ToolCallDelta {
                index,
                id: Some(text("id").to_owned()),
                name: Some(text("name").to_owned()),
                arguments: String::new(),
            }),
            _ => {}
        }
        Ok(())
    }

    fn delta(
        &mut self,
        wire: usize,
        delta: Delta,
        out: &mut VecDeque<Chunk>,
    ) -> Result<(), ModelError> {
        let Some((index, kind, streamed)) = self.blocks.get_mut(&wire) else {
            return Err(self.malformed(
                format!("delta for content block {wire}, which never started"),
                None,
            ));
        };
        let index = *index;
        let chunk = match (delta, *kind) {
            (Delta::Text { text }, BlockKind::Text) => Chunk::TextDelta { index, text },
            (Delta::Thinking { thinking }, BlockKind::Reasoning) => Chunk::ReasoningDelta {
                index,
                text: thinking,
            },
            (Delta::Signature { signature }, BlockKind::Reasoning) => {
                Chunk::ReasoningSignature { index, signature }
            }
            (Delta::InputJson { partial_json }, BlockKind::ToolCall) => {
                *streamed |= !partial_json.is_empty();
                Chunk::ToolCallDelta {
                    index,
                    id: None,
                    name: None,
                    arguments: partial_json,
                }
            }
            (Delta::Unknown, _) => return Ok(()),
            (_, kind) => {
                return Err(self.malformed(
                    format!(
                        "a delta that does not fit content block {wire} ({})",
                        kind.as_str()
                    ),
                    None,
                ));
            }
        };
        out.push_back(chunk);
        Ok(())
    }
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, event: &Event, out: &mut VecDeque<Chunk>) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        let wire: Wire = serde_json::from_str(data).map_err(|e| {
            self.malformed(format!("{} event: {}", event.event, shorten(data)), Some(e))
        })?;
        match wire {
            Wire::MessageStart { message } => {
                if let Some(u) = &message.usage {
                    self.merge(u);
                }
            }
            Wire::ContentBlockStart {
                index,
                content_block,
            } => self.start(index, &content_block, out)?,
            Wire::ContentBlockDelta { index, delta } => self.delta(index, delta, out)?,
            Wire::ContentBlockStop { index } => {
                if let Some((index, kind, streamed)) = self.blocks.get(&index).copied() {
                    if kind == BlockKind::ToolCall && !streamed {
                        out.push_back(Chunk::ToolCallDelta {
                            index,
                            id: None,
                            name: None,
                            arguments: "{}".to_owned(),
                        });
                    }
                    out.push_back(Chunk::BlockEnd { index });
                }
            }
            Wire::MessageDelta { delta, usage } => {
                if let Some(u) = &usage {
                    self.merge(u);
                }
                if let Some(reason) = delta.stop_reason {
                    self.stop = Some(FinishReason::from_anthropic(&reason));
                }
            }
            Wire::MessageStop => {
                out.push_back(Chunk::Usage(self.usage));
                let reason = self
                    .stop
                    .take()
                    .unwrap_or_else(|| FinishReason::Other("unknown".into()));
                out.push_back(Chunk::Finish(reason));
                return Ok(true);
            }
            Wire::Ping | Wire::Unknown => {}
            Wire::Error { error } => {
                return Err(ModelError::StreamError {
                    provider: self.provider.clone(),
                    kind: error.kind,
                    message: error.message,
                });
            }
        }
        Ok(false)
    }

    fn end(&mut self, _out: &mut VecDeque<Chunk>) -> Result<(), ModelError> {
        Err(ModelError::StreamEnded {
            url: String::new(),
            expected: "message_stop",
        })
    }
}
