//! The viewer's JSON endpoints: `api/sessions` (the sessions shown, newest first) and
//! `api/events?id=ID&after=SEQ&offset=BYTES` (a session's header and its events from a seq on,
//! as logged, with whether a writer still holds it). The page builds turns, steps and calls
//! from the events itself, so following a running session is asking again with the `next` seq
//! and the `offset` the last answer gave: of a file, only the bytes appended since are read. A
//! log that shrank meanwhile (repaired) is read whole again and the answer says `reset`. The
//! same answers, pushed as they happen, are the live stream (`stream.rs`).
//!
//! A session is a log file (one, or a workspace's) or a session of a PostgreSQL store
//! (`--store`): of a stored one, the rows from `after` on (the offset is not used).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::cli::logs::complete_lines;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use dsh_store_postgres::{PgStore, StoreError};
use serde_json::{Value, json};

use super::super::Exit;
use super::super::sessions::{Entry, first_prompt, list_dir};
use super::super::store;

/// What `dsh view` shows.
pub(crate) enum Source {
    /// One log file.
    Log(PathBuf),
    /// A workspace: its sessions in dsh's state directory, and any logs in the folder itself.
    Workspace(PathBuf),
    /// The sessions of a PostgreSQL store.
    Store {
        /// The store's URL (shown without its password).
        url: String,
        /// The connection settings (each request opens what it needs).
        store: Box<PgStore>,
    },
}

/// Where one session's events are read from.
pub(super) enum Located<'a> {
    /// A log file.
    File(PathBuf),
    /// A session of the store.
    Stored(&'a PgStore, &'a str),
}

/// An answer of `api/events` (and a message of the live stream).
pub(super) struct Batch {
    /// The JSON text.
    pub(super) body: String,
    /// The seq after the last event read.
    pub(super) next: u64,
    /// The byte offset after the last complete line read (a file's; 0 for a store).
    pub(super) offset: u64,
    /// How many events it holds.
    pub(super) events: usize,
    /// Whether the log was read whole again because it shrank.
    pub(super) reset: bool,
    /// Whether a writer holds the session.
    pub(super) live: bool,
}

/// An error answer: its status and one sentence.
pub(super) type Problem = (StatusCode, String);

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

    /// The sessions of the store at `url` (connected to once now, so a bad URL or an
    /// unreachable server is said at once).
    pub(crate) async fn from_store(url: &str) -> Result<Source, Exit> {
        let store = store::connect(url).await?;
        Ok(Source::Store {
            url: url.to_owned(),
            store: Box::new(store),
        })
    }

    /// What is shown, for the terminal.
    pub(crate) fn describe(&self) -> String {
        match self {
            Source::Log(p) => format!("the log {}", p.display()),
            Source::Workspace(w) => format!("the sessions of {}", w.display()),
            Source::Store { url, .. } => format!("the sessions of {}", store::shown(url)),
        }
    }

    /// The logs shown, newest first (none for a store).
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
            Source::Store { .. } => Ok(Vec::new()),
        }
    }

    /// Where session `id` is read from.
    pub(super) fn locate<'a>(&'a self, id: &'a str) -> Result<Located<'a>, Problem> {
        if let Source::Store { store, .. } = self {
            return Ok(Located::Stored(store, id));
        }
        let entries = self.entries().map_err(exit_message)?;
        match entries.into_iter().find(|e| e.id == id) {
            Some(entry) => Ok(Located::File(entry.path)),
            None => Err((StatusCode::NOT_FOUND, format!("no session {id:?}"))),
        }
    }

    /// How session `id` is named on the page.
    pub(super) fn place(&self, id: &str) -> String {
        match self {
            Source::Store { url, .. } => store::place(url, id).display().to_string(),
            _ => id.to_owned(),
        }
    }

    /// The command that repairs stored session `id` (the page shows it when a session that is
    /// not written any more left calls without a result).
    pub(super) fn store_repair(&self, id: &str) -> String {
        match self {
            Source::Store { url, .. } => format!(
                "dsh repair --store {} {}",
                shell_word(&store::shown(url)),
                shell_word(id)
            ),
            _ => format!("dsh repair {}", shell_word(id)),
        }
    }
}

/// `word` as one shell word: as it is when it holds only characters no shell reads specially,
/// else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:@=,%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
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

/// Answers `api/<what>?<query>` (`api/stream` is answered by `stream.rs`).
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
            batch(source, &id, number("after"), number("offset"))
                .await
                .map(|b| b.body)
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
        Err(problem) => refused(problem),
    }
}

