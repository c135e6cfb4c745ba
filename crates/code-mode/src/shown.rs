//! What the model is shown of a run's output: like `bash`, at most 30,000 bytes (the tail is
//! kept), with the whole text saved in a private file that a note at the top names.
//!
//! Guarantees: the shown text never exceeds the cap plus the note; the full text is written
//! to a new file (`0600`, never over an existing one) in a directory only this user may
//! enter (`0700`); a save that fails is named in the note (`full output: unavailable (...)`)
//! and never fails the call.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::render::CAPTURED_OUTPUT;

/// Default number of output bytes shown to the model (the same as the `bash` tool's).
pub const DEFAULT_MAX_SHOWN_BYTES: usize = 30_000;

/// How much of a run's output the model sees, and where the rest goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShownOutput {
    /// Bytes of output shown to the model (`maxShownBytes`, default 30,000); longer output
    /// keeps its tail and is saved whole.
    pub max_bytes: usize,
    /// The directory full outputs are saved in (made `0700` if missing). `None`: a private
    /// directory made once per mount in the system's temporary directory.
    pub dir: Option<PathBuf>,
}

impl Default for ShownOutput {
    fn default() -> Self {
        ShownOutput {
            max_bytes: DEFAULT_MAX_SHOWN_BYTES,
            dir: None,
        }
    }
}

/// The saving side of [`ShownOutput`] for one mount: the directory is made once, each file
/// gets a fresh name.
#[derive(Debug)]
pub(crate) struct Overflow {
    config: ShownOutput,
    dir: OnceLock<Result<PathBuf, String>>,
    next: AtomicU64,
}

impl Overflow {
    pub(crate) fn new(config: ShownOutput) -> Overflow {
        Overflow {
            config,
            dir: OnceLock::new(),
            next: AtomicU64::new(1),
        }
    }

    /// The cap.
    pub(crate) fn max_bytes(&self) -> usize {
        self.config.max_bytes
    }

    fn directory(&self) -> Result<PathBuf, String> {
        self.dir
            .get_or_init(|| match &self.config.dir {
                Some(dir) => std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map(|()| dir.clone())
                    .map_err(|e| format!("{}: {e}", dir.display())),
                None => tempfile::Builder::new()
                    .prefix("dsh-code-output-")
                    .tempdir()
                    .map(tempfile::TempDir::keep)
                    .map_err(|e| format!("a private temporary directory: {e}")),
            })
            .clone()
    }

    /// Saves `text` whole for the call `call_id` (blocking I/O: call it off the async
    /// threads), returning the file's path or why it could not be saved.
    pub(crate) fn save_blocking(&self, text: &str, call_id: &str) -> Result<PathBuf, String> {
        let dir = self.directory()?;
        let path = dir.join(format!("{}.txt", self.stem(call_id)));
        write_new(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }

    fn stem(&self, call_id: &str) -> String {
        let safe: String = call_id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .take(64)
            .collect();
        format!(
            "run_code-{}-{}-{safe}",
            std::process::id(),
            self.next.fetch_add(1, Ordering::Relaxed)
        )
    }
}

fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

/// Where the full output is, as the note says it: the path, or why there is none.
pub(crate) fn place(saved: &Result<PathBuf, String>) -> String {
    match saved {
        Ok(path) => path.display().to_string(),
        Err(why) => format!("unavailable ({why})"),
    }
}

/// The note `[output truncated: showing the last <shown> of <total> bytes; full output:
/// <place>]` (the `bash` tool's words).
fn note(shown: usize, total: usize, place: &str) -> String {
    format!("[output truncated: showing the last {shown} of {total} bytes; full output: {place}]\n")
}

/// The last `budget` bytes of `text`, starting on a character boundary.
pub fn tail(text: &str, budget: usize) -> &str {
    let mut start = text.len().saturating_sub(budget);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The first `budget` bytes of `text`, ending on a character boundary.
fn head(text: &str, budget: usize) -> &str {
    let mut end = budget.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A successful run's text as shown: itself when it fits in `max`, else the note and its
/// last `max` bytes.
pub fn shown_success(text: &str, max: usize, place: &str) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let kept = tail(text, max);
    format!("{}{kept}", note(kept.len(), text.len(), place))
}

/// A failed run's text (`head`, then the captured `logs`) as shown: whole when it fits in
/// `max`; else the first line (itself cut to a quarter of `max`), `Captured output:`, the
/// note and the tail of the logs in what remains.
pub fn shown_failure(head_line: &str, logs: &str, max: usize, place: &str) -> String {
    let whole = head_line.len()
        + if logs.is_empty() {
            0
        } else {
            CAPTURED_OUTPUT.len() + logs.len()
        };
    if whole <= max {
        return if logs.is_empty() {
            head_line.to_owned()
        } else {
            format!("{head_line}{CAPTURED_OUTPUT}{logs}")
        };
    }
    if logs.is_empty() {
        let kept = head(head_line, max);
        return format!(
            "[output truncated: showing the first {} of {whole} bytes; full output: {place}]\n{kept}…",
            kept.len()
        );
    }
    let first = if head_line.len() > max / 4 {
        format!("{}…", head(head_line, max / 4))
    } else {
        head_line.to_owned()
    };
    let budget = max.saturating_sub(first.len() + CAPTURED_OUTPUT.len());
    let kept = tail(logs, budget);
    format!(
        "{first}{CAPTURED_OUTPUT}{}{kept}",
        note(kept.len(), whole, place)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the text, what is shown is at most the cap plus the note, ends with the
        /// text's own tail, and is the text itself when it fits.
        #[test]
        fn shown_text_is_capped_and_keeps_the_tail(text in "[a-zé\\n]{0,400}", max in 1usize..300) {
            let shown = shown_success(&text, max, "/f");
            if text.len() <= max {
                prop_assert_eq!(&shown, &text);
            } else {
                let (note_line, kept) = shown.split_once('\n').unwrap_or_default();
                prop_assert!(note_line.starts_with("[output truncated: showing the last "));
                prop_assert!(kept.len() <= max);
                prop_assert!(text.ends_with(kept));
                prop_assert!(max - kept.len() < 2, "a cut character loses at most its bytes");
            }
        }

        #[test]
        /// A failure shown keeps the start of its first line and the end of its logs.
        fn a_failure_keeps_its_first_line(logs in "[a-z\\n]{0,400}", max in 40usize..300) {
            let first = "code run failed (exception): boom";
            let shown = shown_failure(first, &logs, max, "/f");
            prop_assert!(shown.starts_with(&first[..first.len().min(max / 4)]));
            prop_assert!(shown.len() <= max + 120);
            if !logs.is_empty() {
                prop_assert!(shown.ends_with(tail(&logs, 1)));
            }
        }
    }
}
