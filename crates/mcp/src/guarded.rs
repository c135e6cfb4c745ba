//! What a stdio server writes, checked line by line before the SDK reads it.
//!
//! The SDK ignores a line that is not JSON and drops one longer than its limit, so a server that
//! answers a call with either would leave the call waiting for its whole timeout, saying
//! nothing. Here each line is held until it is complete and checked: a JSON object whose
//! `jsonrpc` is `"2.0"` (or a blank line) passes on; anything else, or a line that grows past
//! [`MAX_MESSAGE_BYTES`], ends the connection with an error saying what the server sent, kept
//! in the hub so the calls that fail with the connection name it. At most one line (and what
//! was read past it) is held, so a line that never ends costs at most the limit.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use serde::Deserialize;
use tokio::io::{AsyncRead, ReadBuf};

use crate::hub::Hub;

/// The longest message a server may send (the SDK's own line limit, 16 MiB).
pub const MAX_MESSAGE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// How much is read from the server at a time.
const CHUNK: usize = 64 * 1024;

/// A server's stdout, passing on only whole lines that are JSON-RPC messages.
pub(crate) struct Guarded<R> {
    inner: R,
    hub: Arc<Hub>,
    limit: usize,
    buf: Vec<u8>,
    /// `buf[served..ready]` is checked and not yet handed on.
    served: usize,
    ready: usize,
    /// `buf[ready..scanned]` holds no line end.
    scanned: usize,
    eof: bool,
}

impl<R> Guarded<R> {
    pub(crate) fn new(inner: R, hub: Arc<Hub>) -> Guarded<R> {
        Guarded::with_limit(inner, hub, MAX_MESSAGE_BYTES)
    }

    pub(crate) fn with_limit(inner: R, hub: Arc<Hub>, limit: usize) -> Guarded<R> {
        Guarded {
            inner,
            hub,
            limit,
            buf: Vec::new(),
            served: 0,
            ready: 0,
            scanned: 0,
            eof: false,
        }
    }

    /// Records why the connection ends and returns the error that ends it.
    fn broken(&self, why: String) -> std::io::Error {
        self.hub.set_broken(why.clone());
        std::io::Error::new(std::io::ErrorKind::InvalidData, why)
    }
}

/// The envelope every JSON-RPC message has.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: std::borrow::Cow<'a, str>,
}

/// Why `line` (without its line end) is not a message, if it is not.
fn refuse(line: &[u8]) -> Option<String> {
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return None;
    }
    let shown = || {
        let head = &trimmed[..trimmed.len().min(120)];
        let more = if trimmed.len() > 120 { "..." } else { "" };
        format!("`{}{more}`", String::from_utf8_lossy(head))
    };
    match serde_json::from_slice::<Envelope<'_>>(trimmed) {
        Ok(e) if e.jsonrpc == "2.0" => None,
        Ok(e) => Some(format!(
            "a message of JSON-RPC version {:?}, not \"2.0\": {}",
            e.jsonrpc,
            shown()
        )),
        Err(e) if e.is_data() => Some(format!("JSON that is not a JSON-RPC message: {}", shown())),
        Err(_) => Some(format!("a line that is not JSON: {}", shown())),
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Guarded<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.served < this.ready {
                let n = out.remaining().min(this.ready - this.served);
                out.put_slice(&this.buf[this.served..this.served + n]);
                this.served += n;
                if this.served == this.ready {
                    this.buf.drain(..this.ready);
                    this.scanned -= this.ready;
                    this.served = 0;
                    this.ready = 0;
                    // A long message passed: give its room back.
                    if this.buf.capacity() > 4 * CHUNK && this.buf.len() < CHUNK {
                        this.buf.shrink_to(CHUNK);
                    }
                }
                return Poll::Ready(Ok(()));
            }
            if let Some(at) = this.buf[this.scanned..].iter().position(|&b| b == b'\n') {
                let end = this.scanned + at + 1;
                if let Some(why) = refuse(&this.buf[..end - 1]) {
                    return Poll::Ready(Err(this.broken(format!("it sent {why}"))));
                }
                this.ready = end;
                this.scanned = end;
                continue;
            }
            this.scanned = this.buf.len();
            if this.buf.len() > this.limit {
                let why = format!(
                    "it sent a message longer than {} bytes (the limit)",
                    this.limit
                );
                return Poll::Ready(Err(this.broken(why)));
            }
            if this.eof {
                // What is left has no line end: pass it on as it is (the SDK drops it).
                this.ready = this.buf.len();
                if this.ready == 0 {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            let start = this.buf.len();
            this.buf.resize(start + CHUNK, 0);
            let mut chunk = ReadBuf::new(&mut this.buf[start..]);
            let polled = Pin::new(&mut this.inner).poll_read(cx, &mut chunk);
            let got = chunk.filled().len();
            this.buf.truncate(start + got);
            match polled {
                Poll::Ready(Ok(())) if got == 0 => this.eof = true,
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn read_all(input: &[u8], limit: usize) -> (std::io::Result<Vec<u8>>, Option<String>) {
        let hub = Arc::new(Hub::default());
        let mut g = Guarded::with_limit(input, hub.clone(), limit);
        let mut out = Vec::new();
        let r = g.read_to_end(&mut out).await.map(|_| out);
        (r, hub.broken())
    }

    #[tokio::test]
    async fn json_rpc_lines_pass_whole_and_in_order() {
        let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n";
        let (r, why) = read_all(input, 1024).await;
        assert_eq!(r.unwrap(), input);
        assert_eq!(why, None);
    }

    #[tokio::test]
    async fn a_line_that_is_not_json_ends_the_connection_saying_what_it_was() {
        let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\nnot json at all\n";
        let (r, why) = read_all(input, 1024).await;
        assert!(r.is_err());
        assert_eq!(
            why.as_deref(),
            Some("it sent a line that is not JSON: `not json at all`")
        );
    }

    #[tokio::test]
    async fn json_that_is_not_json_rpc_is_refused_too() {
        let (_, why) = read_all(b"{\"hello\":1}\n", 1024).await;
        assert!(why.unwrap().contains("not a JSON-RPC message"));
        let (_, why) = read_all(b"{\"jsonrpc\":\"1.0\"}\n", 1024).await;
        assert!(why.unwrap().contains("version \"1.0\""));
    }

    #[tokio::test]
    async fn a_line_past_the_limit_ends_the_connection_without_holding_more() {
        let mut input = b"{\"jsonrpc\":\"2.0\",\"result\":\"".to_vec();
        input.extend(std::iter::repeat_n(b'x', 300_000));
        let (r, why) = read_all(&input, 100_000).await;
        assert!(r.is_err());
        assert!(why.unwrap().contains("longer than"));
    }
}
