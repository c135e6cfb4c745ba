//! Errors of the PostgreSQL store.

use std::time::{Duration, SystemTime};

/// Errors of the PostgreSQL session store.
///
/// A PostgreSQL error's message says its cause: what the server answered (`password
/// authentication failed for user "dsh"`, `database "nodb" does not exist`) or why it could not
/// be reached (`Connection refused`), never just `db error`. No message holds the URL's
/// password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store URL does not parse.
    #[error("store URL: {}", cause(.0))]
    Url(#[source] tokio_postgres::Error),
    /// A store URL of a shape no PostgreSQL URL has (another database's scheme, an `@` of a
    /// password not written `%40`): the reason, which never quotes the URL.
    #[error("store URL: {0}")]
    UrlShape(String),
    /// No connection could be made: where it was tried (see `target.rs`), and why.
    #[error("PostgreSQL: connect to {target}: {}", cause(.source))]
    Connect {
        /// The hosts and ports (or Unix sockets) tried.
        target: String,
        /// The cause.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The database answered with an error.
    #[error("PostgreSQL: {context}: {}", cause(.source))]
    Db {
        /// What was being done.
        context: &'static str,
        /// The cause.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The database holds a schema version newer than this program knows.
    #[error(
        "the database's dsh schema is version {found}, newer than this program's {known}: upgrade dsh"
    )]
    SchemaTooNew {
        /// The version found.
        found: i32,
        /// The newest version this program knows.
        known: i32,
    },
    /// Another live process holds the session's lease.
    #[error(
        "session {id} is being written by another process ({owner}); its lease runs until {until}: wait for it to end, or for its lease to expire"
    )]
    Leased {
        /// The session.
        id: String,
        /// Who holds the lease (host and process id).
        owner: String,
        /// When the lease expires, as text: a UTC time (RFC 3339) and how long from now.
        until: String,
    },
    /// No session with this id.
    #[error("no session {0} in the store (`dsh sessions --store URL` lists them)")]
    NoSuchSession(String),
    /// A session with this id already exists (import).
    #[error("session {0} already exists in the store")]
    Exists(String),
    /// A session id the store does not take for a new session: empty, holding a control
    /// character (a line break would split every listing of the store's sessions), or longer
    /// than [`MAX_ID_BYTES`] (every append notifies its readers with the id, and a
    /// notification holds less than 8,000 bytes).
    #[error(
        "session id {} {problem}: a session id is one line of printable text of at most {MAX_ID_BYTES} bytes",
        id_text(.id)
    )]
    BadId {
        /// The id refused.
        id: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A row of `dsh_events` is not an event, or its seq is not where the log puts it.
    #[error("session {session}, {}: {message}", seq_text(*.seq))]
    BadRow {
        /// The session.
        session: String,
        /// The row's seq (`None`: the header).
        seq: Option<u64>,
        /// What is wrong.
        message: String,
    },
    /// A tail ended because the session's writer is gone without having closed the session
    /// (killed, or cut off until its lease expired): what it had open (a turn, a step, calls
    /// without results) stays so until the session is opened again, which repairs it.
    #[error(
        "session {session}: its writer {owner} stopped without closing the session; opening it again repairs it"
    )]
    Abandoned {
        /// The session.
        session: String,
        /// The writer that held its lease (`host:pid`).
        owner: String,
    },
    /// The session log itself was refused (pairing problems, invariants, a bad import file).
    #[error("session {session}: {source}")]
    Session {
        /// The session.
        session: String,
        /// The cause.
        #[source]
        source: dsh_session::SessionError,
    },
    /// The store's writer thread could not be started or stopped unexpectedly.
    #[error("the store's writer for session {0} stopped")]
    WriterGone(String),
    /// The store's background thread (which drives its connections) could not be started or
    /// stopped unexpectedly.
    #[error("the store's background connection thread stopped")]
    Stopped,
    /// The store's shared writer connection could not be made.
    #[error("the store's writer could not connect to PostgreSQL: {0}")]
    WriterConnect(String),
    /// The server accepted no connection, or did not complete its start-up, in time (a hung
    /// server or proxy).
    #[error(
        "PostgreSQL: connect to {target}: no answer within {after:?} (`connect_timeout=SECONDS` in the store URL sets the limit)"
    )]
    ConnectTimeout {
        /// The hosts and ports (or Unix sockets) tried.
        target: String,
        /// The limit that passed.
        after: Duration,
    },
}

