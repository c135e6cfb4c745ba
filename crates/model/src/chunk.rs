//! The response side of the seam: a [`ChunkStream`] of [`Chunk`]s in the reference's chunk
//! vocabulary (`block-start`, `text-delta`, `reasoning-delta`, `tool-call-delta`, `block-end`,
//! `usage`, `finish`), the same for every provider.
//!
//! Guarantees (every adapter): blocks are numbered from 0 in the order they start; every delta
//! names a block that started and has not ended; a block ends at most once; a tool call's
//! `arguments` fragments are the model's raw text, never re-serialized; `usage` comes before
//! `finish`, and `finish` is the last chunk of a stream that ended well.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use serde::Serialize;

use crate::error::ModelError;

/// A boxed stream of chunks; it ends after [`Chunk::Finish`] or with the first error.
pub type ChunkStream = Pin<Box<dyn Stream<Item = Result<Chunk, ModelError>> + Send>>;

/// What kind of block a [`Chunk::BlockStart`] opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockKind {
    /// Visible text.
    Text,
    /// Reasoning (DeepSeek `reasoning_content`, Anthropic `thinking`/`redacted_thinking`).
    Reasoning,
    /// A tool call.
    ToolCall,
}

impl BlockKind {
    /// The reference's `blockType` string.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockKind::Text => "text",
            BlockKind::Reasoning => "reasoning",
            BlockKind::ToolCall => "tool-call",
        }
    }
}

/// One piece of a streamed assistant message.
#[derive(Clone, Debug, PartialEq)]
pub enum Chunk {
    /// A block opens at `index`.
    BlockStart {
        /// The block's position in the message.
        index: usize,
        /// Its kind.
        kind: BlockKind,
    },
    /// Text appended to a text block.
    TextDelta {
        /// The block.
        index: usize,
        /// The fragment.
        text: String,
    },
    /// Reasoning text appended to a reasoning block.
    ReasoningDelta {
        /// The block.
        index: usize,
        /// The fragment.
        text: String,
    },
    /// The signature of a reasoning block (Anthropic `signature_delta`), appended.
    ReasoningSignature {
        /// The block.
        index: usize,
        /// The signature fragment.
        signature: String,
    },
    /// A reasoning block whose content the provider encrypted (Anthropic `redacted_thinking`).
    ReasoningRedacted {
        /// The block.
        index: usize,
        /// The opaque data, to be sent back as it came.
        data: String,
    },
    /// A fragment of a tool call: its id and name when the provider sends them (usually in the
    /// first fragment), and a piece of the raw argument text.
    ToolCallDelta {
        /// The block.
        index: usize,
        /// The call id, when this fragment carries it.
        id: Option<String>,
        /// The tool name, when this fragment carries it.
        name: Option<String>,
        /// A piece of the raw argument text (may be empty).
        arguments: String,
    },
    /// The block at `index` is complete.
    BlockEnd {
        /// The block.
        index: usize,
    },
    /// Token counts for the whole response.
    Usage(Usage),
    /// Why the model stopped; the last chunk.
    Finish(FinishReason),
}

/// Token counts in the reference's shape (`inputTokens`, `outputTokens`, `cacheReadTokens`,
/// `reasoningTokens`, and `cacheWriteTokens` where the provider reports it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Input tokens that were not read from the cache.
    pub input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Input tokens read from the provider's cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's cache (Anthropic).
    #[serde(skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Output tokens spent on reasoning, where reported.
    pub reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// A natural end (OpenAI `stop`; Anthropic `end_turn`, `stop_sequence`).
    Stop,
    /// The model wants tools run (`tool_calls`; `tool_use`).
    ToolCalls,
    /// The output limit was hit (`length`; `max_tokens`).
    Length,
    /// The provider filtered the output (`content_filter`; `refusal`).
    ContentFilter,
    /// Anything else, with the provider's own word.
    Other(Arc<str>),
}

impl FinishReason {
    /// The reference's `kind` string (`stop`, `tool-calls`, `max-tokens`, `content-filter`, `other`).
    pub fn kind(&self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::ToolCalls => "tool-calls",
            FinishReason::Length => "max-tokens",
            FinishReason::ContentFilter => "content-filter",
            FinishReason::Other(_) => "other",
        }
    }

    /// Reads an OpenAI Chat Completions `finish_reason`.
    pub fn from_openai(raw: &str) -> FinishReason {
        match raw {
            "stop" => FinishReason::Stop,
            "tool_calls" | "function_call" => FinishReason::ToolCalls,
            "length" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(Arc::from(other)),
        }
    }

    /// Reads an Anthropic Messages `stop_reason`.
    pub fn from_anthropic(raw: &str) -> FinishReason {
        match raw {
            "end_turn" | "stop_sequence" => FinishReason::Stop,
            "tool_use" => FinishReason::ToolCalls,
            "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
            "refusal" => FinishReason::ContentFilter,
            other => FinishReason::Other(Arc::from(other)),
        }
    }
}
