//! Output capture: each stream keeps a bounded tail in memory (what the model may see) and is
//! spooled to a file as it arrives (what a truncated result points to), up to a byte limit.
//!
//! Guarantees: memory per stream is at most twice the tail size whatever the command prints;
//! the spool stops growing at its limit (the rest is counted, not written); what was captured is
//! readable at any time, so a killed command still reports its output so far.

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

    /// Bytes written to the spool.
    pub fn spooled(&self) -> u64 {
        self.spooled
    }

    /// Why the spool stopped, if it failed.
    pub fn spool_error(&self) -> Option<&str> {
        self.spool_error.as_deref()
    }
}

/// A shared handle on one stream's state.
pub type SharedStream = Arc<Mutex<StreamState>>;

/// A new stream state keeping a tail of `keep` bytes.
pub fn stream(keep: usize) -> SharedStream {
    Arc::new(Mutex::new(StreamState::new(keep)))
}

/// Reads `reader` to its end into `state`, spooling to `spool` up to `limit` bytes.
pub async fn pump(
    mut reader: impl AsyncRead + Unpin,
    state: SharedStream,
    mut spool: Option<tokio::fs::File>,
    limit: u64,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        state.lock().push(chunk);
        if let Some(file) = spool.as_mut() {
            let room = limit.saturating_sub(state.lock().spooled);
            let take = usize::try_from(room).unwrap_or(usize::MAX).min(n);
            if take > 0 {
                match file.write_all(&chunk[..take]).await {
                    Ok(()) => state.lock().spooled += take as u64,
                    Err(e) => {
                        state.lock().spool_error = Some(e.to_string());
                        spool = None;
                    }
                }
            }
        }
    }
    if let Some(mut file) = spool
        && let Err(e) = file.flush().await
    {
        state.lock().spool_error = Some(e.to_string());
    }
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

impl SpoolPaths {
    /// Paths in `dir` for a call named `stem`.
    pub fn new(dir: &Path, stem: &str) -> SpoolPaths {
        SpoolPaths {
            full: dir.join(format!("{stem}.log")),
            stderr: dir.join(format!("{stem}.stderr.part")),
        }
    }

    /// Opens both spool files (creating the directory).
    pub async fn open(&self) -> std::io::Result<(tokio::fs::File, tokio::fs::File)> {
        if let Some(dir) = self.full.parent() {
            // Outputs may hold secrets: the directory is the user's alone.
            tokio::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .await?;
        }
        let out = tokio::fs::File::create(&self.full).await?;
        let err = tokio::fs::File::create(&self.stderr).await?;
        Ok((out, err))
    }

    /// Keeps the full output: appends `[stderr]` and the stderr spool (if any) to the full file.
    pub async fn keep(&self, stderr_bytes: u64) -> std::io::Result<PathBuf> {
        let paths = self.clone();
        tokio::task::spawn_blocking(move || {
            if stderr_bytes > 0 {
                let mut full = std::fs::OpenOptions::new().append(true).open(&paths.full)?;
                let mut err = std::fs::File::open(&paths.stderr)?;
                use std::io::Write;
                full.write_all(b"\n[stderr]\n")?;
                std::io::copy(&mut err, &mut full)?;
            }
            let _ = std::fs::remove_file(&paths.stderr);
            Ok(paths.full)
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Drops both spool files (the output fit in the result).
    pub async fn discard(&self) {
        let _ = tokio::fs::remove_file(&self.full).await;
        let _ = tokio::fs::remove_file(&self.stderr).await;
    }
}
