//! Assembling a chunk stream into a complete assistant message, whole ([`assemble`]) or one
//! chunk at a time ([`Assembler`]).
//!
//! Guarantees: a tool call's arguments are the concatenation of its fragments, byte for byte
//! (never parsed or re-serialized); blocks keep the order they started in; feeding the chunks one
//! at a time gives the same message as assembling the stream whole; [`Assembler::interrupted`]
//! keeps text and reasoning as far as they streamed but only the tool calls whose block ended,
//! so a half-streamed call is dropped whole (LOOP-19).

use std::collections::HashMap;

use futures::StreamExt;

use crate::chunk::{BlockKind, Chunk, ChunkStream, FinishReason, Usage};
use crate::error::ModelError;
use crate::request::{AssistantBlock, Message, ToolCall};

/// A complete (or interrupted) assistant message.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AssistantMessage {
    /// Text, reasoning and tool calls, in the order they started.
    pub blocks: Vec<AssistantBlock>,
    /// Token counts, if the provider sent them.
    pub usage: Option<Usage>,
    /// Why the model stopped, if the stream got that far.
    pub finish: Option<FinishReason>,
}

impl AssistantMessage {
    /// The visible text of all text blocks, concatenated.
    pub fn text(&self) -> String {
        self.blocks
            .iter()
            .filter_map(|b| match b {
                AssistantBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The reasoning text of all reasoning blocks, concatenated.
    pub fn reasoning(&self) -> String {
        self.blocks
            .iter()
            .filter_map(|b| match b {
                AssistantBlock::Reasoning { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.blocks.iter().filter_map(|b| match b {
            AssistantBlock::ToolCall(c) => Some(c),
            _ => None,
        })
    }

    /// The message as history for the next request.
    pub fn to_message(&self) -> Message {
        Message::Assistant {
            blocks: self.blocks.clone(),
        }
    }
}

/// Builds an [`AssistantMessage`] from chunks fed one at a time.
#[derive(Clone, Debug, Default)]
pub struct Assembler {
    blocks: Vec<AssistantBlock>,
    ended: Vec<bool>,
    /// Chunk index to position in `blocks`.
    slots: HashMap<usize, usize>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
}

impl Assembler {
    /// An empty assembler.
    pub fn new() -> Assembler {
        Assembler::default()
    }

    /// Feeds one chunk. A delta for a block that never started starts it (adapters always send
    /// the start first; this keeps hand-written chunk lists simple).
    pub fn push(&mut self, chunk: &Chunk) {
        match chunk {
            Chunk::BlockStart { index, kind } => {
                self.slot(*index, *kind);
            }
            Chunk::TextDelta { index, text } => {
                let at = self.slot(*index, BlockKind::Text);
                if let AssistantBlock::Text { text: t } = &mut self.blocks[at] {
                    t.push_str(text);
                }
            }
            Chunk::ReasoningDelta { index, text } => {
                let at = self.slot(*index, BlockKind::Reasoning);
                if let AssistantBlock::Reasoning { text: t, .. } = &mut self.blocks[at] {
                    t.push_str(text);
                }
            }
            Chunk::ReasoningSignature { index, signature } => {
                let at = self.slot(*index, BlockKind::Reasoning);
                if let AssistantBlock::Reasoning { signature: s, .. } = &mut self.blocks[at] {
                    s.get_or_insert_with(String::new).push_str(signature);
                }
            }
            Chunk::ReasoningRedacted { index, data } => {
                let at = self.slot(*index, BlockKind::Reasoning);
                if let AssistantBlock::Reasoning { redacted, .. } = &mut self.blocks[at] {
                    redacted.get_or_insert_with(String::new).push_str(data);
                }
            }
            Chunk::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => {
                let at = self.slot(*index, BlockKind::ToolCall);
                if let AssistantBlock::ToolCall(call) = &mut self.blocks[at] {
                    if let Some(id) = id.as_deref().filter(|s| !s.is_empty()) {
                        id.clone_into(&mut call.id);
                    }
                    if let Some(name) = name.as_deref().filter(|s| !s.is_empty()) {
                        name.clone_into(&mut call.name);
                    }
                    call.arguments.push_str(arguments);
                }
            }
            Chunk::BlockEnd { index } => {
                if let Some(&at) = self.slots.get(index) {
                    self.ended[at] = true;
                }
            }
            Chunk::Usage(u) => self.usage = Some(*u),
            Chunk::Finish(f) => self.finish = Some(f.clone()),
        }
    }

    fn slot(&mut self, index: usize, kind: BlockKind) -> usize {
        if let Some(&at) = self.slots.get(&index) {
            return at;
        }
        let block = match kind {
            BlockKind::Text => AssistantBlock::Text {
                text: String::new(),
            },
            BlockKind::Reasoning => AssistantBlock::Reasoning {
                text: String::new(),
                signature: None,
                redacted: None,
            },
            BlockKind::ToolCall => AssistantBlock::ToolCall(ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            }),
        };
        self.blocks.push(block);
        self.ended.push(false);
        let at = self.blocks.len() - 1;
        self.slots.insert(index, at);
        at
    }

    /// The message so far: every block as far as it streamed.
    pub fn message(&self) -> AssistantMessage {
        AssistantMessage {
            blocks: self.blocks.clone(),
            usage: self.usage,
            finish: self.finish.clone(),
        }
    }

    /// The message to commit when the stream stops early: text and reasoning as far as they
    /// streamed (empty ones left out), and only the tool calls whose block ended.
    pub fn interrupted(&self) -> AssistantMessage {
        let blocks = self
            .blocks
            .iter()
            .zip(&self.ended)
            .filter(|(b, ended)| match b {
                AssistantBlock::ToolCall(_) => **ended,
                AssistantBlock::Text { text } => !text.is_empty(),
                AssistantBlock::Reasoning { text, redacted, .. } => {
                    !text.is_empty() || redacted.is_some()
                }
            })
            .map(|(b, _)| b.clone())
            .collect();
        AssistantMessage {
            blocks,
            usage: self.usage,
            finish: self.finish.clone(),
        }
    }

    /// Whether the block with chunk index `index` has ended.
    pub fn is_ended(&self, index: usize) -> bool {
        self.slots.get(&index).is_some_and(|&at| self.ended[at])
    }

    /// The block with chunk index `index`, as far as it streamed.
    pub fn block(&self, index: usize) -> Option<&AssistantBlock> {
        self.slots.get(&index).map(|&at| &self.blocks[at])
    }

    /// Whether the finish chunk arrived.
    pub fn is_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// The message, consuming the assembler.
    pub fn finish(self) -> AssistantMessage {
        AssistantMessage {
            blocks: self.blocks,
            usage: self.usage,
            finish: self.finish,
        }
    }
}

/// Reads a stream to its end and assembles it; the first stream error is returned as is.
pub async fn assemble(mut stream: ChunkStream) -> Result<AssistantMessage, ModelError> {
    let mut assembler = Assembler::new();
    while let Some(chunk) = stream.next().await {
        assembler.push(&chunk?);
    }
    Ok(assembler.finish())
}
