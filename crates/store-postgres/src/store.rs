//! [`PgStore`]: sessions in one PostgreSQL database.

use std::str::FromStr as _;
use std::sync::Arc;
use std::time::SystemTime;

use dsh_session::{Header, OpenOptions, RepairReport, Session};
use tokio_postgres::{Client, Config};

use crate::error::StoreError;
use crate::fleet::{Fleet, Pooled};
use crate::lease::{self, Lease};
use crate::sink::PgSink;

/// A PostgreSQL database holding dsh sessions: open it once per process and open every session
/// from it (clones share it).
///
/// However many sessions are open, the handle uses `1 + pool size` connections (see
/// [`PgStore::with_pool_size`]): one writer that group-commits every session's appends and
/// holds their leases, and a pool for opens, reads and imports; a tail adds one while it runs.
#[derive(Clone)]
pub struct PgStore {
    shared: Arc<Shared>,
}

struct Shared {
    config: Config,
    lease: Lease,
    pool_size: usize,
    fleet: tokio::sync::OnceCell<Fleet>,
}

/// Pooled connections of a store handle unless [`PgStore::with_pool_size`] says otherwise.
pub const DEFAULT_POOL_SIZE: usize = 4;

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("hosts", &self.shared.config.get_hosts())
            .field("dbname", &self.shared.config.get_dbname())
            .finish()
    }
}
/// A session opened for writing.
#[derive(Debug)]
pub struct Opened {
    /// The session; close it ([`Session::close`]) to release its lease at once.
    pub session: Session,
    /// What crash repair did on takeover.
    pub repair: RepairReport,
    /// Whether the session was created by this open.
    pub created: bool,
}

/// One session of the store, as listed.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    /// The session id.
    pub id: String,
    /// When it was created.
    pub created_at: SystemTime,
    /// When it was last written.
    pub updated_at: SystemTime,
    /// How many log lines (events) it holds.
    pub lines: u64,
    /// Whether a live process holds its lease now.
    pub leased: bool,
    /// The header's `cwd`: the workspace the session was started in (`None` when the header
    /// has none).
    pub cwd: Option<String>,
}

