//! The durable store's writer thread: group commit (spec L3).
//!
//! Guarantees: appends are written in seq order; every append waiting when a group starts is
//! written with it (up to the group limits) and made durable by ONE sync; no member of a group is
//! acknowledged before that sync succeeds; if a write or sync fails, the file is cut back to its
//! last durable length, every member of the group gets the error, and every later append is
//! refused, so the file holds exactly the acknowledged events. After a group of n appends is
//! acknowledged, the next group waits until n appends are queued (concurrent appenders just
//! woken by that acknowledgement), at most 200 µs after its first append arrived, and for
//! n + m during the first 40 µs when m appends were queued while the group was written; a lone
//! appender never waits, and neither does an append arriving after the appenders went idle
//! ([`crate::queue::Rules`]). A group's answers cost the writer one cross-thread wake-up: it
//! wakes one member, which wakes the others from the runtime's thread ([`crate::ack`]).

use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::ack::{self, AckTx, Leader};
use crate::error::SessionError;
use crate::event::Event;
use crate::queue::{Next, Target, WriteQueue};
use crate::session::Shared;
use crate::sink::{Lines, LogSink};

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
    pub event: Event,
    pub line: Vec<u8>,
    pub ack: AckTx,
}

/// Starts the writer thread for `sink`, whose durable length is `len` bytes. `first` is written
/// before any append (a new header), as the first group.
pub(crate) fn spawn(
    sink: Box<dyn LogSink>,
    len: u64,
    first: Option<Vec<u8>>,
    path: Option<PathBuf>,
    shared: Arc<Shared>,
) -> std::io::Result<Arc<WriteQueue>> {
    let queue = Arc::new(WriteQueue::default());
    let stop = Stop(queue.clone());
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
            writer.run(&stop.0);
        })?;
    Ok(queue)
}

/// Marks the queue stopped when the writer thread ends, however it ends.
struct Stop(Arc<WriteQueue>);

impl Drop for Stop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

struct Writer {
    sink: Box<dyn LogSink>,
    len: u64,
    poisoned: Option<String>,
    path: Option<PathBuf>,
    shared: Arc<Shared>,
}

impl Writer {
    fn run(mut self, queue: &WriteQueue) {
        let alone = Target {
            appends: 1,
            queued: 0,
        };
        let mut target = alone;
        let mut acked = Instant::now();
        // The appender the last acknowledgement woke; dropping it wakes any of that group it has
        // not woken yet, so it is dropped once the next group is taken or none came.
        let mut leader: Option<Leader> = None;
        loop {
            let Some(next) = queue.next_after(target, acked) else {
                drop(leader.take());
                queue.wait();
                target = alone;
                continue;
            };
            drop(leader.take());
            match next {
                Next::Group(group, bytes) => {
                    // The next group waits for the appenders that were waiting for this one:
                    // they come back with their next append. Appends whose callers were not
                    // waiting yet (a caller that appends several events, then waits for the
                    // last) bring nobody back, and a group that waited for them would only
                    // sit out the gathering time.
                    // Appends queued while this group was written go with the next group: it
                    // waits a little for both ([`crate::queue::Rules::merge`]).
                    let (answered, queued) = self.write_group(group, bytes, queue);
                    target = Target {
                        appends: answered.waiting.max(1),
                        queued: if answered.waiting == 0 { 0 } else { queued },
                    };
                    leader = answered.leader;
                    acked = Instant::now();
                }
                Next::Close(ack) => {
                    drop(self.sink);
                    let _ = ack.send(());
                    return;
                }
                Next::HungUp => return,
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
        // Every waiting append, and every later one, is answered with this reason (the caller
        // says it): not said a second time here.
        tracing::debug!(error = %reason, "session log write failed; the session accepts no more appends");
        self.shared.poison(reason.clone());
        self.poisoned = Some(reason);
    }

    /// Writes and syncs one group, then answers its members. Also returns how many appends
    /// were queued once the group was durable, before any member was answered (so none of
    /// them is counted).
    fn write_group(
        &mut self,
        group: Vec<WriteReq>,
        bytes: usize,
        queue: &WriteQueue,
    ) -> (ack::Acked, usize) {
        if let Some(reason) = &self.poisoned {
            let error = SessionError::Poisoned(reason.clone());
            let acked = ack::acknowledge(group.into_iter().map(|r| (r.ack, Err(error.clone()))));
            return (acked, 0);
        }
        let mut buf = Vec::with_capacity(bytes);
        for req in &group {
            buf.extend_from_slice(&req.line);
        }
        match self.sink.append_lines(&Lines::group(&group, &buf)) {
            Ok(()) => {
                self.len += buf.len() as u64;
                self.shared
                    .commit(group.iter().map(|r| (r.seq, r.event.clone())));
                let queued = queue.queued();
                let acked = ack::acknowledge(group.into_iter().map(|r| (r.ack, Ok(r.seq))));
                (acked, queued)
            }
            Err(e) => {
                let error = Arc::new(e);
                self.fail(&error);
                let acked = ack::acknowledge(
                    group
                        .into_iter()
                        .map(|r| (r.ack, Err(SessionError::Write(error.clone())))),
                );
                (acked, 0)
            }
        }
    }
}