/// A PostgreSQL error with its cause, as people read it: the server's own message for an
/// error the server sent (with its detail and hint), else the error and every cause under it
/// (`error connecting to server: Connection refused (os error 111)`).
///
/// `tokio_postgres::Error`'s own text is only its kind (`db error`); the cause is its source.
/// Neither holds the connection's password: the server's messages never quote it, and the
/// causes are I/O and configuration errors that name options, not their values.
pub(crate) fn cause(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = db.message().to_owned();
        if let Some(detail) = db.detail() {
            text.push_str(&format!(" ({detail})"));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!("; hint: {hint}"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut next = std::error::Error::source(e);
    while let Some(source) = next {
        let more = source.to_string();
        // A cause that repeats its parent's text adds nothing.
        if !text.ends_with(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        next = source.source();
    }
    text
}

/// The longest session id a new session takes, in bytes of UTF-8.
pub const MAX_ID_BYTES: usize = 1024;

/// An id as a message quotes it: escaped, and cut to its first 60 characters when longer.
fn id_text(id: &str) -> String {
    match id.char_indices().nth(60) {
        Some((cut, _)) => format!("{:?}... ({} bytes)", &id[..cut], id.len()),
        None => format!("{id:?}"),
    }
}

/// Checks that `id` can name a session: not empty, no control character, something visible,
/// no space at either end, no bidirectional control, at most [`MAX_ID_BYTES`]
/// ([`StoreError::BadId`] otherwise). The store checks every new session's
/// id; a reader may check an id it was given before it asks the database (no session can have
/// an id that fails).
pub fn check_id(id: &str) -> Result<(), StoreError> {
    let problem = if id.is_empty() {
        "is empty"
    } else if id
        .chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
    {
        "holds a control character (a line break, a tab, an escape, ...)"
    } else if id.chars().all(blank) {
        "shows nothing (only spaces or invisible characters)"
    } else if id.starts_with(blank) || id.ends_with(blank) {
        "begins or ends with a space or an invisible character (it could not be told apart \
         from the id without it)"
    } else if id.chars().any(bidi) {
        "holds a bidirectional control character (it reorders how the id reads)"
    } else if id.len() > MAX_ID_BYTES {
        "is too long"
    } else {
        return Ok(());
    };
    Err(StoreError::BadId {
        id: id.to_owned(),
        problem,
    })
}

/// Unicode's bidirectional formatting characters: embeddings, overrides, isolates and marks.
fn bidi(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// Characters that draw nothing, or nothing but blank space: white space, the bidirectional
/// controls, zero-width spaces and joiners, word joiners and invisible operators, the byte
/// order mark, the soft hyphen, the combining grapheme joiner, variation selectors, tags, and
/// the letters and symbols fonts draw blank (Hangul fillers, the braille blank, Khmer's
/// inherent vowels, musical formatting).
fn blank(c: char) -> bool {
    c.is_whitespace()
        || bidi(c)
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200D}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2800}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// When a lease held until `until` expires, as people read it: a UTC time (RFC 3339) and how
/// long that is from now (`2026-12-02T10:33:47Z, 28 s from now`).
pub(crate) fn until_text(until: Option<SystemTime>) -> String {
    until_text_at(until, SystemTime::now())
}

fn until_text_at(until: Option<SystemTime>, now: SystemTime) -> String {
    let Some(until) = until else {
        return "(no expiry recorded)".to_owned();
    };
    let when = rfc3339(until);
    match until.duration_since(now) {
        Ok(left) => format!("{when}, {} from now", span(left)),
        Err(past) => format!("{when}, {} ago", span(past.duration())),
    }
}

/// A duration rounded to whole seconds, as `28 s`, `4 min 10 s` or `2 h 5 min`.
fn span(d: Duration) -> String {
    let s = d.as_secs() + u64::from(d.subsec_millis() >= 500);
    match s {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min {} s", s / 60, s % 60),
        s => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// A time as RFC 3339 in UTC, to the second (`2026-12-02T10:33:47Z`).
fn rfc3339(t: SystemTime) -> String {
    let secs = match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    };
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn seq_text(seq: Option<u64>) -> String {
    seq.map_or_else(|| "header".to_owned(), |s| format!("seq {s}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn a_lease_expiry_is_a_utc_time_and_how_long_from_now() {
        assert_eq!(rfc3339(at(0)), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(at(951_782_400)), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(at(1_796_402_027)), "2026-12-04T16:33:47Z");
        assert_eq!(
            until_text_at(Some(at(1_796_402_027)), at(1_796_401_999)),
            "2026-12-04T16:33:47Z, 28 s from now"
        );
        assert_eq!(
            until_text_at(Some(at(1_796_402_027)), at(1_796_402_030)),
            "2026-12-04T16:33:47Z, 3 s ago"
        );
        assert_eq!(
            until_text_at(Some(at(10_000)), at(10_000 - 250)),
            "1970-01-01T02:46:40Z, 4 min 10 s from now"
        );
        assert_eq!(until_text_at(None, at(0)), "(no expiry recorded)");
    }

    #[test]
    fn a_new_session_id_is_one_line_of_printable_text() {
        assert!(check_id("build-42").is_ok());
        assert!(check_id("été 2026").is_ok());
        let longest = "é".repeat(MAX_ID_BYTES / 2);
        assert!(check_id(&longest).is_ok());
        let too_long = format!("{longest}x");
        for bad in [
            "",
            "nl\nid",
            "tab\tid",
            "esc\u{1b}[31m",
            "c1\u{85}",
            &too_long,
        ] {
            let e = check_id(bad).unwrap_err();
            assert!(
                e.to_string()
                    .contains("a session id is one line of printable text"),
                "{e}"
            );
            assert!(e.to_string().len() < 300, "{e}");
        }
        assert!(
            check_id(&too_long)
                .unwrap_err()
                .to_string()
                .contains("is too long"),
        );
    }

    #[test]
    fn a_session_id_shows_itself_as_it_is() {
        assert!(check_id("a b").is_ok(), "a space inside is text");
        assert!(
            check_id("👩\u{200D}💻").is_ok(),
            "a joiner inside a visible id"
        );
        for (bad, problem) in [
            (" ", "shows nothing"),
            ("\u{200B}", "shows nothing"),
            ("\u{3000}\u{FEFF}", "shows nothing"),
            ("\u{115F}\u{3164}\u{2800}", "shows nothing"),
            (
                "\u{034F}\u{FE0F}\u{E0020}\u{17B4}\u{1D173}",
                "shows nothing",
            ),
            (" lead", "begins or ends with a space"),
            ("trail ", "begins or ends with a space"),
            ("a\u{200B}", "begins or ends with a space or an invisible"),
            ("\u{200B}a", "begins or ends with a space or an invisible"),
            ("ab\u{202E}cd", "bidirectional control"),
            ("a\u{2028}b", "control character"),
            ("a\u{2029}b", "control character"),
        ] {
            let e = check_id(bad).unwrap_err().to_string();
            assert!(e.contains(problem), "{bad:?}: {e}");
        }
    }
}
