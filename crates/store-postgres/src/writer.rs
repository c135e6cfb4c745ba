//! One session's writer connection: the lease and the appends (spec L3 over PostgreSQL).
//!
//! Each open session has a thread with its own small runtime and connection (the "lease
//! connection"). It takes the lease, answers the session's groups of appends, renews the lease
//! every third of its time to live, and releases it when the session is closed or dropped.
//!
//! Guarantees:
//! - one group is ONE statement (one transaction, committed with `synchronous_commit` as the
//!   server has it, on by default): the sessions row moves `next_seq` from the group's first seq
//!   to its end only if the lease token is still this writer's AND `next_seq` is the group's
//!   first seq; the rows are inserted in the same statement; so a writer that lost its lease
//!   (fencing) appends nothing, and no seq is ever written twice or skipped;
//! - an append is acknowledged only once that statement returned (committed);
//! - a connection lost mid-append (the backend terminated, the server restarted) is retried on
//!   a new connection for up to [`Lease::retry_for`]: a retry first asks where `next_seq` is, so
//!   a group whose commit was lost with the connection is recognised as written (idempotent),
//!   never written twice;
//! - the lease records the backend of the lease connection: a holder whose backend is gone (its
//!   process died) can be taken over at once, otherwise only after the lease expired.

use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use dsh_session::{Lines, LogSink};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::{Client, Config, NoTls};

use crate::error::StoreError;

/// How a session's lease is held.
#[derive(Clone, Debug)]
pub struct Lease {
    /// How long the lease lasts without renewal (default 30 s). The writer renews it every
    /// third of this.
    pub ttl: Duration,
    /// How long a lost connection is retried before an append fails (default 10 s).
    pub retry_for: Duration,
    /// Who holds it, as other processes are told (default `host:pid`).
    pub owner: String,
}

impl Default for Lease {
    fn default() -> Lease {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "localhost".to_owned());
        Lease {
            ttl: Duration::from_secs(30),
            retry_for: Duration::from_secs(10),
            owner: format!("{host}:{}", std::process::id()),
        }
    }
}

/// What taking the lease found.
pub(crate) struct Acquired {
    /// The fencing token now held.
    pub token: i64,
    /// Whether the session was created now.
    pub created: bool,
    /// The header line, verbatim.
    pub header: String,
    /// `(seq, line)` rows in seq order.
    pub rows: Vec<(i64, String)>,
    /// The sessions row's `next_seq`.
    pub next_seq: i64,
}

/// One group of appends for the writer thread.
struct Append {
    start: i64,
    end: i64,
    seqs: Vec<i64>,
    lines: Vec<String>,
    reply: std_mpsc::SyncSender<std::io::Result<()>>,
}

/// The session's sink: hands each group to the writer thread and waits for its answer.
/// Dropping it releases the lease and waits (a few seconds at most) until that is done, so a
/// closed session's lease is free when [`dsh_session::Session::close`] returns.
pub(crate) struct PgSink {
    tx: Option<mpsc::UnboundedSender<Append>>,
    done: std_mpsc::Receiver<()>,
}

impl Drop for PgSink {
    fn drop(&mut self) {
        drop(self.tx.take());
        let _ = self.done.recv_timeout(Duration::from_secs(5));
    }
}

impl LogSink for PgSink {
    fn append_durably(&mut self, _bytes: &[u8]) -> std::io::Result<()> {
        Err(std::io::Error::other(
            "the PostgreSQL store writes whole groups of lines with their seqs",
        ))
    }

    fn truncate(&mut self, _len: u64) -> std::io::Result<()> {
        // A failed group's statement was rolled back: nothing to cut.
        Ok(())
    }

