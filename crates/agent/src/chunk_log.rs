//! Stream chunks into the log, in the reference's format.
//!
//! Guarantees: every chunk of a stream is logged, in the order it came, before the message
//! assembled from it: block starts and ends, usage and finish as `assistant/chunk` events, and
//! each run of consecutive deltas of one block as one compressed `text-chunks`,
//! `reasoning-chunks` or `tool-call-chunks` event (one seq per delta, `dt` the milliseconds
//! since the previous chunk), exactly as the reference writes them. The seqs of everything
//! logged for one attempt are the message's `sourceEventSeqs`. Appends are submitted without
//! waiting (seqs follow submission order) and awaited together by [`ChunkLog::flush`], so a
//! stream never waits on the disk chunk by chunk.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use dsh_core::Json;
use dsh_model::{AssistantBlock, Chunk};
use dsh_session::{Event, Session, SessionError};
use serde_json::{Value, json};

use crate::history::block_json;

type Pending = Pin<Box<dyn Future<Output = Result<u64, SessionError>> + Send>>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum RunKind {
    Text,
    Reasoning,
    ToolCall,
}

struct Run {
    kind: RunKind,
    index: usize,
    dt: Vec<u64>,
    texts: Vec<String>,
    id: Option<String>,
    name: Option<String>,
}

/// Logs one step's stream (see the module docs).
pub(crate) struct ChunkLog {
    session: Session,
    turn: u32,
    step: u32,
    run: Option<Run>,
    last: Instant,
    pending: Vec<(u64, Pending)>,
    seqs: Vec<u64>,
}

impl ChunkLog {
    pub(crate) fn new(session: Session, turn: u32, step: u32) -> ChunkLog {
        ChunkLog {
            session,
            turn,
            step,
            run: None,
            last: Instant::now(),
            pending: Vec::new(),
            seqs: Vec::new(),
        }
    }

    pub(crate) fn turn(&self) -> u32 {
        self.turn
    }

    pub(crate) fn step(&self) -> u32 {
        self.step
    }

    fn dt(&mut self) -> u64 {
        let now = Instant::now();
        let dt = now.duration_since(self.last).as_millis() as u64;
        self.last = now;
        dt
    }

    /// Logs one chunk; `block` is the block at the chunk's index as assembled so far (for a
    /// block end).
    pub(crate) fn push(&mut self, chunk: &Chunk, block: Option<&AssistantBlock>) {
        let dt = self.dt();
        let (kind, index, text, id, name) = match chunk {
            Chunk::TextDelta { index, text } => (RunKind::Text, *index, text, None, None),
            Chunk::ReasoningDelta { index, text } => (RunKind::Reasoning, *index, text, None, None),
            Chunk::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => (
                RunKind::ToolCall,
                *index,
                arguments,
                id.as_ref(),
                name.as_ref(),
            ),
            other => {
                self.end_run();
                let data = match other {
                    Chunk::BlockStart { index, kind } => {
                        json!({"type": "block-start", "index": index, "blockType": kind.as_str()})
                    }
                    Chunk::BlockEnd { index } => {
                        let block = block.map(block_json).unwrap_or(Value::Null);
                        json!({"type": "block-end", "index": index, "block": block})
                    }
                    Chunk::Usage(usage) => json!({"type": "usage", "usage": usage}),
                    Chunk::Finish(reason) => {
                        json!({"type": "finish", "reason": {"kind": reason.kind()}})
                    }
                    Chunk::ReasoningSignature { index, signature } => {
                        json!({"type": "reasoning-signature", "index": index, "signature": signature})
                    }
                    Chunk::ReasoningRedacted { index, data } => {
                        json!({"type": "reasoning-redacted", "index": index, "data": data})
                    }
                    _ => return,
                };
                self.append(Event::other(
                    "assistant/chunk",
                    Json::from_shallow(
                        json!({"turn": self.turn, "step": self.step, "chunk": data}),
                    ),
                ));
                return;
            }
        };
        let same = self
            .run
            .as_ref()
            .is_some_and(|r| r.kind == kind && r.index == index);
        if !same {
            self.end_run();
            self.run = Some(Run {
                kind,
                index,
                dt: Vec::new(),
                texts: Vec::new(),
                id: None,
                name: None,
            });
        }
        if let Some(run) = &mut self.run {
            run.dt.push(dt);
            run.texts.push(text.clone());
            if run.id.is_none() {
                run.id = id.cloned();
            }
            if run.name.is_none() {
                run.name = name.cloned();
            }
        }
    }

    fn end_run(&mut self) {
        let Some(run) = self.run.take() else {
            return;
        };
        let (event_type, data) = match run.kind {
            RunKind::ToolCall => (
                "tool-call-chunks",
                json!({
                    "turn": self.turn, "step": self.step, "index": run.index, "dt": run.dt,
                    "id": run.id.unwrap_or_default(), "name": run.name.unwrap_or_default(),
                    "args": run.texts,
                }),
            ),
            RunKind::Text | RunKind::Reasoning => (
                if run.kind == RunKind::Text {
                    "text-chunks"
                } else {
                    "reasoning-chunks"
                },
                json!({
                    "turn": self.turn, "step": self.step, "index": run.index, "dt": run.dt,
                    "texts": run.texts,
                }),
            ),
        };
        self.append(Event::other(event_type, Json::from_shallow(data)));
    }

    fn append(&mut self, event: Event) {
        let span = event.seq_span();
        self.pending
            .push((span, Box::pin(self.session.append(event))));
    }

    /// Logs what is buffered and waits until everything is durable; returns the seqs logged
    /// since the last [`ChunkLog::restart`].
    pub(crate) async fn flush(&mut self) -> Result<Vec<u64>, SessionError> {
        self.end_run();
        for (span, pending) in std::mem::take(&mut self.pending) {
            let first = pending.await?;
            self.seqs.extend(first..first + span);
        }
        Ok(self.seqs.clone())
    }

    /// Forgets the seqs logged so far (a failed attempt's chunks stay in the log but are not
    /// the source of the next attempt's message, LOOP-21).
    pub(crate) fn restart(&mut self) {
        self.seqs.clear();
    }
}
