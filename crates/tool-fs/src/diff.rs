//! Presentation diffs for a mutation's `meta` (`{diffs: [{path, oldText, newText}]}`): each hunk
//! holds the changed lines with up to three lines of context on each side, and hunks whose
//! context would touch are merged. Computing them is linear in the size of the texts.

use std::ops::Range;

use serde::Serialize;

use crate::text::{self, cut_to};

/// Lines of context around each change.
pub const CONTEXT_LINES: usize = 3;
/// The most bytes of `oldText` or `newText` one hunk carries; the rest is cut with a marker.
pub const MAX_DIFF_TEXT: usize = 128 * 1024;

/// One hunk, in the reference's shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diff {
    /// The path as the session names it.
    pub path: String,
    /// The old lines, joined with `\n`.
    #[serde(rename = "oldText")]
    pub old_text: String,
    /// The new lines, joined with `\n`.
    #[serde(rename = "newText")]
    pub new_text: String,
}

/// One replacement in the old text: `old_len` bytes at `old_start` became `new_len` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Byte offset in the old text.
    pub old_start: usize,
    /// Bytes replaced.
    pub old_len: usize,
    /// Bytes inserted instead.
    pub new_len: usize,
}

struct Lines<'a> {
    lines: Vec<&'a str>,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Lines<'a> {
        let lines = text::lines(text);
        let mut starts = Vec::with_capacity(lines.len());
        let mut at = 0;
        for l in &lines {
            starts.push(at);
            at += l.len() + 1;
        }
        Lines { lines, starts }
    }
    fn len(&self) -> usize {
        self.lines.len()
    }
    /// How many lines start before byte `pos` (the index of the line starting at `pos`, or of
    /// the line after the one holding `pos - 1`).
    fn lines_before(&self, pos: usize) -> usize {
        self.starts.partition_point(|s| *s < pos)
    }
    fn join(&self, r: Range<usize>) -> String {
        let joined = self.lines[r].join("\n");
        if joined.len() > MAX_DIFF_TEXT {
            format!("{}\n… (diff truncated)", cut_to(&joined, MAX_DIFF_TEXT))
        } else {
            joined
        }
    }
}

struct Change {
    old: Range<usize>,
    new: Range<usize>,
}

/// Hunks for replacements of literal text (spans sorted by `old_start`, not overlapping).
pub fn for_replacements(path: &str, before: &str, after: &str, spans: &[Span]) -> Vec<Diff> {
    let old = Lines::new(before);
    let new = Lines::new(after);
    let mut delta: isize = 0;
    let mut changes = Vec::with_capacity(spans.len());
    for s in spans {
        let os = s.old_start.min(before.len());
        let oe = (os + s.old_len).min(before.len());
        let shift = |p: usize| p.saturating_add_signed(delta);
        let ns = shift(os);
        let ne = (ns + s.new_len).min(after.len());
        let line_start = before[..os].rfind('\n').map_or(0, |i| i + 1);
        let at_line_start = |t: &str, p: usize| p == 0 || t.as_bytes().get(p - 1) == Some(&b'\n');
        let (old_end, new_end) = if at_line_start(before, oe) && at_line_start(after, ne) {
            // The unchanged rest starts a line in both texts: the change ends just before it.
            (old.lines_before(oe), new.lines_before(ne))
        } else {
            // The rest of the last changed line is shared: the change runs to its end.
            let tail = before[oe..].find('\n').unwrap_or(before.len() - oe);
            (
                old.lines_before(oe + tail + 1),
                new.lines_before(ne + tail + 1),
            )
        };
        let old_start = old.lines_before(line_start);
        let new_start = new.lines_before(shift(line_start));
        changes.push(Change {
            old: old_start..old_end.max(old_start),
            new: new_start..new_end.max(new_start),
        });
        delta += s.new_len as isize - s.old_len as isize;
    }
    hunks(path, &old, &new, changes)
}

/// Hunks for a whole-file rewrite (`before` is `None` for a created file): the lines between the
/// common leading and trailing lines changed.
pub fn for_rewrite(path: &str, before: Option<&str>, after: &str) -> Vec<Diff> {
    let old = Lines::new(before.unwrap_or(""));
    let new = Lines::new(after);
    if before == Some(after) {
        return Vec::new();
    }
    let max_common = old.len().min(new.len());
    let prefix = old
        .lines
        .iter()
        .zip(&new.lines)
        .take_while(|(a, b)| a == b)
        .count();
    let suffix = old
        .lines
        .iter()
        .rev()
        .zip(new.lines.iter().rev())
        .take(max_common - prefix)
        .take_while(|(a, b)| a == b)
        .count();
    let change = Change {
        old: prefix..old.len() - suffix,
        new: prefix..new.len() - suffix,
    };
    hunks(path, &old, &new, vec![change])
}