/// An error answer: `{"error": "..."}` with its status.
pub(super) fn refused((status, message): Problem) -> Response {
    (status, axum::Json(json!({ "error": message }))).into_response()
}

pub(super) fn internal(e: impl std::fmt::Display) -> Problem {
    (StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

fn exit_message(e: Exit) -> Problem {
    internal(
        e.message
            .unwrap_or_else(|| "cannot list the sessions".into()),
    )
}

/// A store's error: a missing session is a 404, anything else the server's own failure.
pub(super) fn store_problem(url: &str, e: StoreError) -> Problem {
    match e {
        StoreError::NoSuchSession(_) => (StatusCode::NOT_FOUND, e.to_string()),
        other => internal(format!("{}: {other}", store::shown(url))),
    }
}

fn millis(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// `api/sessions`.
async fn sessions(source: &Source) -> Result<String, Problem> {
    if let Source::Store { url, store } = source {
        let list = store.sessions().await.map_err(|e| store_problem(url, e))?;
        let list: Vec<Value> = list
            .iter()
            .map(|s| {
                json!({
                    "id": s.id,
                    "path": source.place(&s.id),
                    "size": s.lines,
                    "modified": millis(s.updated_at),
                    "prompt": null,
                    "live": s.leased,
                })
            })
            .collect();
        return serde_json::to_string(&list).map_err(internal);
    }
    let entries = source.entries().map_err(exit_message)?;
    tokio::task::spawn_blocking(move || {
        let list: Vec<Value> = entries
            .iter()
            .map(|e| {
                json!({
                    "id": e.id,
                    "path": e.path.display().to_string(),
                    "size": e.size,
                    "modified": millis(e.modified),
                    "prompt": first_prompt(&e.path),
                })
            })
            .collect();
        serde_json::to_string(&list).map_err(internal)
    })
    .await
    .map_err(internal)?
}

/// Session `id`'s events with a seq of at least `after` (of a file: read from `offset` on when
/// that is where the last answer stopped).
pub(super) async fn batch(
    source: &Source,
    id: &str,
    after: u64,
    offset: u64,
) -> Result<Batch, Problem> {
    match source.locate(id)? {
        Located::File(path) => file_batch(path, id, after, offset).await,
        Located::Stored(store, id) => {
            let url = match source {
                Source::Store { url, .. } => url.as_str(),
                _ => "",
            };
            let bytes = store.export(id).await.map_err(|e| store_problem(url, e))?;
            let live = store
                .is_leased(id)
                .await
                .map_err(|e| store_problem(url, e))?;
            let place = source.place(id);
            let repair = source.store_repair(id);
            whole(&bytes, id, &place, &repair, live, after, None)
        }
    }
}

/// The events of the log file at `path` with a seq of at least `after`, read from `offset` on
/// when that is where the last answer stopped.
pub(super) async fn file_batch(
    path: PathBuf,
    id: &str,
    after: u64,
    offset: u64,
) -> Result<Batch, Problem> {
    let id = id.to_owned();
    tokio::task::spawn_blocking(move || read_file(&path, id, after, offset))
        .await
        .map_err(internal)?
}

fn io_problem(path: &Path) -> impl Fn(std::io::Error) -> Problem + '_ {
    move |e| internal(format!("{}: {e}", path.display()))
}

fn bad_log(place: &str) -> impl Fn(String) -> Problem + '_ {
    move |m| (StatusCode::UNPROCESSABLE_ENTITY, format!("{place}: {m}"))
}

fn read_file(path: &Path, id: String, after: u64, offset: u64) -> Result<Batch, Problem> {
    let mut file = std::fs::File::open(path).map_err(io_problem(path))?;
    // A writer holds the log's lock while the session runs.
    let live = matches!(
        file.try_lock_shared(),
        Err(std::fs::TryLockError::WouldBlock)
    );
    let place = path.display().to_string();
    let repair = format!("dsh repair {}", shell_word(&place));
    let len = file.metadata().map_err(io_problem(path))?.len();
    if offset > 0 && offset <= len {
        // Where the last answer stopped, when that is still the end of a line of this file:
        // only what follows is read.
        file.seek(SeekFrom::Start(offset - 1))
            .map_err(io_problem(path))?;
        let mut rest = Vec::new();
        file.read_to_end(&mut rest).map_err(io_problem(path))?;
        if rest.first() == Some(&b'\n') {
            let end = complete_lines(&rest);
            let (events, next) = appended(&rest[1..end], after).map_err(bad_log(&place))?;
            let offset = offset - 1 + end as u64;
            let head = Head {
                id: &id,
                place: &place,
                repair: &repair,
                live,
                next,
                offset,
                reset: false,
                header: None,
            };
            return render(head, &events);
        }
        file.rewind().map_err(io_problem(path))?;
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_problem(path))?;
    // A log shorter than where the last answer stopped was rewritten (repaired): all again.
    let reset = offset > complete_lines(&bytes) as u64;
    let after = if reset { 0 } else { after };
    whole(&bytes, &id, &place, &repair, live, after, Some(reset))
}

/// The answer from a whole log's bytes: its header and its events from seq `after` on. `file`:
/// whether the bytes are a file's (then the answer gives their offset, and whether they were
/// read whole again because the file shrank); of a store, the seq alone says where to go on.
fn whole(
    bytes: &[u8],
    id: &str,
    place: &str,
    repair: &str,
    live: bool,
    after: u64,
    file: Option<bool>,
) -> Result<Batch, Problem> {
    let end = complete_lines(bytes);
    let log = dsh::session::read_log(&bytes[..end]).map_err(|e| bad_log(place)(e.to_string()))?;
    let header = match &log.header {
        Some(h) => Some(serde_json::to_string(h.json().value()).map_err(internal)?),
        None => None,
    };
    let events: Lines = log
        .events
        .iter()
        .filter(|(s, _)| *s >= after)
        .map(|(s, e)| (*s, e.to_json_line()))
        .collect();
    let head = Head {
        id,
        place,
        repair,
        live,
        next: log.next_seq(),
        offset: if file.is_some() { end as u64 } else { 0 },
        reset: file.unwrap_or(false),
        header: header.as_deref(),
    };
    render(head, &events)
}

/// What an answer says besides its events.
pub(super) struct Head<'a> {
    /// The session's id.
    pub(super) id: &'a str,
    /// How the session is named on the page.
    pub(super) place: &'a str,
    /// The command that repairs it (shown when it is not written and calls lack a result).
    pub(super) repair: &'a str,
    /// Whether a writer holds it.
    pub(super) live: bool,
    /// The seq after the last event read.
    pub(super) next: u64,
    /// The byte offset after the last complete line read (a file's).
    pub(super) offset: u64,
    /// Whether the log was read whole again because it shrank.
    pub(super) reset: bool,
    /// The header line, with the first answer only.
    pub(super) header: Option<&'a str>,
}

