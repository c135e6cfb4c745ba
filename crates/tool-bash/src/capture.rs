//! Output capture: each stream keeps a bounded tail in memory (what the model may see) and is
//! spooled to a file (what a truncated result points to), up to a byte limit.
//!
//! A stream is spooled only once it outgrows its tail: until then memory holds every byte it
//! produced, so a call whose output fits opens, writes and removes no file at all. When the
//! output as a whole is truncated, [`SpoolPaths::keep`] writes what is still only in memory.
//!
//! Guarantees: memory per stream is at most twice the tail size whatever the command prints;
//! the spool stops growing at its limit (the rest is counted, not written); what was captured is
//! readable at any time, so a killed command still reports its output so far; a spool that
//! could not be written is reported, never passed off as the full output.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// What one stream produced so far.
#[derive(Debug, Default)]
pub struct StreamState {
    tail: Vec<u8>,
    keep: usize,
    total: u64,
    spooled: u64,
    spool_opened: bool,
    spool_error: Option<String>,
}

impl StreamState {
    fn new(keep: usize) -> StreamState {
        StreamState {
            keep,
            ..StreamState::default()
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        self.tail.extend_from_slice(chunk);
        // Trim only when the buffer is twice the tail: amortized O(1) per byte.
        if self.tail.len() > self.keep.saturating_mul(2).max(4096) {
            let cut = self.tail.len() - self.keep;
            self.tail.drain(..cut);
        }
    }

    /// The last `n` bytes captured (fewer if fewer were kept).
    pub fn tail(&self, n: usize) -> &[u8] {
        let start = self.tail.len().saturating_sub(n);
        &self.tail[start..]
    }

    /// Every byte the stream produced.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether everything produced is in memory.
    pub fn complete_in_memory(&self) -> bool {
        self.total == self.tail.len() as u64
    }
}

/// A shared handle on one stream's state.
pub type SharedStream = Arc<Mutex<StreamState>>;

/// A new stream state keeping a tail of `keep` bytes.
pub fn stream(keep: usize) -> SharedStream {
    Arc::new(Mutex::new(StreamState::new(keep)))
}

/// Where one stream spools, and up to how many bytes. The file is created on first use.
#[derive(Debug)]
pub struct Spool {
    path: PathBuf,
    limit: u64,
    file: Option<tokio::fs::File>,
}

impl Spool {
    /// A spool into `path` (not created yet) holding at most `limit` bytes.
    pub fn new(path: PathBuf, limit: u64) -> Spool {
        Spool {
            path,
            limit,
            file: None,
        }
    }

    /// Writes as much of `chunk` as the limit allows; on failure records why and stops.
    async fn write(&mut self, state: &SharedStream, chunk: &[u8]) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let room = self.limit.saturating_sub(state.lock().spooled);
        let take = usize::try_from(room).unwrap_or(usize::MAX).min(chunk.len());
        if take == 0 {
            return;
        }
        match file.write_all(&chunk[..take]).await {
            Ok(()) => state.lock().spooled += take as u64,
            Err(e) => {
                state.lock().spool_error = Some(e.to_string());
                self.file = None;
            }
        }
    }

    /// Creates the file (and its private directory) and writes what memory holds so far,
    /// which is everything the stream produced: it has not outgrown its tail yet.
    async fn open(&mut self, state: &SharedStream) {
        state.lock().spool_opened = true;
        let opened = async {
            if let Some(dir) = self.path.parent() {
                private_dir_async(dir).await?;
            }
            tokio::fs::File::create(&self.path).await
        };
        match opened.await {
            Ok(file) => {
                self.file = Some(file);
                let held = state.lock().tail.clone();
                self.write(state, &held).await;
            }
            Err(e) => state.lock().spool_error = Some(e.to_string()),
        }
    }
}

/// Reads `reader` to its end into `state`, spooling through `spool` once the stream outgrows
/// the tail `state` keeps.
pub async fn pump(
    mut reader: impl AsyncRead + Unpin,
    state: SharedStream,
    mut spool: Option<Spool>,
) {
    // A pipe holds 64 KiB: one read takes whatever the writer managed to put in it.
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        if let Some(spool) = spool.as_mut() {
            let outgrows = {
                let st = state.lock();
                !st.spool_opened && st.total + n as u64 > st.keep as u64
            };
            if outgrows {
                spool.open(&state).await;
            }
        }
        state.lock().push(chunk);
        if let Some(spool) = spool.as_mut() {
            spool.write(&state, chunk).await;
        }
    }
    if let Some(mut file) = spool.and_then(|s| s.file)
        && let Err(e) = file.flush().await
    {
        state.lock().spool_error = Some(e.to_string());
    }
}

