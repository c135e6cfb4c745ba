//! Splitting a JSON Lines log into numbered lines and reading each one, and the strict reader
//! [`read_log`].
//!
//! Guarantees: every failure names its 1-based file line; non-UTF-8 bytes, bad JSON, 10 MB lines
//! and deep nesting are errors or values, never panics or stack overflows; blank lines are
//! skipped and occupy no seq.

use crate::error::SessionError;
use crate::event::Event;
use crate::header::{Header, HeaderError};
use crate::scan::Scratch;

/// One line of a file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawLine<'a> {
    /// 1-based line number.
    pub number: usize,
    /// Byte offset of the line's first byte.
    pub start: usize,
    /// The line's bytes, without the newline.
    pub bytes: &'a [u8],
    /// Whether a newline ends the line (false only for the last line of a file).
    pub terminated: bool,
}

impl RawLine<'_> {
    /// Byte offset just past the line and its newline.
    pub fn end(&self) -> usize {
        self.start + self.bytes.len() + usize::from(self.terminated)
    }

    /// Whether the line holds only whitespace.
    pub fn is_blank(&self) -> bool {
        self.bytes.iter().all(u8::is_ascii_whitespace)
    }
}

/// Iterates over the lines of a file.
pub(crate) fn lines(bytes: &[u8]) -> impl Iterator<Item = RawLine<'_>> {
    let mut start = 0usize;
    let mut number = 0usize;
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        number += 1;
        let rest = &bytes[start..];
        let line = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => RawLine {
                number,
                start,
                bytes: &rest[..i],
                terminated: true,
            },
            None => RawLine {
                number,
                start,
                bytes: rest,
                terminated: false,
            },
        };
        start = line.end();
        Some(line)
    })
}

fn utf8(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|e| {
        format!(
            "not valid UTF-8 (bad byte at offset {} of the line)",
            e.valid_up_to()
        )
    })
}

/// Reads an event line, reusing `scratch` (see [`Event::from_json_line`]).
pub(crate) fn parse_event(bytes: &[u8], scratch: &mut Scratch) -> Result<Event, String> {
    Event::read_line(utf8(bytes)?, scratch)
}

/// Reads a header line.
pub(crate) fn parse_header(bytes: &[u8]) -> Result<Header, HeaderError> {
    Header::from_json_line(utf8(bytes).map_err(HeaderError::Json)?)
}

/// A log read in full: its header and its events with their seqs and file lines.
#[derive(Clone, Debug)]
pub struct Log {
    /// The header, absent only for an empty file.
    pub header: Option<Header>,
    /// Every event with its seq.
    pub events: Vec<crate::Entry>,
    /// The 1-based file line of each event (parallel to `events`).
    pub lines: Vec<usize>,
}

impl Log {
    /// The seq the next event would get.
    pub fn next_seq(&self) -> u64 {
        self.events
            .last()
            .map(|(s, e)| s + e.seq_span())
            .unwrap_or(0)
    }
}

/// Reads a whole log strictly: any line that does not read, including a torn last line, is an
/// error naming its line. Nothing is repaired (see [`crate::repair_bytes`] for that).
pub fn read_log(bytes: &[u8]) -> Result<Log, SessionError> {
    let mut log = Log {
        header: None,
        events: Vec::new(),
        lines: Vec::new(),
    };
    let mut seq = 0u64;
    let mut scratch = Scratch::default();
    for line in lines(bytes) {
        if line.is_blank() {
            continue;
        }
        if log.header.is_none() {
            let header = parse_header(line.bytes).map_err(|e| header_error(line.number, e))?;
            log.header = Some(header);
            continue;
        }
        let event =
            parse_event(line.bytes, &mut scratch).map_err(|message| SessionError::Corrupt {
                line: line.number,
                message,
            })?;
        let span = event.seq_span();
        log.events.push((seq, event));
        log.lines.push(line.number);
        seq += span;
    }
    Ok(log)
}

/// Turns a header problem into the error for line `line`.
pub(crate) fn header_error(line: usize, e: HeaderError) -> SessionError {
    match e {
        HeaderError::UnknownVersion(version) if line == 1 => {
            SessionError::UnknownVersion { version }
        }
        other => SessionError::Corrupt {
            line,
            message: other.to_string(),
        },
    }
}
