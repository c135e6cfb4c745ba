//! Server-sent events off a response body (parsed by `sse_parser.rs`), watched by the idle
//! watchdog and the whole-request deadline, and turned into a [`ChunkStream`] by a provider's
//! [`Decoder`].
//!
//! Guarantees: every byte that arrives re-arms the idle timer, so a slow but live stream (SSE
//! comments, pings) never times out; a cut, a stall, a malformed event or a stream that ends
//! early surfaces once, as the stream's last item, and nothing is retried.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::time::Instant;

use crate::chunk::{Chunk, ChunkStream};
use crate::error::ModelError;
use crate::http::within;
use crate::sse_parser::{SseEvent as Event, SseParser};
use crate::watchdog::{IDLE_TIMEOUT_CODE, IdleWatchdog, WatchdogError};

/// A provider's reading of its events.
pub(crate) trait Decoder: Send + 'static {
    /// Reads one event, pushing the chunks it yields; returns true once the stream is complete.
    fn event(&mut self, event: &Event, out: &mut VecDeque<Chunk>) -> Result<bool, ModelError>;
    /// The body ended without the completion marker: either finishes leniently or fails.
    fn end(&mut self, out: &mut VecDeque<Chunk>) -> Result<(), ModelError>;
}

type Body = BoxStream<'static, Result<Bytes, reqwest::Error>>;

struct State<D> {
    body: Body,
    parser: SseParser,
    events: VecDeque<Event>,
    ended: bool,
    watchdog: Arc<IdleWatchdog>,
    deadline: Option<(Instant, Duration)>,
    url: String,
    provider: String,
    decoder: D,
    pending: VecDeque<Chunk>,
    done: bool,
}

impl<D: Decoder> State<D> {
    /// The next event, or `None` at the end of the body. Every read of the body re-arms the
    /// idle timer, so a slow but live stream (comments, pings) never times out.
    async fn next_event(&mut self) -> Result<Option<Event>, ModelError> {
        loop {
            if let Some(event) = self.events.pop_front() {
                return Ok(Some(event));
            }
            if self.ended {
                return Ok(None);
            }
            let waited = within(self.deadline, self.watchdog.next(self.body.next())).await?;
            match waited {
                Ok(Some(Ok(bytes))) => {
                    self.parser.push(&bytes, &mut self.events).map_err(|e| {
                        ModelError::Malformed {
                            provider: self.provider.clone(),
                            detail: format!("the event stream is not UTF-8 at byte {}", e.at),
                            source: None,
                        }
                    })?;
                }
                Ok(None) => self.ended = true,
                Ok(Some(Err(source))) => {
                    return Err(ModelError::StreamCut {
                        url: self.url.clone(),
                        source,
                    });
                }
                Err(WatchdogError::TimedOut(reason)) => return Err(ModelError::Idle { reason }),
                Err(WatchdogError::Aborted(reason)) => {
                    return Err(ModelError::Cancelled { reason });
                }
                Err(other) => return Err(ModelError::Watchdog(other)),
            }
        }
    }

    async fn step(&mut self) -> Option<Result<Chunk, ModelError>> {
        loop {
            if let Some(chunk) = self.pending.pop_front() {
                return Some(Ok(chunk));
            }
            if self.done {
                return None;
            }
            let outcome = match self.next_event().await {
                Ok(Some(event)) => self.decoder.event(&event, &mut self.pending),
                Ok(None) => self.decoder.end(&mut self.pending).map(|()| true),
                Err(e) => Err(e),
            };
            match outcome {
                Ok(complete) => self.done = complete,
                Err(mut e) => {
                    if let ModelError::StreamEnded { url, .. } = &mut e {
                        url.clone_from(&self.url);
                    }
                    // Earlier events' chunks were all delivered; a failed event delivers none.
                    self.done = true;
                    self.pending.clear();
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Turns a response with a success status into a chunk stream.
pub(crate) fn chunk_stream<D: Decoder>(
    response: reqwest::Response,
    decoder: D,
    provider: &str,
    idle_timeout: Duration,
    deadline: Option<(Instant, Duration)>,
) -> Result<ChunkStream, ModelError> {
    let url = response.url().to_string();
    let watchdog = Arc::new(IdleWatchdog::new(None, idle_timeout, IDLE_TIMEOUT_CODE)?);
    let state = State {
        body: response.bytes_stream().boxed(),
        parser: SseParser::new(),
        events: VecDeque::new(),
        ended: false,
        watchdog,
        deadline,
        url,
        provider: provider.to_owned(),
        decoder,
        pending: VecDeque::new(),
        done: false,
    };
    Ok(futures::stream::unfold(state, |mut st| async move {
        let item = st.step().await?;
        Some((item, st))
    })
    .boxed())
}
