//! An incremental parser of server-sent events (the WHATWG `text/event-stream` format).
//!
//! Guarantees: bytes may arrive split anywhere (inside a line, between `\r` and `\n`, inside a
//! UTF-8 sequence); lines end with `\n`, `\r\n` or `\r`; `data` lines are joined with `\n`;
//! comments (`:`) are skipped; an event is dispatched at a blank line and only if it had data;
//! an event cut short by the end of the body is dropped, as the format says. Each byte is
//! copied a bounded number of times however many events one read holds: the consumed prefix
//! is dropped once per read, not once per line (the general-purpose crate this replaced copied
//! the rest of the buffer for every line, quadratic in the events of one read: 71 % of a
//! 10,000-chunk turn went to `memmove`).

use std::collections::VecDeque;

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The event type (`message` when none was given).
    pub event: String,
    /// The data lines, joined with `\n`.
    pub data: String,
    /// The last event id seen.
    pub id: String,
}

/// The stream held bytes that are not UTF-8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotUtf8 {
    /// The byte offset of the bad line from the start of the stream.
    pub at: u64,
}

/// The parser's state between reads.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
    /// Bytes of the stream consumed before `buf`.
    offset: u64,
    /// The previous read ended with `\r`: a `\n` opening this one ends nothing.
    after_cr: bool,
    event: String,
    data: String,
    has_data: bool,
    id: String,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub(crate) fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds one read of the body; pushes every event it completes.
    pub(crate) fn push(
        &mut self,
        bytes: &[u8],
        out: &mut VecDeque<SseEvent>,
    ) -> Result<(), NotUtf8> {
        let mut bytes = bytes;
        // An empty read says nothing of what follows a `\r` (it must not forget one).
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
                self.offset += 1;
            }
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.extend_from_slice(bytes);
        let result = self.lines(&buf, out);
        let start = match result {
            Ok(start) => start,
            Err(e) => {
                self.buf = buf;
                return Err(e);
            }
        };
        // One copy of the unfinished line per read, whatever the number of events.
        buf.drain(..start);
        self.buf = buf;
        self.offset += start as u64;
        Ok(())
    }

    /// Handles every complete line of `buf`; returns where the unfinished one starts.
    fn lines(&mut self, buf: &[u8], out: &mut VecDeque<SseEvent>) -> Result<usize, NotUtf8> {
        let mut start = 0;
        let mut i = 0;
        while i < buf.len() {
            let b = buf[i];
            if b != b'\n' && b != b'\r' {
                i += 1;
                continue;
            }
            let end = i;
            i += 1;
            if b == b'\r' {
                if i == buf.len() {
                    self.after_cr = true;
                } else if buf[i] == b'\n' {
                    i += 1;
                }
            }
            let at = self.offset + start as u64;
            let line = std::str::from_utf8(&buf[start..end]).map_err(|_| NotUtf8 { at })?;
            self.line(line, out);
            start = i;
        }
        Ok(start)
    }

    fn line(&mut self, line: &str, out: &mut VecDeque<SseEvent>) {
        if line.is_empty() {
            if self.has_data {
                if self.data.ends_with('\n') {
                    self.data.pop();
                }
                let event = if self.event.is_empty() {
                    "message".to_owned()
                } else {
                    std::mem::take(&mut self.event)
                };
                out.push_back(SseEvent {
                    event,
                    data: std::mem::take(&mut self.data),
                    id: self.id.clone(),
                });
            }
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => value.clone_into(&mut self.event),
            "id" if !value.contains('\0') => value.clone_into(&mut self.id),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    fn parse_in(pieces: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = VecDeque::new();
        for piece in pieces {
            p.push(piece, &mut out).unwrap();
        }
        out.into_iter().collect()
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: String::new(),
        }
    }

    #[test]
    fn events_lines_comments_and_line_ends() {
        let text =
            b": ping\n\ndata: a\r\ndata:b\r\revent: delta\ndata: {\"x\":1}\n\nid: 7\ndata\n\n";
        let got = parse_in(&[text]);
        assert_eq!(got[0], ev("message", "a\nb"));
        assert_eq!(got[1], ev("delta", "{\"x\":1}"));
        assert_eq!(got[2].data, "");
        assert_eq!(got[2].id, "7");
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn an_event_cut_by_the_end_of_the_body_is_dropped() {
        assert!(parse_in(&[b"data: half"]).is_empty());
        assert!(parse_in(&[b"data: half\n"]).is_empty());
    }

    #[test]
    fn a_blank_line_without_data_dispatches_nothing_and_resets_the_type() {
        let got = parse_in(&[b"event: x\n\ndata: y\n\n"]);
        assert_eq!(got, vec![ev("message", "y")]);
    }

    #[test]
    fn an_empty_read_between_cr_and_lf_keeps_them_one_line_end() {
        let got = parse_in(&[b"event: x\r", b"", b"\ndata: y\r\n\r\n"]);
        assert_eq!(got, vec![ev("x", "y")]);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused_naming_where() {
        let mut p = SseParser::new();
        let mut out = VecDeque::new();
        let err = p.push(b"data: ok\n\ndata: \xff\n", &mut out).unwrap_err();
        assert_eq!(err, NotUtf8 { at: 10 });
    }

    proptest! {
        /// However the body is split into reads, the same events come out.
        #[test]
        fn splitting_never_changes_the_events(
            events in proptest::collection::vec(("[a-z]{0,4}", "[ -~é€\n]{0,12}"), 0..8),
            crlf in any::<bool>(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let nl = if crlf { "\r\n" } else { "\n" };
            let mut text = String::new();
            for (kind, data) in &events {
                if !kind.is_empty() {
                    text.push_str(&format!("event: {kind}{nl}"));
                }
                for line in data.split('\n') {
                    text.push_str(&format!("data: {line}{nl}"));
                }
                text.push_str(nl);
            }
            let bytes = text.as_bytes();
            let whole = parse_in(&[bytes]);
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            at.sort_unstable();
            let mut pieces = Vec::new();
            let mut last = 0;
            for a in at {
                pieces.push(&bytes[last..a]);
                last = a;
            }
            pieces.push(&bytes[last..]);
            prop_assert_eq!(parse_in(&pieces), whole.clone());
            prop_assert_eq!(whole.len(), events.len());
            for (got, (kind, data)) in whole.iter().zip(&events) {
                let expected_kind = if kind.is_empty() { "message" } else { kind.as_str() };
                prop_assert_eq!(&got.event, expected_kind);
                prop_assert_eq!(&got.data, data);
            }
        }
    }
}
