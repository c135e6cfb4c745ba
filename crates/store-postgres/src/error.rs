//! Errors of the PostgreSQL store.

use std::time::SystemTime;

/// Errors of the PostgreSQL session store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store URL does not parse.
    #[error("store URL: {0}")]
    Url(#[source] tokio_postgres::Error),
    /// The database could not be reached or answered with an error.
    #[error("PostgreSQL: {context}: {source}")]
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
        /// When the lease expires, as text.
        until: String,
    },
    /// No session with this id.
    #[error("no session {0} in the store (`dsh sessions --store URL` lists them)")]
    NoSuchSession(String),
    /// A session with this id already exists (import).
    #[error("session {0} already exists in the store")]
    Exists(String),
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
}

/// When a lease held until `until` expires, as people read it.
pub(crate) fn until_text(until: Option<SystemTime>) -> String {
    match until.and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok()) {
        Some(d) => format!("{} s after the epoch", d.as_secs()),
        None => "(no expiry recorded)".to_owned(),
    }
}

fn seq_text(seq: Option<u64>) -> String {
    seq.map_or_else(|| "header".to_owned(), |s| format!("seq {s}"))
}