fn db(context: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    move |source| StoreError::Db { context, source }
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host:port/db` or the key=value form), and brings the
    /// schema up to date. What the URL leaves out comes from `PGHOST`, `PGPORT`, `PGUSER`,
    /// `PGPASSWORD` and `PGDATABASE`, and with no host the local server's Unix socket, as
    /// `psql` takes them. Needs a Tokio runtime; the connections are then driven by the store's
    /// own background thread.
    pub async fn connect(url: &str) -> Result<PgStore, StoreError> {
        crate::url_shape::check(url)?;
        let mut config = Config::from_str(url).map_err(StoreError::Url)?;
        crate::defaults::fill(&mut config, |name| std::env::var(name).ok());
        let store = PgStore::with_settings(config, Lease::default(), DEFAULT_POOL_SIZE);
        {
            let mut client = store.pooled().await?;
            crate::migrate::migrate(client.get()?).await?;
        }
        Ok(store)
    }

    fn with_settings(config: Config, lease: Lease, pool_size: usize) -> PgStore {
        PgStore {
            shared: Arc::new(Shared {
                config,
                lease,
                pool_size,
                fleet: tokio::sync::OnceCell::new(),
            }),
        }
    }

    /// The same database with other lease settings: a new handle, with its own connections
    /// (sessions opened from it hold their leases as it says).
    pub fn with_lease(self, lease: Lease) -> PgStore {
        PgStore::with_settings(self.shared.config.clone(), lease, self.shared.pool_size)
    }

    /// The same database with `size` pooled connections (at least 1; default
    /// [`DEFAULT_POOL_SIZE`]) for opens, reads and imports: a new handle, with its own
    /// connections.
    pub fn with_pool_size(self, size: usize) -> PgStore {
        PgStore::with_settings(
            self.shared.config.clone(),
            self.shared.lease.clone(),
            size.max(1),
        )
    }

    /// How this handle's sessions hold their leases (and how long a reader waits for a holder
    /// that is reconnecting).
    pub(crate) fn lease(&self) -> &Lease {
        &self.shared.lease
    }

    /// The connection settings.
    pub(crate) fn config(&self) -> &Config {
        &self.shared.config
    }

    async fn fleet(&self) -> Result<&Fleet, StoreError> {
        let shared = &self.shared;
        shared
            .fleet
            .get_or_try_init(|| {
                Fleet::start(
                    shared.config.clone(),
                    shared.lease.clone(),
                    shared.pool_size,
                )
            })
            .await
    }

    /// A pooled connection.
    pub(crate) async fn pooled(&self) -> Result<Pooled<'_>, StoreError> {
        self.fleet().await?.client().await
    }

    /// A fresh connection of its own (driven on the current runtime), outside the pool.
    pub async fn client(&self) -> Result<Client, StoreError> {
        crate::writer::connect(&self.shared.config).await
    }

    /// Opens session `id` for writing: creates it (header with `id` and `cwd`) when absent,
    /// otherwise takes its lease (refused while a live process holds it) and resumes it after
    /// the same crash repair as a file (spec I4). `options` applies as for a file (strictness,
    /// invariants); its id and cwd are not used. An id that is empty, holds a control
    /// character or is longer than [`crate::MAX_ID_BYTES`] is refused ([`StoreError::BadId`]).
    pub async fn open(
        &self,
        id: &str,
        cwd: &str,
        options: OpenOptions,
    ) -> Result<Opened, StoreError> {
        crate::error::check_id(id)?;
        let header = Header::new(id, cwd).to_json_line();
        self.open_inner(id, Some(header), options).await
    }

    /// Opens an existing session for writing (as [`PgStore::open`], but never creates one).
    pub async fn resume(&self, id: &str, options: OpenOptions) -> Result<Opened, StoreError> {
        self.open_inner(id, None, options).await
    }

    async fn open_inner(
        &self,
        id: &str,
        new_header: Option<String>,
        options: OpenOptions,
    ) -> Result<Opened, StoreError> {
        let fleet = self.fleet().await?;
        let backend = fleet.writer_backend().await?;
        let acquired = {
            let mut client = fleet.client().await?;
            lease::acquire(
                client.get()?,
                id,
                new_header.as_deref(),
                &self.shared.lease,
                backend,
            )
            .await?
        };
        fleet.hold(id, acquired.token)?;
        let sink = PgSink::new(fleet.writer(), id.to_owned(), acquired.token);
        let created = acquired.created;
        let log = match assemble(
            id,
            &acquired.header,
            &acquired.rows,
            Some(acquired.next_seq),
        ) {
            Ok(log) => log,
            Err(e) => {
                // Releasing the lease waits for the writer: not on this task's thread.
                let _ = tokio::task::spawn_blocking(move || drop(sink)).await;
                return Err(e);
            }
        };
        let name = id.to_owned();
        let resumed =
            tokio::task::spawn_blocking(move || Session::resume_with_sink(&log, sink, options))
                .await
                .map_err(|_| StoreError::WriterGone(name.clone()))?;
        let (session, repair) = resumed.map_err(|e| row_error(&name, &acquired.rows, e))?;
        if !repair.is_clean() {
            // The caller gets the report (the CLI prints it); this is only a trace of it.
            tracing::debug!(
                session = %id,
                interrupted_calls = repair.interrupted_calls.len(),
                appended_events = repair.appended_events(),
                torn_tail = repair.torn_tail.is_some(),
                "the session was repaired on takeover"
            );
        }
        Ok(Opened {
            session,
            repair,
            created,
        })
    }

    /// The session's log as a file would hold it: the header line and every event line, each
    /// with its newline (byte-identical to the JSON Lines store's log of the same session).
    pub async fn export(&self, id: &str) -> Result<Vec<u8>, StoreError> {
        let (header_text, _, rows) = self.rows(id).await?;
        let mut out = Vec::with_capacity(rows.iter().map(|(_, l)| l.len() + 1).sum());
        out.extend_from_slice(header_text.as_bytes());
        out.push(b'\n');
        for (_, line) in &rows {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        Ok(out)
    }

    /// Checks a session's rows: every row an event at the seq the log puts it (the message
    /// names the session and seq of the first bad row).
    pub async fn verify(&self, id: &str) -> Result<(), StoreError> {
        let (header, next_seq, rows) = self.rows(id).await?;
        assemble(id, &header, &rows, Some(next_seq)).map(drop)
    }

    /// A session's header text, its next seq and its `(seq, line)` rows in seq order, all
    /// from one snapshot: a session being written is read as of one commit, so its next seq
    /// and its rows agree.
    async fn rows(&self, id: &str) -> Result<(String, i64, Vec<(i64, String)>), StoreError> {
        let mut pooled = self.pooled().await?;
        let tx = pooled
            .get()?
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(db("read the session"))?;
        let header = tx
            .query_opt(
                "SELECT header, next_seq FROM dsh_sessions WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(db("read the session"))?
            .ok_or_else(|| StoreError::NoSuchSession(id.to_owned()))?;
        let rows = lease::event_rows(&tx, id).await?;
        tx.commit().await.map_err(db("read the session"))?;
        Ok((header.get(0), header.get(1), rows))
    }

    /// Deletes session `id` and its rows unless a live process holds its lease (close it
    /// first); returns whether it was deleted. The command line uses it for a session its run
    /// created and that was refused before anything ran, as it deletes a file log then.
    pub async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        let mut pooled = self.pooled().await?;
        let tx = pooled
            .get()?
            .transaction()
            .await
            .map_err(db("begin deleting the session"))?;
        // The session's row first: that waits for an append in flight (it holds the row) and
        // keeps any later one out (its fenced update finds no row). The events then, in a new
        // snapshot that sees every append committed before.
        let deleted = tx
            .execute(
                "DELETE FROM dsh_sessions
                  WHERE id = $1
                    AND NOT (lease_until IS NOT NULL AND lease_until >= now()
                             AND EXISTS (SELECT 1 FROM pg_stat_activity a
                                          WHERE a.pid = lease_backend))",
                &[&id],
            )
            .await
            .map_err(db("delete the session"))?;
        if deleted == 1 {
            tx.execute("DELETE FROM dsh_events WHERE session_id = $1", &[&id])
                .await
                .map_err(db("delete the session's events"))?;
        }
        tx.commit()
            .await
            .map_err(db("commit deleting the session"))?;
        Ok(deleted == 1)
    }

    /// Whether a live process holds session `id`'s lease now. A holder whose backend is gone
    /// while its lease is unexpired may be reconnecting: unless its process is seen to have
    /// died (on this host), this watches it for up to [`Lease::takeover_grace`] and answers
    /// `true` if it comes back, as a taker would judge it.
    pub async fn is_leased(&self, id: &str) -> Result<bool, StoreError> {
        leased(self.pooled().await?.get()?, id, &self.shared.lease).await
    }

    /// The sessions, most recently written first (with their header's `cwd`, so a caller can
    /// keep one workspace's). Whether each is leased is judged as [`PgStore::is_leased`] judges
    /// it: a lease whose holder's connection is gone is watched (all such leases together) for
    /// up to the takeover grace, so a writer reconnecting is listed as writing.
    pub async fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let mut pooled = self.pooled().await?;
        let client = pooled.get()?;
        let rows = client
            .query(
                "SELECT s.id, s.created_at, s.updated_at,
                        (SELECT count(*) FROM dsh_events e WHERE e.session_id = s.id),
                        s.lease_until IS NOT NULL AND s.lease_until >= now(),
                        EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = s.lease_backend),
                        s.header
                   FROM dsh_sessions s ORDER BY s.updated_at DESC, s.id DESC",
                &[],
            )
            .await
            .map_err(db("list the sessions"))?;
        let mut in_doubt = Vec::new();
        let mut listed: Vec<SessionInfo> = rows
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let (held, alive): (bool, bool) = (r.get(4), r.get(5));
                if held && !alive {
                    in_doubt.push(i);
                }
                SessionInfo {
                    id: r.get(0),
                    created_at: r.get(1),
                    updated_at: r.get(2),
                    lines: u64::try_from(r.get::<_, i64>(3)).unwrap_or(0),
                    leased: held && alive,
                    cwd: Header::from_json_line(r.get::<_, &str>(6))
                        .ok()
                        .and_then(|h| h.cwd().map(str::to_owned)),
                }
            })
            .collect();
        let judged = futures::future::join_all(
            in_doubt
                .iter()
                .map(|&i| leased(client, &listed[i].id, &self.shared.lease)),
        )
        .await;
        for (i, judged) in in_doubt.into_iter().zip(judged) {
            listed[i].leased = match judged {
                Ok(live) => live,
                // Deleted since it was listed: nobody writes it.
                Err(StoreError::NoSuchSession(_)) => false,
                Err(e) => return Err(e),
            };
        }
        Ok(listed)
    }
}

/// Whether a live process holds session `id`'s lease now: unexpired, and its backend alive or
/// back within the grace (a writer reconnecting is live; see [`lease::standing`]).
pub(crate) async fn leased(client: &Client, id: &str, lease: &Lease) -> Result<bool, StoreError> {
    match lease::standing(client, id, lease).await? {
        Some(standing) => Ok(standing == lease::Standing::Live),
        None => Err(StoreError::NoSuchSession(id.to_owned())),
    }
}

/// The log bytes of a session's rows, checking that every row is an event at the seq the log
/// puts it and that the sessions row's `next_seq` follows the last one.
pub(crate) fn assemble(
    id: &str,
    header: &str,
    rows: &[(i64, String)],
    next_seq: Option<i64>,
) -> Result<Vec<u8>, StoreError> {
    let mut log =
        Vec::with_capacity(header.len() + 1 + rows.iter().map(|(_, l)| l.len() + 1).sum::<usize>());
    log.extend_from_slice(header.as_bytes());
    log.push(b'\n');
    for (seq, line) in rows {
        if line.contains('\n') || line.trim().is_empty() {
            return Err(StoreError::BadRow {
                session: id.to_owned(),
                seq: u64::try_from(*seq).ok(),
                message: "the row is not one log line".to_owned(),
            });
        }
        log.extend_from_slice(line.as_bytes());
        log.push(b'\n');
    }
    let parsed = dsh_session::read_log(&log).map_err(|e| row_error(id, rows, e))?;
    let mut expected = 0u64;
    for ((seq, event), (row_seq, _)) in parsed.events.iter().zip(rows) {
        if u64::try_from(*row_seq).ok() != Some(*seq) {
            return Err(StoreError::BadRow {
                session: id.to_owned(),
                seq: u64::try_from(*row_seq).ok(),
                message: format!("the row's seq should be {seq} (rows must follow without gap)"),
            });
        }
        expected = seq + event.seq_span();
    }
    if let Some(next) = next_seq.and_then(|n| u64::try_from(n).ok())
        && next != expected
    {
        // Rows missing at the end are named where the first missing one belongs; rows past
        // the recorded end, at the first of them.
        let (seq, message) = if expected < next {
            (
                expected,
                format!(
                    "the session's next seq is recorded as {next}, but its rows end before \
                     {expected} (rows missing at the end)"
                ),
            )
        } else {
            (
                next,
                format!(
                    "a row past the session's recorded end: its next seq is recorded as {next}, \
                     and its rows go on to {}",
                    expected - 1
                ),
            )
        };
        return Err(StoreError::BadRow {
            session: id.to_owned(),
            seq: Some(seq),
            message,
        });
    }
    Ok(log)
}

/// A session error about a line of the assembled log, as the row it came from.
fn row_error(id: &str, rows: &[(i64, String)], e: dsh_session::SessionError) -> StoreError {
    match e.line() {
        Some(1) if !matches!(e, dsh_session::SessionError::Invalid { .. }) => StoreError::BadRow {
            session: id.to_owned(),
            seq: None,
            message: format!("the header: {e}"),
        },
        Some(line) if line >= 2 && !matches!(e, dsh_session::SessionError::Invalid { .. }) => {
            StoreError::BadRow {
                session: id.to_owned(),
                seq: rows.get(line - 2).and_then(|(s, _)| u64::try_from(*s).ok()),
                message: match &e {
                    dsh_session::SessionError::Corrupt { message, .. } => message.clone(),
                    other => other.to_string(),
                },
            }
        }
        _ => StoreError::Session {
            session: id.to_owned(),
            source: e,
        },
    }
}