/// Creates `dir` (and its parents) for outputs, which may hold secrets: the user's alone.
async fn private_dir_async(dir: &Path) -> std::io::Result<()> {
    tokio::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .await
}

fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The files one call spools to: stdout into the file that becomes the full-output file, stderr
/// into a side file appended to it at the end.
#[derive(Clone, Debug)]
pub struct SpoolPaths {
    /// The full-output file (stdout is spooled here directly).
    pub full: PathBuf,
    /// stderr's spool, appended to `full` under `[stderr]` if the output was truncated.
    pub stderr: PathBuf,
}

/// What [`SpoolPaths::keep`] needs of one stream: what was spooled, or the bytes memory holds.
enum Held {
    /// The stream spooled to its file.
    Spooled(u64),
    /// Every byte the stream produced is in memory (up to the spool limit).
    Memory(Vec<u8>),
}

impl Held {
    fn of(stream: &SharedStream, limit: u64) -> Result<Held, String> {
        let st = stream.lock();
        if let Some(e) = &st.spool_error {
            return Err(e.clone());
        }
        if st.spool_opened {
            return Ok(Held::Spooled(st.spooled));
        }
        if !st.complete_in_memory() {
            return Err("output outgrew memory before it could be spooled".to_owned());
        }
        // The spool keeps the first `limit` bytes.
        let take = usize::try_from(limit).unwrap_or(usize::MAX);
        Ok(Held::Memory(st.tail[..take.min(st.tail.len())].to_vec()))
    }
}

impl SpoolPaths {
    /// Paths in `dir` for a call named `stem`.
    pub fn new(dir: &Path, stem: &str) -> SpoolPaths {
        SpoolPaths {
            full: dir.join(format!("{stem}.log")),
            stderr: dir.join(format!("{stem}.stderr.part")),
        }
    }

    /// Spools for stdout and stderr, each holding at most `limit` bytes.
    pub fn spools(&self, limit: u64) -> (Spool, Spool) {
        (
            Spool::new(self.full.clone(), limit),
            Spool::new(self.stderr.clone(), limit),
        )
    }

    /// Keeps the full output of `stdout` and `stderr` (spooled with `limit`): the full file
    /// holds stdout, then `[stderr]` and stderr if it printed anything. `Err` when a spool
    /// failed: no partial file is passed off as the full output.
    pub async fn keep(
        &self,
        stdout: &SharedStream,
        stderr: &SharedStream,
        limit: u64,
    ) -> std::io::Result<PathBuf> {
        let out = Held::of(stdout, limit).map_err(std::io::Error::other);
        let err = Held::of(stderr, limit).map_err(std::io::Error::other);
        let paths = self.clone();
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let kept = (|| {
                let (out, err) = (out?, err?);
                let mut full = match out {
                    Held::Spooled(_) => {
                        std::fs::OpenOptions::new().append(true).open(&paths.full)?
                    }
                    Held::Memory(bytes) => {
                        if let Some(dir) = paths.full.parent() {
                            private_dir(dir)?;
                        }
                        let mut f = std::fs::File::create(&paths.full)?;
                        f.write_all(&bytes)?;
                        f
                    }
                };
                match err {
                    Held::Spooled(0) => {}
                    Held::Memory(bytes) if bytes.is_empty() => {}
                    Held::Spooled(_) => {
                        full.write_all(b"\n[stderr]\n")?;
                        std::io::copy(&mut std::fs::File::open(&paths.stderr)?, &mut full)?;
                    }
                    Held::Memory(bytes) => {
                        full.write_all(b"\n[stderr]\n")?;
                        full.write_all(&bytes)?;
                    }
                }
                Ok(paths.full.clone())
            })();
            let _ = std::fs::remove_file(&paths.stderr);
            if kept.is_err() {
                let _ = std::fs::remove_file(&paths.full);
            }
            kept
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Drops the spool files that were opened (the output fit in the result, or nothing ran).
    pub async fn discard(&self, stdout: &SharedStream, stderr: &SharedStream) {
        if stdout.lock().spool_opened {
            let _ = tokio::fs::remove_file(&self.full).await;
        }
        if stderr.lock().spool_opened {
            let _ = tokio::fs::remove_file(&self.stderr).await;
        }
    }
}
