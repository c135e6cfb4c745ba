//! A session's sink: hands each group of lines to the store's shared writer and waits until it
//! is committed.

use tokio::sync::mpsc;

use dsh_session::{Lines, LogSink};

use crate::fleet::Fleet;
use crate::writer::{Append, Msg};

/// The sink of one session opened from a store. Dropping it releases the lease and waits (a
/// few seconds at most) until that is done, so a closed session's lease is free when
/// [`dsh_session::Session::close`] returns.
pub(crate) struct PgSink {
    writer: mpsc::UnboundedSender<Msg>,
    id: String,
    token: i64,
}

impl PgSink {
    pub(crate) fn new(writer: mpsc::UnboundedSender<Msg>, id: String, token: i64) -> PgSink {
        PgSink { writer, id, token }
    }
}

impl Drop for PgSink {
    fn drop(&mut self) {
        Fleet::release_blocking(&self.writer, std::mem::take(&mut self.id), self.token);
    }
}

fn stopped() -> std::io::Error {
    std::io::Error::other("the store's writer connection stopped")
}

impl LogSink for PgSink {
    fn append_durably(&mut self, _bytes: &[u8]) -> std::io::Result<()> {
        Err(std::io::Error::other(
            "the PostgreSQL store writes whole groups of lines with their seqs",
        ))
    }

    fn truncate(&mut self, _len: u64) -> std::io::Result<()> {
        // A failed group's statement was rolled back: nothing to cut.
        Ok(())
    }

    fn append_lines(&mut self, lines: &Lines<'_>) -> std::io::Result<()> {
        let bad = |what: &str| std::io::Error::other(format!("a group {what}"));
        let start = lines.first_seq().ok_or_else(|| bad("without lines"))?;
        let end = lines.end_seq().ok_or_else(|| bad("without lines"))?;
        let seq = |s: u64| i64::try_from(s).map_err(|_| bad("with a seq past i64"));
        let mut seqs = Vec::with_capacity(lines.len());
        let mut texts = Vec::with_capacity(lines.len());
        for line in lines.iter() {
            seqs.push(seq(line.seq)?);
            let text = std::str::from_utf8(line.text).map_err(|_| bad("with a non-UTF-8 line"))?;
            texts.push(text.to_owned());
        }
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        let append = Append {
            id: self.id.clone(),
            token: self.token,
            start: seq(start)?,
            end: seq(end)?,
            seqs,
            lines: texts,
            reply,
        };
        self.writer
            .send(Msg::Append(append))
            .map_err(|_| stopped())?;
        answer.recv().map_err(|_| stopped())?
    }
}