fn hunks(path: &str, old: &Lines<'_>, new: &Lines<'_>, changes: Vec<Change>) -> Vec<Diff> {
    let mut merged: Vec<Change> = Vec::new();
    for c in changes {
        match merged.last_mut() {
            Some(last) if c.old.start <= last.old.end + 2 * CONTEXT_LINES => {
                last.old.end = last.old.end.max(c.old.end);
                last.new.end = last.new.end.max(c.new.end);
            }
            _ => merged.push(c),
        }
    }
    merged
        .into_iter()
        .map(|c| {
            let lead = c.old.start.min(c.new.start).min(CONTEXT_LINES);
            let trail = (old.len() - c.old.end)
                .min(new.len() - c.new.end)
                .min(CONTEXT_LINES);
            Diff {
                path: path.to_owned(),
                old_text: old.join(c.old.start - lead..c.old.end + trail),
                new_text: new.join(c.new.start - lead..c.new.end + trail),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(before: &str, old: &str, new: &str) -> (String, Vec<Span>) {
        let mut spans = Vec::new();
        for (i, _) in before.match_indices(old) {
            spans.push(Span {
                old_start: i,
                old_len: old.len(),
                new_len: new.len(),
            });
        }
        (before.replace(old, new), spans)
    }

    #[test]
    fn reference_fixture_hunk() {
        let before = "mode=DEBUG\nlevel=info\n";
        let (after, spans) = edit(before, "DEBUG", "RELEASE");
        let d = for_replacements("config.txt", before, &after, &spans);
        assert_eq!(
            d,
            vec![Diff {
                path: "config.txt".into(),
                old_text: "mode=DEBUG\nlevel=info".into(),
                new_text: "mode=RELEASE\nlevel=info".into()
            }]
        );
    }

    #[test]
    fn three_lines_of_context_and_separate_hunks() {
        let before: String = (1..=30).map(|i| format!("<{i}>\n")).collect();
        let (after, spans) = edit(&before, "<5>\n", "X\n");
        let d = for_replacements("f", &before, &after, &spans);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].old_text, "<2>\n<3>\n<4>\n<5>\n<6>\n<7>\n<8>");
        let (after_del, spans_del) = edit(&before, "<5>\n", "");
        let del = for_replacements("f", &before, &after_del, &spans_del);
        assert_eq!(del[0].old_text, "<2>\n<3>\n<4>\n<5>\n<6>\n<7>\n<8>");
        assert_eq!(del[0].new_text, "<2>\n<3>\n<4>\n<6>\n<7>\n<8>");
        let (joined, spans_join) = edit("ab\nc\nd\n", "b\n", "");
        let j = for_replacements("f", "ab\nc\nd\n", &joined, &spans_join);
        assert_eq!(j[0].old_text, "ab\nc\nd");
        assert_eq!(j[0].new_text, "ac\nd");
        assert_eq!(d[0].new_text, "<2>\n<3>\n<4>\nX\n<6>\n<7>\n<8>");
        let before2 = before.replace("<25>\n", "<5>\n");
        let (after2, spans2) = edit(&before2, "<5>\n", "X\n");
        assert_eq!(for_replacements("f", &before2, &after2, &spans2).len(), 2);
    }

    #[test]
    fn rewrite_trims_common_lines() {
        let d = for_rewrite(
            "f",
            Some("a\nb\nc\nd\ne\nf\ng\nh\n"),
            "a\nb\nc\nd\nE\nf\ng\nh\n",
        );
        assert_eq!(d[0].old_text, "b\nc\nd\ne\nf\ng\nh");
        assert_eq!(d[0].new_text, "b\nc\nd\nE\nf\ng\nh");
        assert!(for_rewrite("f", Some("same"), "same").is_empty());
        let created = for_rewrite("f", None, "hi\n");
        assert_eq!(created[0].old_text, "");
        assert_eq!(created[0].new_text, "hi");
    }
}
