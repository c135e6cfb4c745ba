//! Reading a window of lines from a file too large to read whole: the file is streamed once
//! (constant memory), the requested lines kept, every line counted and every byte hashed, so
//! the page carries the same version a whole read would.
//!
//! Guarantees: at most `limit` lines and about `max_bytes` of text are kept, each line cut to
//! what a read shows ([`text::shown_line`]); a NUL byte anywhere or invalid UTF-8 in a kept
//! line is `FS_NOT_TEXT`, as for a whole read.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{blocking, open_regular, shown};
use crate::error::FsError;
use crate::seam::Workspace;
use crate::text::{self, MAX_LINE_CHARS};
use crate::version::FileVersion;

/// Bytes of one line kept before it is cut (a shown line has at most
/// [`MAX_LINE_CHARS`] characters of up to four bytes).
const LINE_KEEP: usize = MAX_LINE_CHARS * 4 + 4;

/// A window of a file's lines.
#[derive(Clone, Debug)]
pub struct LinePage {
    /// The resolved path.
    pub path: PathBuf,
    /// `(1-based number, text as shown)` of each kept line.
    pub lines: Vec<(u64, String)>,
    /// The file's line count.
    pub total: u64,
    /// The version of the bytes streamed.
    pub version: FileVersion,
}

impl Workspace {
    /// Lines `offset..` (1-based) of `path`, at most `limit` of them and about `max_bytes` of
    /// text, read by streaming the file whatever its size.
    pub async fn read_lines(
        &self,
        path: &Path,
        offset: u64,
        limit: u64,
        max_bytes: usize,
    ) -> Result<LinePage, FsError> {
        self.inner.stats.fetch_add(1, Ordering::Relaxed);
        let roots = self.inner.roots.clone();
        let path = path.to_path_buf();
        blocking(move || {
            let path = roots.resolve_here(&path)?;
            let (file, meta) = open_regular("read", &path)?;
            let (lines, total, hash) = scan(&path, file, offset.max(1), limit, max_bytes)?;
            Ok(LinePage {
                version: FileVersion::with_hash(&meta, hash),
                path,
                lines,
                total,
            })
        })
        .await
    }
}

type Scanned = (Vec<(u64, String)>, u64, u64);

fn scan(
    path: &Path,
    file: std::fs::File,
    offset: u64,
    limit: u64,
    max_bytes: usize,
) -> Result<Scanned, FsError> {
    let not_text = |why: String| FsError::NotText {
        op: "read",
        path: Arc::from(shown(path)),
        why: Arc::from(why),
    };
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut kept: Vec<(u64, String)> = Vec::new();
    let mut used = 0usize;
    let mut full = false;
    let mut line_no: u64 = 1;
    let mut current: Vec<u8> = Vec::new();
    let mut in_line = false;
    let mut at: u64 = 0;
    let mut keep = |no: u64, bytes: &[u8], kept: &mut Vec<(u64, String)>, full: &mut bool| {
        if *full || no < offset {
            return Ok(());
        }
        if kept.len() as u64 >= limit {
            *full = true;
            return Ok(());
        }
        let text = match std::str::from_utf8(bytes) {
            Ok(t) => t,
            // A line cut at LINE_KEEP may end inside a character.
            Err(e) if bytes.len() >= LINE_KEEP && e.error_len().is_none() => {
                std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default()
            }
            Err(e) => {
                return Err(format!(
                    "invalid UTF-8 in line {no} (byte {} of the line)",
                    e.valid_up_to()
                ));
            }
        };
        let shown_line = text::shown_line(text);
        used += shown_line.len() + 1;
        if used > max_bytes && !kept.is_empty() {
            *full = true;
            return Ok(());
        }
        kept.push((no, shown_line));
        Ok(())
    };
    loop {
        let buf = reader
            .fill_buf()
            .map_err(|e| FsError::io("read", &shown(path), &e))?;
        if buf.is_empty() {
            break;
        }
        hasher.update(buf);
        if let Some(i) = buf.iter().position(|b| *b == 0) {
            return Err(not_text(format!(
                "it contains a NUL byte at offset {}",
                at + i as u64
            )));
        }
        let wanted = !full && line_no >= offset;
        let mut rest = buf;
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            if !full && line_no >= offset {
                let room = LINE_KEEP.saturating_sub(current.len());
                current.extend_from_slice(&rest[..nl.min(room)]);
                keep(line_no, &current, &mut kept, &mut full).map_err(not_text)?;
            }
            current.clear();
            in_line = false;
            line_no += 1;
            rest = &rest[nl + 1..];
        }
        if !rest.is_empty() {
            in_line = true;
            if wanted || (!full && line_no >= offset) {
                let room = LINE_KEEP.saturating_sub(current.len());
                current.extend_from_slice(&rest[..rest.len().min(room)]);
            }
        }
        let n = buf.len();
        at += n as u64;
        reader.consume(n);
    }
    if in_line {
        keep(line_no, &current, &mut kept, &mut full).map_err(not_text)?;
    } else {
        line_no -= 1;
    }
    Ok((kept, line_no, hasher.digest()))
}
