//! The viewer's JSON endpoints: `api/sessions` (the logs shown, newest first) and
//! `api/events?id=ID&after=SEQ&offset=BYTES` (a log's header and its events from a seq on, as
//! logged, with whether a writer still holds the log). The page builds turns, steps and calls
//! from the events itself, so following a running session is asking again with the `next` seq
//! and the `offset` the last answer gave: only the lines appended since are read. A log that
//! shrank meanwhile (repaired) is read whole again and the answer says `reset`.

use std::path::{Path, PathBuf};

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::super::Exit;
use super::super::sessions::{Entry, first_prompt, list_dir};

/// What `dsh view` shows.
pub(crate) enum Source {
    /// One log file.
    Log(PathBuf),
    /// A workspace: its sessions in dsh's state directory, and any logs in the folder itself.
    Workspace(PathBuf),
}

impl Source {
    /// The source a command line names (the current directory when none).
    pub(crate) fn from_target(target: Option<&PathBuf>) -> Result<Source, Exit> {
        let given = super::super::options::workspace_or_cwd(target)?;
        let path = given.canonicalize().map_err(|e| {
            Exit::usage(format!(
                "{}: {e} (give a session log or a workspace folder)",
                given.display()
            ))
        })?;
        if path.is_file() {
            Ok(Source::Log(path))
        } else if path.is_dir() {
            Ok(Source::Workspace(path))
        } else {
            Err(Exit::usage(format!(
                "{} is neither a session log nor a folder",
                given.display()
            )))
        }
    }

    /// What is shown, for the terminal.
    pub(crate) fn describe(&self) -> String {
        match self {
            Source::Log(p) => format!("the log {}", p.display()),
            Source::Workspace(w) => format!("the sessions of {}", w.display()),
        }
    }

    /// The logs shown, newest first.
    fn entries(&self) -> Result<Vec<Entry>, Exit> {
        match self {
            Source::Log(path) => {
                let meta = std::fs::metadata(path)
                    .map_err(|e| Exit::internal(format!("{}: {e}", path.display())))?;
                Ok(vec![Entry {
                    id: id_of(path),
                    path: path.clone(),
                    modified: meta.modified().unwrap_or(std::time::SystemTime::UNIX_EPOCH),
                    size: meta.len(),
                }])
            }
            Source::Workspace(w) => {
                let mut all = list_dir(&dsh::jsonl::sessions_dir(w))?;
                all.extend(list_dir(w)?);
                all.sort_by(|a, b| b.modified.cmp(&a.modified).then(b.id.cmp(&a.id)));
                all.dedup_by(|a, b| a.id == b.id);
                Ok(all)
            }
        }
    }
}

/// A log's id: its file name without `.jsonl`.
fn id_of(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.strip_suffix(".jsonl").unwrap_or(&name).to_owned()
}

