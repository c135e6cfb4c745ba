//! # dsh-session
//!
//! The session event log of the dsh tool pipeline: one append-only log of events per session,
//! from which everything the model saw can be rebuilt.
//!
//! It holds:
//! - the event vocabulary ([`Event`]): `tool/call`, `tool/result`, `tool/code-dispatch-start`,
//!   `tool/code-dispatch`, `user/message`, `assistant/message`, `turn/*`, `step/*`, with typed
//!   constructors in the reference shapes; events of any other type are kept verbatim, and
//!   `*-chunks` runs occupy as many seqs as their `texts`/`args` entries;
//! - [`Session`]: append returns the seq (assigned in call order), O(1) amortized whatever the log
//!   length, events frozen once appended, subscribers told of each durable event in seq order;
//! - stores: in memory, and the durable JSON Lines file in the reference format
//!   ([`Session::open_jsonl`]): an append is acknowledged only once synced, concurrent appends
//!   are group-committed (one `fdatasync` per group, on a dedicated writer thread), one writer
//!   per file (advisory lock);
//! - crash repair on open ([`repair`], [`repair_bytes`]): torn tail cut, in-flight calls closed
//!   with `INTERRUPTED` results, open step and turn closed;
//! - the checker ([`check_log`], [`check_bytes`], [`check_file`]): every problem with its line;
//! - append-time invariant checks ([`InvariantChecker`]): the approval audit trail and Code Mode
//!   dispatch records;
//! - the model-visible history ([`derive_messages`]) and its exports ([`to_openai`],
//!   [`to_anthropic`]).
//!
//! It deliberately does NOT know anything about tools beyond event shapes: it never runs,
//! schedules, validates or authorizes a call, never reads a tool's canonical value (spec I2: only
//! content and meta reach the log), and never interprets event types it does not name.
//!
//! Spec rules owned here: L1 (format, seqs), L2 (event shapes), L3 (durable acknowledgement,
//! group commit), L4 (checker with line numbers, nothing silently fixed), L5 (derived history and
//! its exports), I1 (pairing: checked), I2 (the log holds presentation only), I3 (model-visible
//! history rebuilt from the log alone), I4 (crash repair). Conformance lines: LOG-04, LOG-14..17
//! (event shapes), LOG-21..27 (dispatch records), APR-41..46 (approval audit), CODE-68.
//!
//! Limits: bad input never panics or overflows the stack. A line that is not UTF-8, not JSON,
//! not an event, or nested deeper than `dsh_core::json::MAX_DEPTH` is an error naming its line
//! (or, as a torn last line, is cut by repair); an appended event's data may nest at most
//! [`MAX_DATA_DEPTH`] levels, so that its line always reads back.
//!
//! ## Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use dsh_session::{Event, Session, check_events};
//!
//! let session = Session::in_memory("s1"); // or Session::open_jsonl(path, options) for a file
//! session.append(Event::turn_start(1)).await?;
//! session.append(Event::step_start(1, 1)).await?;
//! session.append(Event::tool_call(1, 1, "c1", "echo", r#"{"text":"hi"}"#)).await?;
//! // A call with no result yet is a problem the checker names (repair would answer it).
//! let problems = check_events(&session.events());
//! assert!(problems.iter().any(|p| p.to_string().contains("c1")));
//! # Ok(()) }
//! ```
//!
//! Durability notes: a write or sync failure fails every append of its group, cuts the file back
//! to its last acknowledged byte, and refuses later appends ([`SessionError::Poisoned`]); reopen
//! the file to continue. Dropping the last handle of a file session lets its writer finish queued
//! appends and release the lock; [`Session::close`] waits for that.

mod ack;
mod check;
mod compact;
mod data_writer;
mod deep;
mod deferred;
mod derive;
mod error;
mod event;
mod export;
mod framing;
mod header;
mod invariant;
mod jsonl;
mod on_demand;
mod payload;
pub mod provider_ids;
mod queue;
mod read;
mod repair;
mod scan;
mod session;
mod sink;
mod skim;
mod snapshot;
mod visible;
mod writer;

pub use check::{
    FileCheck, SeqEvent, check_bytes, check_events, check_file, check_file_status, check_log,
};
pub use data_writer::{DataError, DataWriter, Keys};
pub use derive::{LoggedMessage, derive_logged, derive_messages, derive_messages_from};
pub use error::{InvariantViolation, LineError, Problem, SessionError};
pub use event::{Event, EventKind, MAX_DATA_DEPTH, SurfaceOp, ToolCallView, ToolResultView, types};
pub use export::{to_anthropic, to_openai};
pub use header::{Header, HeaderError, LOG_VERSION};
pub use invariant::{APPROVAL_OUTCOMES, APPROVAL_POLICIES, InvariantChecker};
pub use jsonl::OpenOptions;
pub use on_demand::OnDemandData;
pub use read::{Log, read_log};
pub use repair::{
    INTERRUPTED_TEXT, InterruptedCall, NOT_STARTED_TEXT, RepairReport, TornTail, repair,
    repair_bytes,
};
pub use session::{Session, Subscription};
pub use sink::{Line, Lines, LogSink};
pub use skim::{RawItems, RawObject};
pub use snapshot::{Entry, Events};
