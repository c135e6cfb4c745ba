//! Text handling shared by the tools: what counts as a text file (UTF-8 without NUL bytes), how a
//! text splits into numbered lines (a final newline does not open an empty last line), and the
//! bounds on what one read shows.

/// The most characters of one line a read shows; longer lines are cut with a marker.
pub const MAX_LINE_CHARS: usize = 2000;
/// The default number of lines a read shows.
pub const DEFAULT_READ_LINES: usize = 2000;
/// The most bytes of line text one read shows; the rest is left for `offset`.
pub const MAX_READ_BYTES: usize = 50 * 1024;

/// Why bytes are not text: a NUL byte or invalid UTF-8, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotText(pub String);

/// The text of `bytes`, or why they are not text.
pub fn decode(bytes: &[u8]) -> Result<&str, NotText> {
    if let Some(i) = memchr_nul(bytes) {
        return Err(NotText(format!("it contains a NUL byte at offset {i}")));
    }
    std::str::from_utf8(bytes)
        .map_err(|e| NotText(format!("invalid UTF-8 at byte {}", e.valid_up_to())))
}

fn memchr_nul(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == 0)
}

/// The lines of a text: split on `\n`, a trailing `\r` kept, and no empty line after a final
/// newline (`"a\n"` is one line, `""` is none).
pub fn lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n').collect()
}

/// A line as a read shows it: without its `\r`, cut at [`MAX_LINE_CHARS`] characters.
pub fn shown_line(line: &str) -> String {
    let line = line.strip_suffix('\r').unwrap_or(line);
    match line.char_indices().nth(MAX_LINE_CHARS) {
        None => line.to_owned(),
        Some((cut, _)) => format!(
            "{}... (line truncated to {MAX_LINE_CHARS} characters)",
            &line[..cut]
        ),
    }
}

/// Cuts `s` to at most `max` bytes on a character boundary.
pub fn cut_to(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_newline_does_not_open_a_line() {
        assert_eq!(lines(""), Vec::<&str>::new());
        assert_eq!(lines("a"), vec!["a"]);
        assert_eq!(lines("a\n"), vec!["a"]);
        assert_eq!(lines("a\n\n"), vec!["a", ""]);
        assert_eq!(lines("a\r\nb"), vec!["a\r", "b"]);
    }

    #[test]
    fn binary_and_invalid_utf8_are_not_text() {
        assert!(decode(b"ok\n").is_ok());
        assert!(decode(b"a\0b").is_err());
        assert!(decode(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn long_lines_are_cut_on_a_char_boundary() {
        let long = "é".repeat(MAX_LINE_CHARS + 5);
        let shown = shown_line(&long);
        assert!(shown.starts_with(&"é".repeat(MAX_LINE_CHARS)));
        assert!(shown.ends_with("characters)"));
        assert_eq!(cut_to("éé", 3), "é");
    }
}