/// Answers `api/<what>?<query>`.
pub(crate) async fn handle(source: &Source, what: &str, query: &str) -> Response {
    let result = match what {
        "sessions" => sessions(source).await,
        "events" => {
            let id = param(query, "id").unwrap_or_default();
            let number = |key| {
                param(query, key)
                    .and_then(|a| a.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            events(source, &id, number("after"), number("offset")).await
        }
        _ => Err((StatusCode::NOT_FOUND, format!("no endpoint api/{what}"))),
    };
    match result {
        Ok(body) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            body,
        )
            .into_response(),
        Err((status, message)) => (status, axum::Json(json!({ "error": message }))).into_response(),
    }
}

type Answer = Result<String, (StatusCode, String)>;

fn internal(e: impl std::fmt::Display) -> (StatusCode, String) {
    (StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

fn exit_message(e: Exit) -> (StatusCode, String) {
    internal(
        e.message
            .unwrap_or_else(|| "cannot list the sessions".into()),
    )
}

/// `api/sessions`.
async fn sessions(source: &Source) -> Answer {
    let entries = source.entries().map_err(exit_message)?;
    tokio::task::spawn_blocking(move || {
        let list: Vec<Value> = entries
            .iter()
            .map(|e| {
                let modified = e
                    .modified
                    .duration_since(std::time::SystemTime::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or(0);
                json!({
                    "id": e.id,
                    "path": e.path.display().to_string(),
                    "size": e.size,
                    "modified": modified,
                    "prompt": first_prompt(&e.path),
                })
            })
            .collect();
        serde_json::to_string(&list).map_err(internal)
    })
    .await
    .map_err(internal)?
}

/// `api/events`: the log's events with a seq of at least `after`.
async fn events(source: &Source, id: &str, after: u64, offset: u64) -> Answer {
    let entries = source.entries().map_err(exit_message)?;
    let Some(entry) = entries.into_iter().find(|e| e.id == id) else {
        return Err((StatusCode::NOT_FOUND, format!("no session {id:?}")));
    };
    let path = entry.path;
    tokio::task::spawn_blocking(move || read_events(&path, id_of(&path), after, offset))
        .await
        .map_err(internal)?
}

fn read_events(path: &Path, id: String, after: u64, offset: u64) -> Answer {
    let file =
        std::fs::File::open(path).map_err(|e| internal(format!("{}: {e}", path.display())))?;
    // A writer holds the log's lock while the session runs.
    let live = matches!(
        file.try_lock_shared(),
        Err(std::fs::TryLockError::WouldBlock)
    );
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut &file, &mut bytes)
        .map_err(|e| internal(format!("{}: {e}", path.display())))?;
    // A line being written is not read until its newline is there.
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let from = usize::try_from(offset).unwrap_or(usize::MAX);
    // Where the last answer stopped, when that is still the end of a line of this file.
    let follows = from > 0 && from <= complete && bytes[from - 1] == b'\n';
    let (header, events, next) = if follows {
        appended(&bytes[from..complete], after).map_err(|m| {
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("{}: {m}", path.display()),
            )
        })?
    } else {
        let log = dsh::session::read_log(&bytes[..complete]).map_err(|e| {
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("{}: {e}", path.display()),
            )
        })?;
        let next = log.next_seq();
        let header = match &log.header {
            Some(h) => Some(serde_json::to_string(h.json().value()).map_err(internal)?),
            None => None,
        };
        let after = if from > complete { 0 } else { after };
        let events = log
            .events
            .iter()
            .filter(|(s, _)| *s >= after)
            .map(|(s, e)| (*s, e.to_json_line()))
            .collect();
        (header, events, next)
    };
    let mut out = String::with_capacity(complete - from.min(complete) + 256);
    out.push_str("{\"id\":");
    out.push_str(&serde_json::to_string(&id).map_err(internal)?);
    out.push_str(",\"path\":");
    out.push_str(&serde_json::to_string(&path.display().to_string()).map_err(internal)?);
    out.push_str(&format!(
        ",\"live\":{live},\"next\":{next},\"offset\":{complete},\"reset\":{}",
        from > complete
    ));
    out.push_str(",\"header\":");
    out.push_str(header.as_deref().unwrap_or("null"));
    out.push_str(",\"events\":[");
    for (i, (seq, line)) in events.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // The event's own line, as logged: no re-parse.
        out.push_str(&format!("{{\"seq\":{seq},\"event\":{line}}}"));
    }
    out.push_str("]}");
    Ok(out)
}

/// Events, their seqs and their lines.
type Lines = Vec<(u64, String)>;

/// The events of complete lines appended after seq `after` (no header: it was read before).
fn appended(bytes: &[u8], after: u64) -> Result<(Option<String>, Lines, u64), String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut seq = after;
    let mut events = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let event = dsh::session::Event::from_json_line(line).map_err(|e| e.to_string())?;
        events.push((seq, event.to_json_line()));
        seq += event.seq_span();
    }
    Ok((None, events, seq))
}

/// A query parameter, percent-decoded.
fn param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == key).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_are_percent_decoded() {
        assert_eq!(param("id=s1%2D2&after=3", "id").as_deref(), Some("s1-2"));
        assert_eq!(param("id=a+b", "id").as_deref(), Some("a b"));
        assert_eq!(param("id=50%", "id").as_deref(), Some("50%"));
        assert_eq!(param("after=3", "id"), None);
    }
}
