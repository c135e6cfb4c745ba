//! # dsh-store-postgres
//!
//! dsh sessions in PostgreSQL, so that any process of a fleet can resume any session, with the
//! guarantees the JSON Lines file gives (spec L1, L3, I4) through the store seam of
//! `dsh-session` ([`dsh_session::LogSink`], [`dsh_session::Session::resume_with_sink`]):
//!
//! - an append is acknowledged only once committed; a group of concurrent appends is one
//!   statement (one transaction);
//! - seqs in call order, without gap or duplicate: rows are keyed `(session, seq)` and a group
//!   moves the session's `next_seq` from its first seq to its end in the same statement;
//! - the canonical line text is stored verbatim, so [`PgStore::export`] is byte-identical to the
//!   file store's log of the same session, and [`PgStore::import`] then export gives a file back
//!   unchanged;
//! - one writer per session: a lease with a fencing token checked by every append in its own
//!   statement, so a writer that lost its lease (and wakes up late) appends nothing; the lease is
//!   taken over once it expired or its holder's backend is gone and its process died (seen on
//!   this host, or the backend gone for [`Lease::takeover_grace`]: a live holder renews on a
//!   new connection at once), and the
//!   new holder repairs the session exactly as a file is repaired (`INTERRUPTED` results for
//!   unanswered calls, open step and turn closed), logged;
//! - a lost connection is retried without ever writing a group twice;
//! - live readers with `LISTEN`/`NOTIFY` ([`PgStore::tail`]);
//! - one handle, many sessions: open the store once per process and every session from it; the
//!   handle's ONE writer connection commits the waiting appends of all its sessions in one
//!   statement and holds their leases, and a small pool serves opens and reads, so a process
//!   uses `1 +` [`DEFAULT_POOL_SIZE`] connections however many sessions it has open;
//! - a row that is not an event, or not at the seq the log puts it, is reported with its
//!   session and seq ([`StoreError::BadRow`]).
//!
//! The schema is versioned ([`SCHEMA_VERSION`], migrations embedded in the program and applied
//! by [`PgStore::connect`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use dsh_session::{Event, OpenOptions};
//! let store = dsh_store_postgres::PgStore::connect("postgres://dsh@127.0.0.1/dsh").await?;
//! let opened = store.open("s1", "/work", OpenOptions::new()).await?;
//! opened.session.append(Event::turn_start(1)).await?; // committed when this returns
//! opened.session.close().await?; // releases the lease
//! let log = store.export("s1").await?; // the JSON Lines a file would hold
//! # let _ = log; Ok(()) }
//! ```

mod defaults;
mod error;
mod fleet;
mod import;
mod lease;
mod migrate;
mod pgpass;
mod sink;
mod store;
mod tail;
mod target;
mod url_shape;
mod writer;

pub use error::{MAX_ID_BYTES, StoreError, check_id};
pub use import::Imported;
pub use lease::Lease;
pub use migrate::SCHEMA_VERSION;
pub use store::{DEFAULT_POOL_SIZE, Opened, PgStore, SessionInfo};
pub use tail::{CHANNEL, TailLine};

/// The statement that commits one session's group of appends, as the store's writer runs it:
/// the fenced update of the session's row, the group's rows inserted only if it matched, the
/// notification. Parameters: `$1` session id (`text`), `$2` fencing token, `$3` the group's
/// first seq, `$4` its end (`bigint`s), `$5` the lease's time to live in seconds (`float8`),
/// `$6` the seqs (`bigint[]`) and `$7` the lines (`text[]`); one row back when applied, none
/// when not. Public so that a benchmark can time the database's share of an append alone
/// (`benches/store.rs`); nothing else should run it.
#[doc(hidden)]
pub const APPEND_STATEMENT: &str = writer::APPEND_ONE;
