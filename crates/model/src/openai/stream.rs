//! Reading a Chat Completions stream (`data: {chunk}` lines, then `data: [DONE]`) into chunks.
//!
//! Guarantees: tool-call fragments are routed by their `index` (fragments of different calls may
//! interleave), except that a fragment bringing an `id` other than the one of the call
//! assembled at its index starts a new call (servers that send every call at index 0, each
//! with its own id); calls keep the order they arrived in and their `arguments` pieces are
//! passed on untouched; reasoning comes from
//! `reasoning_content` (DeepSeek, vLLM) or `reasoning` (OpenRouter, newer vLLM); text and
//! reasoning blocks end when the other kind starts, tool-call blocks when `finish_reason` comes;
//! `usage` (the chunk with empty `choices`) is passed on before `finish`, which is sent at
//! `[DONE]` (or at the end of a body that never sends `[DONE]` but did finish).

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};

use crate::sse_parser::SseEvent as Event;
use serde::Deserialize;

use crate::chunk::{BlockKind, Chunk, FinishReason, Usage};
use crate::error::ModelError;
use crate::http::shorten;
use crate::sse::Decoder;

#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<CallDelta<'a>>>,
}

#[derive(Deserialize)]
struct CallDelta<'a> {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
    /// DeepSeek's cache hits.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

#[derive(Deserialize, Default)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: u64,
}

impl WireUsage {
    fn usage(&self) -> Usage {
        let cached = self.prompt_cache_hit_tokens.unwrap_or_else(|| {
            self.prompt_tokens_details
                .as_ref()
                .map_or(0, |d| d.cached_tokens)
        });
        Usage {
            input_tokens: self.prompt_tokens.saturating_sub(cached),
            output_tokens: self.completion_tokens,
            cache_read_tokens: cached,
            cache_write_tokens: 0,
            reasoning_tokens: self
                .completion_tokens_details
                .as_ref()
                .map_or(0, |d| d.reasoning_tokens),
        }
    }
}

/// The decoder state of one Chat Completions stream.
pub(crate) struct OpenAiDecoder {
    provider: String,
    next_index: usize,
    /// The open text or reasoning block.
    open: Option<(BlockKind, usize)>,
    /// Wire `index` of a tool call to its block and the id it brought (if any yet), and the
    /// blocks in start order.
    calls: HashMap<usize, (usize, Option<String>)>,
    call_order: Vec<usize>,
    finish: Option<FinishReason>,
}

impl OpenAiDecoder {
    pub(crate) fn new(provider: &str) -> OpenAiDecoder {
        OpenAiDecoder {
            provider: provider.to_owned(),
            next_index: 0,
            open: None,
            calls: HashMap::new(),
            call_order: Vec::new(),
            finish: None,
        }
    }

    fn malformed(&self, detail: String, source: Option<serde_json::Error>) -> ModelError {
        ModelError::Malformed {
            provider: self.provider.clone(),
            detail,
            source,
        }
    }

    fn close_open(&mut self, out: &mut VecDeque<Chunk>) {
        if let Some((_, index)) = self.open.take() {
            out.push_back(Chunk::BlockEnd { index });
        }
    }

    fn start(&mut self, kind: BlockKind, out: &mut VecDeque<Chunk>) -> usize {
        let index = self.next_index;
        self.next_index += 1;
        out.push_back(Chunk::BlockStart { index, kind });
        index
    }

    /// The open block of `kind`, started (and any other open one ended) if needed.
    fn block(&mut self, kind: BlockKind, out: &mut VecDeque<Chunk>) -> usize {
        match self.open {
            Some((k, index)) if k == kind => index,
            _ => {
                self.close_open(out);
                let index = self.start(kind, out);
                self.open = Some((kind, index));
                index
            }
        }
    }

