//! A result too long to show: at most [`MAX_RESULT_TEXT_BYTES`] of its text reach the log and
//! the model, as for `bash` and Code Mode output, and the whole text is saved in a file the
//! note names (when the host gave a directory, [`McpServer::save_long_results_in`]).
//!
//! The head is kept (a tool's result is read from its start: a document, a listing, a JSON
//! value), then a note saying how much there was and where all of it is. Images are kept as
//! they are; only text counts.
//!
//! [`McpServer::save_long_results_in`]: crate::McpServer::save_long_results_in

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// At most this many bytes of a result's text are shown (the cap `bash` output has).
pub const MAX_RESULT_TEXT_BYTES: usize = 30_000;

/// `blocks` (a JSON array of dsh blocks) with their text cut to the cap when longer, and the
/// whole text saved in `dir` as `mcp-<server>-<call id>.txt`.
pub(crate) fn limit(blocks: Value, dir: Option<&Path>, server: &str, call_id: &str) -> Value {
    let Value::Array(blocks) = blocks else {
        return blocks;
    };
    let total: usize = blocks.iter().filter_map(text_of).map(str::len).sum();
    if total <= MAX_RESULT_TEXT_BYTES {
        return Value::Array(blocks);
    }
    let saved = match dir {
        Some(dir) => save(dir, server, call_id, blocks.iter().filter_map(text_of)),
        None => Err("no directory to save it in was given".to_owned()),
    };
    let mut left = MAX_RESULT_TEXT_BYTES;
    let mut out = Vec::with_capacity(blocks.len() + 1);
    for block in blocks {
        let Some(text) = text_of(&block) else {
            out.push(block);
            continue;
        };
        if left == 0 {
            continue;
        }
        let mut cut = text.len().min(left);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        left -= cut;
        out.push(json!({"type": "text", "text": &text[..cut]}));
    }
    let shown = MAX_RESULT_TEXT_BYTES - left;
    let note = match saved {
        Ok(path) => format!(
            "[result cut: {shown} of {total} bytes of text shown; all of it is in {}]",
            path.display()
        ),
        Err(why) => format!(
            "[result cut: {shown} of {total} bytes of text shown; the rest was not saved: {why}]"
        ),
    };
    out.push(json!({"type": "text", "text": note}));
    Value::Array(out)
}

/// A text block's text.
fn text_of(block: &Value) -> Option<&str> {
    if block["type"] == "text" {
        block["text"].as_str()
    } else {
        None
    }
}

/// Writes the texts, one after the other, to a new file of the server's call in `dir`.
fn save<'a>(
    dir: &Path,
    server: &str,
    call_id: &str,
    texts: impl Iterator<Item = &'a str>,
) -> Result<PathBuf, String> {
    use std::io::Write;
    let safe: String = format!("mcp-{server}-{call_id}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{safe}.txt"));
    let written = (|| -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = std::io::BufWriter::new(options.open(&path)?);
        for text in texts {
            file.write_all(text.as_bytes())?;
        }
        file.flush()
    })();
    written
        .map(|()| path.clone())
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_result_is_left_as_it_is() {
        let blocks = json!([{"type": "text", "text": "short"}]);
        assert_eq!(limit(blocks.clone(), None, "s", "c"), blocks);
    }

    #[test]
    fn a_long_result_keeps_its_head_and_names_the_file_that_holds_all_of_it() {
        let dir = std::env::temp_dir().join(format!("dsh-mcp-long-{}", std::process::id()));
        let head = "é".repeat(MAX_RESULT_TEXT_BYTES); // two bytes each: cut on a boundary
        let blocks = json!([{"type": "text", "text": head}, {"type": "text", "text": "tail"}]);
        let out = limit(blocks, Some(&dir), "py", "c/1");
        let out = out.as_array().unwrap();
        assert_eq!(out.len(), 2);
        let shown = out[0]["text"].as_str().unwrap();
        assert_eq!(shown.len(), MAX_RESULT_TEXT_BYTES);
        let note = out[1]["text"].as_str().unwrap();
        let path = dir.join("mcp-py-c_1.txt");
        assert!(note.contains(&path.display().to_string()), "{note}");
        assert!(
            note.contains(&format!("of {} bytes", 2 * MAX_RESULT_TEXT_BYTES + 4)),
            "{note}"
        );
        let saved = std::fs::read_to_string(&path).unwrap();
        assert!(saved.ends_with("tail") && saved.len() == 2 * MAX_RESULT_TEXT_BYTES + 4);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