/// The JSON of one answer; each event's own line goes in as logged, not re-serialized.
pub(super) fn render(head: Head<'_>, events: &[(u64, String)]) -> Result<Batch, Problem> {
    let Head {
        id,
        place,
        repair,
        live,
        next,
        offset,
        reset,
        header,
    } = head;
    let size: usize = events.iter().map(|(_, l)| l.len() + 24).sum();
    let mut out = String::with_capacity(size + 256);
    out.push_str("{\"id\":");
    out.push_str(&serde_json::to_string(id).map_err(internal)?);
    out.push_str(",\"path\":");
    out.push_str(&serde_json::to_string(place).map_err(internal)?);
    out.push_str(",\"repair\":");
    out.push_str(&serde_json::to_string(repair).map_err(internal)?);
    out.push_str(&format!(
        ",\"live\":{live},\"next\":{next},\"offset\":{offset},\"reset\":{reset}"
    ));
    out.push_str(",\"header\":");
    out.push_str(header.unwrap_or("null"));
    out.push_str(",\"events\":[");
    for (i, (seq, line)) in events.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("{{\"seq\":{seq},\"event\":{line}}}"));
    }
    out.push_str("]}");
    Ok(Batch {
        body: out,
        next,
        offset,
        events: events.len(),
        reset,
        live,
    })
}

/// Events, their seqs and their lines.
pub(super) type Lines = Vec<(u64, String)>;

/// The events of complete lines appended after seq `after` (no header: it was read before).
fn appended(bytes: &[u8], after: u64) -> Result<(Lines, u64), String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut seq = after;
    let mut events = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let event = dsh::session::Event::from_json_line(line).map_err(|e| e.to_string())?;
        events.push((seq, event.to_json_line()));
        seq += event.seq_span();
    }
    Ok((events, seq))
}

/// A query parameter, percent-decoded.
pub(super) fn param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == key).then(|| crate::cli::percent::decoded(v, true))
    })
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

    #[test]
    fn a_repair_command_quotes_what_a_shell_would_split() {
        assert_eq!(shell_word("/tmp/s1.jsonl"), "/tmp/s1.jsonl");
        assert_eq!(shell_word("/tmp/my log.jsonl"), "'/tmp/my log.jsonl'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