    fn call(&mut self, delta: &CallDelta<'_>, out: &mut VecDeque<Chunk>) {
        // A server that leaves `index` out sends each call whole or in order, as if all were at
        // one index: a fragment with a new id starts a call, one without continues the last.
        let wire = delta.index.unwrap_or(usize::MAX);
        // An empty id says nothing (some servers send `"id": ""` on every later fragment).
        let id = delta.id.as_deref().filter(|id| !id.is_empty());
        let index = match self.calls.get_mut(&wire) {
            // Another id at the same index: another call (some servers send every call at
            // index 0, each with its own id), not more of this one.
            Some((_, Some(known))) if id.is_some_and(|id| id != known) => None,
            Some((index, known)) => {
                if known.is_none() {
                    *known = id.map(str::to_owned);
                }
                Some(*index)
            }
            None => None,
        };
        let index = match index {
            Some(index) => index,
            None => {
                self.close_open(out);
                let index = self.start(BlockKind::ToolCall, out);
                self.calls.insert(wire, (index, id.map(str::to_owned)));
                self.call_order.push(index);
                index
            }
        };
        let function = delta.function.as_ref();
        out.push_back(Chunk::ToolCallDelta {
            index,
            id: delta.id.as_deref().map(str::to_owned),
            name: function.and_then(|f| f.name.as_deref()).map(str::to_owned),
            arguments: function
                .and_then(|f| f.arguments.as_deref())
                .unwrap_or_default()
                .to_owned(),
        });
    }

    fn finish_blocks(&mut self, out: &mut VecDeque<Chunk>) {
        self.close_open(out);
        for index in self.call_order.drain(..) {
            out.push_back(Chunk::BlockEnd { index });
        }
        self.calls.clear();
    }

    fn chunk(&mut self, data: &str, out: &mut VecDeque<Chunk>) -> Result<(), ModelError> {
        let wire: Wire<'_> = serde_json::from_str(data)
            .map_err(|e| self.malformed(format!("not a chunk: {}", shorten(data)), Some(e)))?;
        if let Some(error) = wire.error {
            let text = |k: &str| error.get(k).and_then(|v| v.as_str()).map(str::to_owned);
            return Err(ModelError::StreamError {
                provider: self.provider.clone(),
                kind: text("type")
                    .or_else(|| error.get("code").map(|c| c.to_string()))
                    .unwrap_or_else(|| "error".to_owned()),
                message: text("message").unwrap_or_else(|| error.to_string()),
            });
        }
        for choice in &wire.choices {
            if let Some(delta) = &choice.delta {
                let reasoning = delta
                    .reasoning_content
                    .as_deref()
                    .or(delta.reasoning.as_deref());
                if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
                    let index = self.block(BlockKind::Reasoning, out);
                    out.push_back(Chunk::ReasoningDelta {
                        index,
                        text: text.to_owned(),
                    });
                }
                if let Some(text) = delta.content.as_deref().filter(|t| !t.is_empty()) {
                    let index = self.block(BlockKind::Text, out);
                    out.push_back(Chunk::TextDelta {
                        index,
                        text: text.to_owned(),
                    });
                }
                for call in delta.tool_calls.iter().flatten() {
                    self.call(call, out);
                }
            }
            if let Some(reason) = &choice.finish_reason {
                self.finish_blocks(out);
                self.finish = Some(FinishReason::from_openai(reason));
            }
        }
        if let Some(usage) = &wire.usage {
            out.push_back(Chunk::Usage(usage.usage()));
        }
        Ok(())
    }
}

impl Decoder for OpenAiDecoder {
    fn event(&mut self, event: &Event, out: &mut VecDeque<Chunk>) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return match self.finish.take() {
                Some(reason) => {
                    out.push_back(Chunk::Finish(reason));
                    Ok(true)
                }
                None => Err(self.malformed("[DONE] before any finish_reason".into(), None)),
            };
        }
        if data.is_empty() {
            return Ok(false);
        }
        self.chunk(data, out).map(|()| false)
    }

    fn end(&mut self, out: &mut VecDeque<Chunk>) -> Result<(), ModelError> {
        match self.finish.take() {
            Some(reason) => {
                out.push_back(Chunk::Finish(reason));
                Ok(())
            }
            None => Err(ModelError::StreamEnded {
                url: String::new(),
                expected: "[DONE]",
            }),
        }
    }
}