    fn append_lines(&mut self, lines: &Lines<'_>) -> std::io::Result<()> {
        let bad = |what: &str| std::io::Error::other(format!("a group {what}"));
        let start = lines.first_seq().ok_or_else(|| bad("without lines"))?;
        let end = lines.end_seq().ok_or_else(|| bad("without lines"))?;
        let seq = |s: u64| i64::try_from(s).map_err(|_| bad("with a seq past i64"));
        let mut seqs = Vec::with_capacity(lines.len());
        let mut texts = Vec::with_capacity(lines.len());
        for line in lines.iter() {
            seqs.push(seq(line.seq)?);
            let text = std::str::from_utf8(line.text).map_err(|_| bad("with a non-UTF-8 line"))?;
            texts.push(text.to_owned());
        }
        let (reply, answer) = std_mpsc::sync_channel(1);
        let append = Append {
            start: seq(start)?,
            end: seq(end)?,
            seqs,
            lines: texts,
            reply,
        };
        self.tx
            .as_ref()
            .ok_or_else(|| std::io::Error::other("the store's writer connection stopped"))?
            .send(append)
            .map_err(|_| std::io::Error::other("the store's writer connection stopped"))?;
        answer
            .recv()
            .map_err(|_| std::io::Error::other("the store's writer connection stopped"))?
    }
}

/// Starts the writer thread for session `id`: connects, takes the lease (creating the session
/// with `new_header` when it is absent and that is given), reads its rows. Returns the sink and
/// what was found.
pub(crate) async fn start(
    config: Config,
    lease: Lease,
    id: String,
    new_header: Option<String>,
) -> Result<(PgSink, Acquired), StoreError> {
    let (tx, rx) = mpsc::unbounded_channel();
    let (ready_tx, ready_rx) = oneshot::channel();
    let (done_tx, done) = std_mpsc::sync_channel(1);
    let name = id.clone();
    std::thread::Builder::new()
        .name("dsh-store-postgres".to_owned())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(_) => return,
            };
            rt.block_on(async move {
                let mut writer = Writer {
                    config,
                    lease,
                    id,
                    token: 0,
                    client: None,
                    lost: None,
                };
                match writer.acquire(new_header.as_deref()).await {
                    Ok(acquired) => {
                        writer.token = acquired.token;
                        if ready_tx.send(Ok(acquired)).is_err() {
                            writer.release().await;
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                }
                writer.run(rx).await;
            });
            let _ = done_tx.send(());
        })
        .map_err(|_| StoreError::WriterGone(name.clone()))?;
    let acquired = ready_rx.await.map_err(|_| StoreError::WriterGone(name))??;
    Ok((PgSink { tx: Some(tx), done }, acquired))
}

struct Writer {
    config: Config,
    lease: Lease,
    id: String,
    token: i64,
    client: Option<Client>,
    /// Why appends are refused for good (the lease was lost).
    lost: Option<String>,
}

fn db(context: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    move |source| StoreError::Db { context, source }
}

/// Connects, driving the connection on the current runtime.
pub(crate) async fn connect(config: &Config) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "PostgreSQL connection ended");
        }
    });
    Ok(client)
}

const APPEND: &str = "
WITH s AS (
    UPDATE dsh_sessions
       SET next_seq = $4, updated_at = now(),
           lease_until = now() + make_interval(secs => $5)
     WHERE id = $1 AND lease_token = $2 AND next_seq = $3
 RETURNING id
), ins AS (
    INSERT INTO dsh_events (session_id, seq, line)
    SELECT s.id, u.seq, u.line FROM s, unnest($6::bigint[], $7::text[]) AS u(seq, line)
 RETURNING 1
)
SELECT (SELECT count(*) FROM s) AS updated,
       (SELECT count(*) FROM ins) AS inserted,
       (SELECT count(*) FROM (SELECT pg_notify('dsh_events', $1 || ' ' || $4::text) FROM s) n)
           AS notified";

impl Writer {
    fn ttl_secs(&self) -> f64 {
        self.lease.ttl.as_secs_f64()
    }

