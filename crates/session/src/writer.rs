//! The durable store's writer thread: group commit (spec L3).
//!
//! Guarantees: appends are written in seq order; every append waiting when a group starts is
//! written with it and made durable by ONE sync; no member of a group is acknowledged before
//! that sync succeeds; if a write or sync fails, the file is cut back to its last durable
//! length, every member of the group gets the error, and every later append is refused, so
//! the file holds exactly the acknowledged events. When fewer appends are queued than the
//! previous group held, a group waits up to [`GATHER_WAIT`] for the others (concurrent appenders
//! just woken by the previous acknowledgement); a lone appender never waits.

use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::error::SessionError;
use crate::event::Event;
use crate::session::Shared;

/// Most appends in one group.
const MAX_GROUP: usize = 4096;
/// Most bytes in one group (a single larger line still forms its own group).
const MAX_GROUP_BYTES: usize = 8 << 20;
/// How long a group may wait for more appends when fewer are queued than the previous group
/// held: with concurrent appenders, the rest are usually callers just woken by the previous
/// group's acknowledgement, and syncing without them halves the appends per sync. A lone
/// appender (previous group of one) never waits.
const GATHER_WAIT: Duration = Duration::from_micros(200);

/// Where a durable session writes its lines.
///
/// The JSON Lines file store is one; a host may supply another (a different medium, or a
/// fault-injecting one in tests). Calls come from one dedicated thread, never from an async task.
pub trait LogSink: Send + 'static {
    /// Appends `bytes` (whole lines) and returns only once they are durable.
    fn append_durably(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    /// Cuts the log back to `len` bytes after a failed append (best effort).
    fn truncate(&mut self, len: u64) -> std::io::Result<()>;
}

/// The JSON Lines file as a sink: `write_all` then `fdatasync`.
pub(crate) struct FileSink {
    pub file: std::fs::File,
}

impl LogSink for FileSink {
    fn append_durably(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes)?;
        self.file.sync_data()
    }

    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)?;
        self.file.seek(SeekFrom::Start(len))?;
        self.file.sync_data()
    }
}

/// One append waiting to be written.
pub(crate) struct WriteReq {
    pub seq: u64,
    pub event: Arc<Event>,
    pub line: Vec<u8>,
    pub ack: oneshot::Sender<Result<u64, SessionError>>,
}

/// A message to the writer thread.
pub(crate) enum Msg {
    /// Write one append.
    Write(WriteReq),
    /// Write everything before this message, then release the sink and answer.
    Close(oneshot::Sender<()>),
}

/// Starts the writer thread for `sink`, whose durable length is `len` bytes. `first` is written
/// before any append (a new header), as the first group.
pub(crate) fn spawn(
    sink: Box<dyn LogSink>,
    len: u64,
    first: Option<Vec<u8>>,
    path: Option<PathBuf>,
    shared: Arc<Shared>,
) -> std::io::Result<Sender<Msg>> {
    let (tx, rx) = channel();
    std::thread::Builder::new()
        .name("dsh-session-writer".to_owned())
        .spawn(move || {
            let mut writer = Writer {
                sink,
                len,
                poisoned: None,
                path,
                shared,
            };
            if let Some(bytes) = first {
                writer.write_raw(&bytes);
            }
            writer.run(rx);
        })?;
    Ok(tx)
}

struct Writer {
    sink: Box<dyn LogSink>,
    len: u64,
    poisoned: Option<String>,
    path: Option<PathBuf>,
    shared: Arc<Shared>,
}

impl Writer {
    fn run(mut self, rx: Receiver<Msg>) {
        let mut last_group = 0usize;
        while let Ok(first) = rx.recv() {
            let mut group = Vec::new();
            let mut bytes = 0usize;
            let mut close = None;
            let mut next = Some(first);
            let mut deadline: Option<Instant> = None;
            while let Some(msg) = next {
                match msg {
                    Msg::Write(req) => {
                        bytes += req.line.len();
                        group.push(req);
                    }
                    Msg::Close(ack) => {
                        close = Some(ack);
                        break;
                    }
                }
                if group.len() >= MAX_GROUP || bytes >= MAX_GROUP_BYTES {
                    break;
                }
                next = rx.try_recv().ok();
                if next.is_none() && group.len() < last_group {
                    let until = *deadline.get_or_insert_with(|| Instant::now() + GATHER_WAIT);
                    let left = until.saturating_duration_since(Instant::now());
                    // A timeout or a closed channel ends the group with what it has.
                    next = rx.recv_timeout(left).ok();
                }
            }
            last_group = group.len();
            if !group.is_empty() {
                self.write_group(group, bytes);
            }
            if let Some(ack) = close {
                drop(self.sink);
                let _ = ack.send(());
                return;
            }
        }
    }

    /// Writes bytes that no append waits for (a new header); a failure poisons the session.
    fn write_raw(&mut self, bytes: &[u8]) {
        if let Err(e) = self.sink.append_durably(bytes) {
            self.fail(&Arc::new(e));
        } else {
            self.len += bytes.len() as u64;
        }
    }

    fn fail(&mut self, error: &Arc<std::io::Error>) {
        let _ = self.sink.truncate(self.len);
        let place = self
            .path
            .as_ref()
            .map(|p| format!(" ({})", p.display()))
            .unwrap_or_default();
        let reason = format!("{error}{place}");
        tracing::error!(error = %reason, "session log write failed; the session accepts no more appends");
        self.shared.poison(reason.clone());
        self.poisoned = Some(reason);
    }

    fn write_group(&mut self, group: Vec<WriteReq>, bytes: usize) {
        if let Some(reason) = &self.poisoned {
            for req in group {
                let _ = req.ack.send(Err(SessionError::Poisoned(reason.clone())));
            }
            return;
        }
        let mut buf = Vec::with_capacity(bytes);
        for req in &group {
            buf.extend_from_slice(&req.line);
        }
        match self.sink.append_durably(&buf) {
            Ok(()) => {
                self.len += buf.len() as u64;
                self.shared
                    .commit(group.iter().map(|r| (r.seq, r.event.clone())));
                for req in group {
                    let _ = req.ack.send(Ok(req.seq));
                }
            }
            Err(e) => {
                let error = Arc::new(e);
                self.fail(&error);
                for req in group {
                    let _ = req.ack.send(Err(SessionError::Write(error.clone())));
                }
            }
        }
    }
}
