//! The store seam (spec L1, L3, I4): where a durable session's lines go, and how a session is
//! resumed from a log kept somewhere other than a local file.
//!
//! Guarantees the session gives every sink: [`LogSink::append_lines`] is called from one
//! dedicated thread, never from an async task, with whole canonical lines in seq order, without
//! gap or duplicate (each group starts at the seq after the previous group's last line); no
//! append of a group is acknowledged before the call returns `Ok`; after an `Err` the session
//! accepts no more appends, so a sink never sees a group after a failed one. A sink owes the
//! session: `Ok` only once every line of the group is durable, and a group is all-or-nothing as
//! seen by a later reader (the file store cuts a failed group off with [`LogSink::truncate`]; a
//! database commits the group in one transaction).
//!
//! The JSON Lines file is the default sink and uses only [`LogSink::append_durably`] (one write
//! and one `fdatasync` per group): the seam costs it nothing. A sink that keys lines by seq (a
//! database) overrides [`LogSink::append_lines`].

use std::sync::Arc;

use crate::error::SessionError;
use crate::invariant::InvariantChecker;
use crate::jsonl::OpenOptions;
use crate::repair::{self, RepairReport};
use crate::session::{Resume, Session};
use crate::writer::WriteReq;

/// Where a durable session writes its lines.
///
/// The JSON Lines file store is one; a host may supply another (a database, a different
/// medium, or a fault-injecting one in tests). Calls come from one dedicated thread, never from
/// an async task.
pub trait LogSink: Send + 'static {
    /// Appends `bytes` (whole lines) and returns only once they are durable.
    fn append_durably(&mut self, bytes: &[u8]) -> std::io::Result<()>;

    /// Cuts the log back to `len` bytes after a failed append (best effort).
    fn truncate(&mut self, len: u64) -> std::io::Result<()>;

    /// Appends one group of lines, each with its seq, and returns only once all are durable.
    /// The default writes [`Lines::bytes`] with [`LogSink::append_durably`].
    fn append_lines(&mut self, lines: &Lines<'_>) -> std::io::Result<()> {
        self.append_durably(lines.bytes())
    }
}

/// One group of whole lines handed to a sink: their bytes back to back (each line ends with
/// its newline) and, for each line, its seq and how many seqs it occupies.
pub struct Lines<'a> {
    bytes: &'a [u8],
    items: Items<'a>,
}

enum Items<'a> {
    /// Appends of the writer thread.
    Group(&'a [WriteReq]),
    /// Lines written by repair: `(seq, span, bytes with newline)`.
    Listed(&'a [(u64, u64, usize)]),
}

/// One line of a [`Lines`] group.
#[derive(Clone, Copy, Debug)]
pub struct Line<'a> {
    /// The seq of the line's (first) event.
    pub seq: u64,
    /// How many seqs the line occupies (more than 1 only for a `*-chunks` run).
    pub span: u64,
    /// The canonical line text, without its newline (UTF-8 JSON).
    pub text: &'a [u8],
}

impl<'a> Lines<'a> {
    pub(crate) fn group(reqs: &'a [WriteReq], bytes: &'a [u8]) -> Lines<'a> {
        Lines {
            bytes,
            items: Items::Group(reqs),
        }
    }

    /// All the lines' bytes, each line with its newline.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// How many lines the group holds.
    pub fn len(&self) -> usize {
        match self.items {
            Items::Group(reqs) => reqs.len(),
            Items::Listed(items) => items.len(),
        }
    }

    /// Whether the group holds no line.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The seq of the first line (`None` for an empty group).
    pub fn first_seq(&self) -> Option<u64> {
        self.iter().next().map(|l| l.seq)
    }

    /// The seq after the last line: the first seq of the next group.
    pub fn end_seq(&self) -> Option<u64> {
        match self.items {
            Items::Group(reqs) => reqs.last().map(|r| r.seq + r.event.seq_span()),
            Items::Listed(items) => items.last().map(|(seq, span, _)| seq + span),
        }
    }

    /// The lines in seq order.
    pub fn iter(&self) -> impl Iterator<Item = Line<'a>> + '_ {
        let bytes = self.bytes;
        let mut at = 0usize;
        let mut index = 0usize;
        std::iter::from_fn(move || {
            let (seq, span, len) = match self.items {
                Items::Group(reqs) => {
                    let r = reqs.get(index)?;
                    (r.seq, r.event.seq_span(), r.line.len())
                }
                Items::Listed(items) => *items.get(index)?,
            };
            index += 1;
            let line = bytes.get(at..at + len)?;
            at += len;
            let text = line.strip_suffix(b"\n").unwrap_or(line);
            Some(Line { seq, span, text })
        })
    }
}

impl Session {
    /// Resumes a session kept by a custom sink (a database): `log` is the whole log as a file
    /// would hold it (the header line, then every event line, each with its newline). Crash
    /// repair is planned as for a file (spec I4) and the events it adds are written through
    /// `sink` (one group, with their seqs) before the session is returned. Returns what repair
    /// did.
    ///
    /// Refused without writing anything: a line that is not an event (the error names its
    /// line; line 1 is the header), an unknown header version, a missing newline on the last
    /// line, and (with [`OpenOptions::strict`]) pairing problems. Blocking: call it from a
    /// blocking thread.
    pub fn resume_with_sink(
        log: &[u8],
        mut sink: impl LogSink,
        options: OpenOptions,
    ) -> Result<(Session, RepairReport), SessionError> {
        let plan = repair::plan(log)?;
        if plan.keep_len != log.len() || plan.report.added_newline {
            let line = plan.report.torn_tail.as_ref().map_or(1, |t| t.line);
            return Err(SessionError::Corrupt {
                line,
                message: "the line is not a whole event (the log must end with a newline)"
                    .to_owned(),
            });
        }
        if options.is_strict() && !plan.problems.is_empty() {
            return Err(SessionError::Invalid {
                problems: plan.problems,
            });
        }
        let Some(header) = plan.header else {
            return Err(SessionError::Corrupt {
                line: 1,
                message: "the log has no header".to_owned(),
            });
        };
        let invariants = if options.has_invariants() {
            Some(InvariantChecker::seeded(
                plan.events.iter().map(|(_, e)| e),
            )?)
        } else {
            None
        };
        let appended: &[crate::Entry] = &plan.events[plan.events.len() - plan.appended..];
        let mut bytes = Vec::new();
        let mut listed = Vec::with_capacity(appended.len());
        for (seq, event) in appended {
            let before = bytes.len();
            event.write_line(&mut bytes);
            listed.push((*seq, event.seq_span(), bytes.len() - before));
        }
        if !listed.is_empty() {
            let lines = Lines {
                bytes: &bytes,
                items: Items::Listed(&listed),
            };
            sink.append_lines(&lines)
                .map_err(|e| SessionError::Write(Arc::new(e)))?;
        }
        let durable_len = (log.len() + bytes.len()) as u64;
        let resume = Resume {
            header,
            path: None,
            events: plan.events,
            next_seq: plan.next_seq,
            framing: plan.framing,
            invariants,
        };
        let session = Session::resume(resume, Box::new(sink), durable_len, None)?;
        Ok((session, plan.report))
    }
}
