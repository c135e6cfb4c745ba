//! The HTTP server: one axum router on a random port of 127.0.0.1, the checks, the recording
//! and the streaming of scripted frames; each connection can be dropped by its handler
//! ([`Reply::Close`]) through a flag its socket checks before every write.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Response, StatusCode, Uri};
use axum::routing::post;
use axum::serve::{IncomingStream, Listener};
use futures::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use super::{Frame, Recorded, Reply, Shared, anthropic, openai};

/// A running mock provider; dropping it stops accepting connections.
pub struct MockProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockProvider {
    /// Starts a server on a random port of 127.0.0.1 (needs a tokio runtime).
    pub async fn start() -> std::io::Result<MockProvider> {
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/v1/messages", post(handle))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let listener = Droppable(listener);
        let app = app.into_make_service_with_connect_info::<DropSwitch>();
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("mock provider stopped: {e}");
            }
        });
        Ok(MockProvider { addr, shared, task })
    }

    /// The address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL an OpenAI SDK takes: `http://127.0.0.1:<port>/v1`.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The base URL the Anthropic SDK takes: `http://127.0.0.1:<port>`.
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requires this key (`Authorization: Bearer` or `x-api-key`) from now on.
    pub fn require_key(&self, key: &str) {
        *self.shared.key.lock() = Some(key.to_owned());
    }

    /// Queues a reply; replies are served in the order queued.
    pub fn push(&self, reply: Reply) {
        self.shared.replies.lock().push_back(reply);
    }

    /// Queues several replies.
    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.replies.lock().extend(replies);
    }

    /// Replies queued and not served yet.
    pub fn pending(&self) -> usize {
        self.shared.replies.lock().len()
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().clone()
    }

    /// The parsed bodies of every request received, in order.
    pub fn bodies(&self) -> Vec<Value> {
        self.shared
            .requests
            .lock()
            .iter()
            .map(|r| r.body.clone())
            .collect()
    }
}

/// The listener: TCP connections whose sockets a handler can drop.
struct Droppable(TcpListener);

/// A connection's switch: once on, its socket refuses every write, so the server drops the
/// connection without writing a byte of the response.
#[derive(Clone, Default)]
struct DropSwitch(Arc<AtomicBool>);

/// A TCP stream with its [`DropSwitch`].
struct DroppableStream {
    inner: TcpStream,
    switch: DropSwitch,
}

impl Listener for Droppable {
    type Io = DroppableStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (inner, addr) = Listener::accept(&mut self.0).await;
        let stream = DroppableStream {
            inner,
            switch: DropSwitch::default(),
        };
        (stream, addr)
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

impl Connected<IncomingStream<'_, Droppable>> for DropSwitch {
    fn connect_info(stream: IncomingStream<'_, Droppable>) -> Self {
        stream.io().switch.clone()
    }
}

impl DroppableStream {
    fn dropped(&self) -> Option<std::io::Error> {
        self.switch.0.load(Ordering::SeqCst).then(|| {
            std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "mock provider: connection dropped",
            )
        })
    }
}

impl AsyncRead for DroppableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for DroppableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.dropped() {
            Some(e) => Poll::Ready(Err(e)),
            None => Pin::new(&mut self.inner).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.dropped() {
            Some(e) => Poll::Ready(Err(e)),
            None => Pin::new(&mut self.inner).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.dropped() {
            Some(e) => Poll::Ready(Err(e)),
            None => Pin::new(&mut self.inner).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn status_reply(reply: &Reply) -> Response<Body> {
    let mut builder = Response::builder();
    let body = match reply {
        Reply::Status {
            status,
            headers,
            body,
        } => {
            builder = builder.status(*status);
            // JSON unless the reply names its own type (a proxy's HTML page, say).
            if !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            {
                builder = builder.header("content-type", "application/json");
            }
            for (n, v) in headers {
                builder = builder.header(n.as_str(), v.as_str());
            }
            Body::from(body.clone())
        }
        // The handler has turned the connection's switch on: nothing of this is written.
        Reply::Close => Body::empty(),
        Reply::Stream(frames) => {
            builder = builder
                .status(StatusCode::OK)
                .header("content-type", "text/event-stream")
                .header("cache-control", "no-cache");
            Body::from_stream(frame_stream(frames.clone()))
        }
    };
    builder.body(body).unwrap_or_else(|e| {
        let mut r = Response::new(Body::from(format!("mock provider: bad reply: {e}")));
        *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        r
    })
}

fn frame_stream(
    frames: Vec<Frame>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures::stream::unfold(VecDeque::from(frames), |mut frames| async move {
        loop {
            match frames.pop_front()? {
                Frame::Bytes(text) => return Some((Ok(Bytes::from(text)), frames)),
                Frame::Pause(d) => tokio::time::sleep(d).await,
                Frame::Cut => {
                    // Let the server flush what was written (it writes when the body waits),
                    // so the cut comes after those bytes, mid-stream.
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    frames.clear();
                    let cut = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "cut");
                    return Some((Err(cut), frames));
                }
                Frame::Stall => std::future::pending::<()>().await,
            }
        }
    })
    .boxed()
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(switch): ConnectInfo<DropSwitch>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let path = uri.path().to_owned();
    let raw = String::from_utf8_lossy(&body).into_owned();
    let parsed: Option<Value> = serde_json::from_str(&raw).ok();
    let header_list: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let key = shared.key.lock().clone();
    let refusal = if path == "/v1/messages" {
        anthropic::check(
            key.as_deref(),
            header("x-api-key"),
            header("anthropic-version"),
            parsed.as_ref(),
        )
    } else {
        openai::check(key.as_deref(), header("authorization"), parsed.as_ref())
    };
    let refused = match &refusal {
        Some(Reply::Status { status, .. }) => Some(*status),
        _ => None,
    };
    shared.requests.lock().push(Recorded {
        path: path.clone(),
        headers: header_list,
        raw,
        body: parsed.unwrap_or(Value::Null),
        refused,
    });
    if let Some(reply) = refusal {
        return status_reply(&reply);
    }
    let next = shared.replies.lock().pop_front();
    let reply = next.unwrap_or_else(|| {
        if path == "/v1/messages" {
            anthropic::error(500, "api_error", "mock provider: no scripted reply left")
        } else {
            openai::error(
                500,
                "mock provider: no scripted reply left",
                "server_error",
                None,
            )
        }
    });
    if reply == Reply::Close {
        switch.0.store(true, Ordering::SeqCst);
    }
    status_reply(&reply)
}