    async fn client(&mut self) -> Result<&Client, StoreError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = None;
            let client = connect(&self.config).await.map_err(db("connect"))?;
            self.client = Some(client);
        }
        match &self.client {
            Some(c) => Ok(c),
            None => Err(StoreError::WriterGone(self.id.clone())),
        }
    }

    /// Takes the lease (see the module docs) and reads the session.
    async fn acquire(&mut self, new_header: Option<&str>) -> Result<Acquired, StoreError> {
        let id = self.id.clone();
        let owner = self.lease.owner.clone();
        let ttl = self.ttl_secs();
        self.client().await?;
        let Some(client) = self.client.as_mut() else {
            return Err(StoreError::WriterGone(id));
        };
        let tx = client.transaction().await.map_err(db("begin"))?;
        let created = match new_header {
            Some(header) => {
                tx.execute(
                    "INSERT INTO dsh_sessions (id, header) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
                    &[&id, &header],
                )
                .await
                .map_err(db("create the session"))?
                    == 1
            }
            None => false,
        };
        let taken = tx
            .query_opt(
                "UPDATE dsh_sessions
                    SET lease_token = lease_token + 1, lease_owner = $2,
                        lease_backend = pg_backend_pid(),
                        lease_until = now() + make_interval(secs => $3)
                  WHERE id = $1
                    AND (lease_until IS NULL OR lease_until < now() OR lease_backend IS NULL
                         OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                                         WHERE a.pid = dsh_sessions.lease_backend))
              RETURNING lease_token, header, next_seq",
                &[&id, &owner, &ttl],
            )
            .await
            .map_err(db("take the lease"))?;
        let Some(row) = taken else {
            let holder = tx
                .query_opt(
                    "SELECT coalesce(lease_owner, ''), lease_until FROM dsh_sessions WHERE id = $1",
                    &[&id],
                )
                .await
                .map_err(db("read the lease"))?;
            return Err(match holder {
                None => StoreError::NoSuchSession(id),
                Some(h) => StoreError::Leased {
                    id,
                    owner: h.get(0),
                    until: crate::error::until_text(h.get(1)),
                },
            });
        };
        let rows = tx
            .query(
                "SELECT seq, line FROM dsh_events WHERE session_id = $1 ORDER BY seq",
                &[&id],
            )
            .await
            .map_err(db("read the session"))?
            .into_iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        tx.commit().await.map_err(db("commit the lease"))?;
        if !created {
            tracing::info!(session = %id, owner = %owner, "took the session's lease");
        }
        Ok(Acquired {
            token: row.get(0),
            created,
            header: row.get(1),
            rows,
            next_seq: row.get(2),
        })
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Append>) {
        let mut renew = tokio::time::interval(self.lease.ttl / 3);
        renew.tick().await;
        loop {
            tokio::select! {
                next = rx.recv() => match next {
                    Some(append) => {
                        let result = self.append(&append).await;
                        let _ = append.reply.send(result);
                    }
                    None => break,
                },
                _ = renew.tick() => self.renew().await,
            }
        }
        self.release().await;
    }

    /// Extends the lease; notes a lost lease (later appends are refused by the token anyway).
    async fn renew(&mut self) {
        if self.lost.is_some() {
            return;
        }
        let (id, token, ttl) = (self.id.clone(), self.token, self.ttl_secs());
        let Ok(client) = self.client().await else {
            return;
        };
        let updated = client
            .execute(
                "UPDATE dsh_sessions SET lease_until = now() + make_interval(secs => $3),
                        lease_backend = pg_backend_pid()
                  WHERE id = $1 AND lease_token = $2",
                &[&id, &token, &ttl],
            )
            .await;
        if let Ok(0) = updated {
            self.lose("another process took the session's lease over");
        }
    }

    fn lose(&mut self, why: &str) {
        let reason = format!("session {}: {why}; this process may not append", self.id);
        tracing::error!("{reason}");
        self.lost = Some(reason);
    }

    async fn release(&mut self) {
        if self.lost.is_some() {
            return;
        }
        let (id, token) = (self.id.clone(), self.token);
        if let Ok(client) = self.client().await {
            let _ = client
                .execute(
                    "UPDATE dsh_sessions SET lease_until = NULL, lease_backend = NULL
                      WHERE id = $1 AND lease_token = $2",
                    &[&id, &token],
                )
                .await;
        }
    }

    /// Writes one group (see the module docs), retrying a lost connection.
    async fn append(&mut self, a: &Append) -> std::io::Result<()> {
        if let Some(reason) = &self.lost {
            return Err(std::io::Error::other(reason.clone()));
        }
        let deadline = tokio::time::Instant::now() + self.lease.retry_for;
        let mut pause = Duration::from_millis(20);
        let mut retried = false;
        loop {
            match self.try_append(a, retried).await {
                Ok(()) => return Ok(()),
                Err(Attempt::Refused(reason)) => {
                    self.lose(&reason);
                    return Err(std::io::Error::other(self.lost.clone().unwrap_or(reason)));
                }
                Err(Attempt::Failed(e)) => return Err(std::io::Error::other(e)),
                Err(Attempt::Lost(e)) => {
                    self.client = None;
                    if tokio::time::Instant::now() + pause > deadline {
                        return Err(std::io::Error::other(format!(
                            "the connection to PostgreSQL was lost and not regained within {:?}: {e}",
                            self.lease.retry_for
                        )));
                    }
                    tracing::warn!(session = %self.id, error = %e, "store connection lost; retrying the append");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                    retried = true;
                }
            }
        }
    }

    async fn try_append(&mut self, a: &Append, retried: bool) -> Result<(), Attempt> {
        let (id, token, ttl) = (self.id.clone(), self.token, self.ttl_secs());
        let client = match self.client().await {
            Ok(c) => c,
            Err(e) => return Err(Attempt::Lost(e.to_string())),
        };
        if retried {
            // A new connection: the lease now lives with this backend.
            let moved = client
                .execute(
                    "UPDATE dsh_sessions SET lease_backend = pg_backend_pid() WHERE id = $1 AND lease_token = $2",
                    &[&id, &token],
                )
                .await
                .map_err(classify)?;
            if moved == 0 {
                return Err(Attempt::Refused(
                    "another process took the session's lease over while the connection was lost"
                        .to_owned(),
                ));
            }
        }
        let row = client
            .query_one(
                APPEND,
                &[&id, &token, &a.start, &a.end, &ttl, &a.seqs, &a.lines],
            )
            .await
            .map_err(classify)?;
        let updated: i64 = row.get(0);
        let inserted: i64 = row.get(1);
        if updated == 1 && usize::try_from(inserted).ok() == Some(a.seqs.len()) {
            return Ok(());
        }
        // Nothing was written: say why, or recognise a group committed before a lost connection.
        let now = client
            .query_opt(
                "SELECT next_seq, lease_token, coalesce(lease_owner, '') FROM dsh_sessions WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(classify)?;
        let Some(now) = now else {
            return Err(Attempt::Refused(
                "the session was deleted from the store".to_owned(),
            ));
        };
        let (next_seq, holder, owner): (i64, i64, String) = (now.get(0), now.get(1), now.get(2));
        if holder != token {
            return Err(Attempt::Refused(format!(
                "the session's lease was taken over by {owner} (fencing token {holder}, this writer held {token})"
            )));
        }
        if retried && next_seq == a.end {
            tracing::info!(session = %id, seq = a.start, "an append committed before the connection was lost was not written again");
            return Ok(());
        }
        Err(Attempt::Failed(format!(
            "the store's next seq is {next_seq}, not {} as this writer expected",
            a.start
        )))
    }
}

enum Attempt {
    /// The connection is gone: retry on a new one.
    Lost(String),
    /// The lease is gone: refuse this and every later append.
    Refused(String),
    /// Any other failure of this group.
    Failed(String),
}

fn classify(e: tokio_postgres::Error) -> Attempt {
    // A database error (a constraint, a bad statement) is final; anything else (a closed
    // connection, an I/O error, a server shutting down) is worth a new connection.
    match e.as_db_error() {
        Some(db) if !db.code().code().starts_with("57") && !db.code().code().starts_with("08") => {
            Attempt::Failed(format!("{e}: {}", db.message()))
        }
        _ => Attempt::Lost(e.to_string()),
    }
}
