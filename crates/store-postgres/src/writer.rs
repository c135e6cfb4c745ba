//! The store's shared writer (spec L3 over PostgreSQL): one connection, on the store's
//! background thread, that commits the appends of every session opened from the store handle
//! and holds their leases.
//!
//! It takes every message waiting, then commits all the waiting groups of appends (of any
//! number of sessions) in ONE statement, so concurrent appends are group-committed across
//! sessions as well as within one; it renews every lease it holds in one statement every third
//! of the lease's time to live, and releases closed sessions' leases.
//!
//! Guarantees:
//! - a statement is one transaction (committed with `synchronous_commit` as the server has it,
//!   on by default); each session's group in it moves that session's `next_seq` from the
//!   group's first seq to its end only if the lease token is still the sink's AND `next_seq` is
//!   the group's first seq, and only that group's rows are inserted with it: a writer that lost
//!   a lease (fencing) appends nothing to that session, and no seq is ever written twice or
//!   skipped;
//! - an append is acknowledged only once that statement returned (committed);
//! - per-session order: a session hands over its next group only after the previous one was
//!   answered, so a statement holds at most one group per session and sink;
//! - a group refused by the database (a constraint) is retried alone, so it fails only its own
//!   session, never the others committed with it;
//! - a connection lost mid-statement (the backend terminated, the server restarted) is retried
//!   on a new connection for up to [`Lease::retry_for`]: a group that is not applied by the
//!   retry and whose session's `next_seq` is already the group's end, under this sink's token,
//!   was committed before the connection was lost (idempotent), never written twice;
//! - every append and renewal records this connection's backend as the lease's, and when the
//!   connection ends the leases are renewed on a new one at once: a live holder's backend is
//!   missing only while it reconnects, which a taker waits out (`lease.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc, oneshot};
use tokio_postgres::{Client, Config, NoTls, Statement};

use crate::error::StoreError;
use crate::lease::Lease;

/// Groups or lines of text past which a statement is split.
const MAX_GROUPS: usize = 2048;
const MAX_BYTES: usize = 16 << 20;

/// A message to the writer.
pub(crate) enum Msg {
    /// One session's group of appends.
    Append(Append),
    /// A lease was taken: renew it from now on.
    Hold { id: String, token: i64 },
    /// A session was closed: release its lease, then answer.
    Release {
        id: String,
        token: i64,
        done: std_mpsc::SyncSender<()>,
    },
    /// Asks for the writer connection's backend pid (connecting first if needed).
    Backend(oneshot::Sender<Result<i32, StoreError>>),
}

/// One group of appends of one session.
pub(crate) struct Append {
    pub id: String,
    pub token: i64,
    pub start: i64,
    pub end: i64,
    pub seqs: Vec<i64>,
    pub lines: Vec<String>,
    pub reply: std_mpsc::SyncSender<std::io::Result<()>>,
}

impl Append {
    fn bytes(&self) -> usize {
        self.lines.iter().map(String::len).sum()
    }
}

/// How long a connection may take, socket and start-up together, when the URL does not say
/// (`connect_timeout`): a server or proxy that accepts and then says nothing must not hang dsh.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects within the URL's `connect_timeout` (default [`CONNECT_TIMEOUT`]) for the whole
/// start-up, not only the socket (tokio-postgres's own limit covers the socket alone).
pub(crate) async fn connect_raw(
    config: &Config,
) -> Result<
    (
        Client,
        tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>,
    ),
    StoreError,
> {
    let after = config
        .get_connect_timeout()
        .copied()
        .unwrap_or(CONNECT_TIMEOUT);
    match tokio::time::timeout(after, config.connect(NoTls)).await {
        Ok(Ok(connected)) => Ok(connected),
        Ok(Err(source)) => Err(StoreError::Connect {
            target: crate::target::described(config),
            source,
        }),
        Err(_) => Err(StoreError::ConnectTimeout {
            target: crate::target::described(config),
            after,
        }),
    }
}

/// Connects, driving the connection on the current runtime.
pub(crate) async fn connect(config: &Config) -> Result<Client, StoreError> {
    connect_watched(config, None).await
}

/// Connects as [`connect`]; `ended`, when given, is notified once the connection has ended
/// (the server closed it, the backend was terminated, the network failed, or it was dropped).
async fn connect_watched(
    config: &Config,
    ended: Option<Arc<Notify>>,
) -> Result<Client, StoreError> {
    let (client, connection) = connect_raw(config).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "PostgreSQL connection ended");
        }
        if let Some(ended) = ended {
            ended.notify_one();
        }
    });
    Ok(client)
}

const APPEND: &str = "
WITH g AS (
    SELECT * FROM unnest($1::int[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[])
        AS g(gi, id, token, first_seq, end_seq)
), s AS (
    UPDATE dsh_sessions d
       SET next_seq = g.end_seq, updated_at = now(),
           lease_until = now() + make_interval(secs => $6),
           lease_backend = pg_backend_pid()
      FROM g
     WHERE d.id = g.id AND d.lease_token = g.token AND d.next_seq = g.first_seq
 RETURNING g.gi, d.id, d.next_seq
), ins AS (
    INSERT INTO dsh_events (session_id, seq, line)
    SELECT s.id, u.seq, u.line
      FROM unnest($7::int[], $8::bigint[], $9::text[]) AS u(gi, seq, line)
      JOIN s ON s.gi = u.gi
 RETURNING 1
)
SELECT s.gi,
       (SELECT count(*) FROM ins) AS inserted,
       (SELECT count(*) FROM (SELECT pg_notify('dsh_events', s2.id || ' ' || s2.next_seq::text)
                                FROM s s2) n) AS notified
  FROM s";

/// [`APPEND`] for a statement of one group (one session appending: the common case), which
/// the server runs in about two thirds of [`APPEND`]'s time for the same group: no arrays of
/// groups to unnest and join, no hash join of the rows to their group. Same guarantees: the
/// fenced update of the session row, the group's rows inserted only if it matched, the notify.
/// One row back when the group was applied, none when not. Unlike [`APPEND`] it does not count
/// the rows inserted: the update matched at most one row (`id` is the key), so the insert is of
/// exactly the group's rows, or the statement fails.
pub(crate) const APPEND_ONE: &str = "
WITH s AS (
    UPDATE dsh_sessions
       SET next_seq = $4, updated_at = now(),
           lease_until = now() + make_interval(secs => $5),
           lease_backend = pg_backend_pid()
     WHERE id = $1 AND lease_token = $2 AND next_seq = $3
 RETURNING id, next_seq
), ins AS (
    INSERT INTO dsh_events (session_id, seq, line)
    SELECT s.id, u.seq, u.line FROM s, unnest($6::bigint[], $7::text[]) AS u(seq, line)
)
SELECT pg_notify('dsh_events', s.id || ' ' || s.next_seq::text) FROM s";

const RENEW: &str = "
UPDATE dsh_sessions d
   SET lease_until = now() + make_interval(secs => $3), lease_backend = pg_backend_pid()
  FROM unnest($1::text[], $2::bigint[]) AS h(id, token)
 WHERE d.id = h.id AND d.lease_token = h.token
RETURNING d.id, d.lease_token";

const RELEASE: &str = "
UPDATE dsh_sessions d SET lease_until = NULL, lease_backend = NULL
  FROM unnest($1::text[], $2::bigint[]) AS h(id, token)
 WHERE d.id = h.id AND d.lease_token = h.token";

struct Conn {
    client: Client,
    append: Statement,
    append_one: Statement,
    pid: i32,
}

/// The writer (see the module docs).
pub(crate) struct Writer {
    config: Config,
    lease: Lease,
    conn: Option<Conn>,
    /// Leases held, by `(session, token)`, with why appends are refused for good (lost).
    held: HashMap<(String, i64), Option<String>>,
    /// Notified when the writer's connection ends: the leases held are re-registered on a new
    /// one at once, so a live holder never looks dead for longer than a reconnection.
    ended: Arc<Notify>,
}

/// Why one attempt at a statement failed.
enum Attempt {
    /// The connection is gone: retry on a new one.
    Lost(String),
    /// Any other failure of the statement.
    Failed(String),
}

/// What became of one group.
enum Outcome {
    Done,
    /// The lease is gone: refuse this and every later append of this sink.
    Refused(String),
    Failed(String),
}

/// Whether `e` lost the connection rather than answered: a closed connection, an I/O error, a
/// server shutting down or a backend terminated (SQLSTATE classes 57 and 08) is worth a new
/// connection; a database error (a constraint, a bad statement) is final.
pub(crate) fn connection_lost(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_none_or(|db| {
        let code = db.code().code();
        code.starts_with("57") || code.starts_with("08")
    })
}

fn classify(e: tokio_postgres::Error) -> Attempt {
    match e.as_db_error() {
        Some(db) if !connection_lost(&e) => Attempt::Failed(format!("{e}: {}", db.message())),
        _ => Attempt::Lost(e.to_string()),
    }
}

impl Writer {
    pub(crate) fn new(config: Config, lease: Lease) -> Writer {
        Writer {
            config,
            lease,
            conn: None,
            held: HashMap::new(),
            ended: Arc::new(Notify::new()),
        }
    }

    fn ttl_secs(&self) -> f64 {
        self.lease.ttl.as_secs_f64()
    }

    async fn conn(&mut self) -> Result<&Conn, Attempt> {
        if self.conn.as_ref().is_none_or(|c| c.client.is_closed()) {
            self.conn = None;
            let lost = |e: StoreError| Attempt::Lost(e.to_string());
            let client = connect_watched(&self.config, Some(self.ended.clone()))
                .await
                .map_err(lost)?;
            let append = client.prepare(APPEND).await.map_err(classify)?;
            let append_one = client.prepare(APPEND_ONE).await.map_err(classify)?;
            let pid = client
                .query_one("SELECT pg_backend_pid()", &[])
                .await
                .map_err(classify)?
                .get(0);
            self.conn = Some(Conn {
                client,
                append,
                append_one,
                pid,
            });
        }
        self.conn
            .as_ref()
            .ok_or_else(|| Attempt::Lost("no connection".to_owned()))
    }

    /// Answers messages until every sender (the store handle, each session's sink) is gone.
    pub(crate) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) {
        let mut renew = tokio::time::interval((self.lease.ttl / 3).max(Duration::from_millis(10)));
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        renew.tick().await;
        let ended = self.ended.clone();
        let mut batch = Vec::new();
        loop {
            tokio::select! {
                n = rx.recv_many(&mut batch, MAX_GROUPS) => {
                    if n == 0 {
                        break;
                    }
                    self.handle(std::mem::take(&mut batch)).await;
                }
                _ = renew.tick() => {
                    self.renew().await;
                }
                () = ended.notified() => self.regain().await,
            }
        }
    }

    /// After the connection ended: a new one, on which every lease held is renewed, which
    /// records the new backend as the holder's (retried for up to [`Lease::retry_for`]; the
    /// regular renewal tries again after that).
    async fn regain(&mut self) {
        if self.conn.as_ref().is_some_and(|c| !c.client.is_closed()) {
            // An earlier connection's end: the current one is live.
            return;
        }
        self.conn = None;
        let deadline = tokio::time::Instant::now() + self.lease.retry_for;
        let mut pause = Duration::from_millis(20);
        while !self.renew().await && tokio::time::Instant::now() + pause <= deadline {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    async fn handle(&mut self, messages: Vec<Msg>) {
        let mut appends = Vec::new();
        let mut releases = Vec::new();
        for m in messages {
            match m {
                Msg::Hold { id, token } => {
                    self.held.insert((id, token), None);
                }
                Msg::Append(a) => match self.held.get(&(a.id.clone(), a.token)) {
                    Some(Some(lost)) => {
                        let _ = a.reply.send(Err(std::io::Error::other(lost.clone())));
                    }
                    _ => appends.push(a),
                },
                Msg::Release { id, token, done } => releases.push((id, token, done)),
                Msg::Backend(reply) => {
                    let pid = self
                        .conn()
                        .await
                        .map(|c| c.pid)
                        .map_err(|e| StoreError::WriterConnect(attempt_text(e)));
                    let _ = reply.send(pid);
                }
            }
        }
        // Split only past the limits: everything waiting is one statement otherwise.
        let mut group = Vec::new();
        let mut bytes = 0;
        for a in appends {
            bytes += a.bytes();
            group.push(a);
            if bytes >= MAX_BYTES {
                self.commit(std::mem::take(&mut group)).await;
                bytes = 0;
            }
        }
        if !group.is_empty() {
            self.commit(group).await;
        }
        if !releases.is_empty() {
            self.release(releases).await;
        }
    }

    /// Commits `groups` and answers each.
    async fn commit(&mut self, groups: Vec<Append>) {
        let outcomes = match self.attempt(&groups).await {
            Err(Attempt::Failed(e)) if groups.len() > 1 => {
                // One group may be the cause (a constraint): each alone, so only it fails.
                tracing::warn!(error = %e, groups = groups.len(), "a group commit failed; retrying its groups one by one");
                let mut outcomes = Vec::with_capacity(groups.len());
                for g in &groups {
                    outcomes.push(match self.attempt(std::slice::from_ref(g)).await {
                        Ok(mut one) => one.pop().unwrap_or(Outcome::Failed(e.clone())),
                        Err(Attempt::Failed(e) | Attempt::Lost(e)) => Outcome::Failed(e),
                    });
                }
                outcomes
            }
            Err(Attempt::Failed(e) | Attempt::Lost(e)) => {
                groups.iter().map(|_| Outcome::Failed(e.clone())).collect()
            }
            Ok(outcomes) => outcomes,
        };
        for (g, outcome) in groups.into_iter().zip(outcomes) {
            let answer = match outcome {
                Outcome::Done => Ok(()),
                Outcome::Failed(e) => Err(std::io::Error::other(e)),
                Outcome::Refused(why) => {
                    let reason = format!("session {}: {why}; this process may not append", g.id);
                    // Returned to this append and every later one: not said twice.
                    tracing::debug!("{reason}");
                    self.held
                        .insert((g.id.clone(), g.token), Some(reason.clone()));
                    Err(std::io::Error::other(reason))
                }
            };
            let _ = g.reply.send(answer);
        }
    }

    /// One statement for `groups`, retrying a lost connection until [`Lease::retry_for`]
    /// (`Attempt::Lost` then says it was not regained; `Attempt::Failed` is a database error).
    async fn attempt(&mut self, groups: &[Append]) -> Result<Vec<Outcome>, Attempt> {
        let deadline = tokio::time::Instant::now() + self.lease.retry_for;
        let mut pause = Duration::from_millis(20);
        let mut retried = false;
        loop {
            match self.try_statement(groups, retried).await {
                Ok(outcomes) => return Ok(outcomes),
                Err(Attempt::Failed(e)) => return Err(Attempt::Failed(e)),
                Err(Attempt::Lost(e)) => {
                    self.conn = None;
                    if tokio::time::Instant::now() + pause > deadline {
                        return Err(Attempt::Lost(format!(
                            "the connection to PostgreSQL was lost and not regained within {:?}: {e}",
                            self.lease.retry_for
                        )));
                    }
                    tracing::warn!(error = %e, groups = groups.len(), "store connection lost; retrying the appends");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                    retried = true;
                }
            }
        }
    }

    async fn try_statement(
        &mut self,
        groups: &[Append],
        retried: bool,
    ) -> Result<Vec<Outcome>, Attempt> {
        let n = groups.len();
        let done = match groups {
            [one] => vec![self.apply_one(one).await?],
            _ => self.apply(groups).await?,
        };
        if done.iter().all(|d| *d) {
            return Ok((0..n).map(|_| Outcome::Done).collect());
        }
        let conn = self.conn().await?;
        // Groups not applied: say why, or recognise one committed before a lost connection.
        let missing: Vec<&str> = groups
            .iter()
            .zip(&done)
            .filter(|(_, d)| !**d)
            .map(|(g, _)| g.id.as_str())
            .collect();
        let now = conn
            .client
            .query(
                "SELECT id, next_seq, lease_token, coalesce(lease_owner, '') FROM dsh_sessions WHERE id = ANY($1)",
                &[&missing],
            )
            .await
            .map_err(classify)?;
        let now: HashMap<String, (i64, i64, String)> = now
            .into_iter()
            .map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3))))
            .collect();
        Ok(groups
            .iter()
            .zip(done)
            .map(|(g, d)| {
                if d {
                    return Outcome::Done;
                }
                let Some((next_seq, holder, owner)) = now.get(&g.id) else {
                    return Outcome::Refused("the session was deleted from the store".to_owned());
                };
                if *holder != g.token {
                    return Outcome::Refused(format!(
                        "the session's lease was taken over by {owner} (fencing token {holder}, this writer held {})",
                        g.token
                    ));
                }
                if retried && *next_seq == g.end {
                    tracing::info!(session = %g.id, seq = g.start, "an append committed before the connection was lost was not written again");
                    return Outcome::Done;
                }
                Outcome::Failed(format!(
                    "the store's next seq is {next_seq}, not {} as this writer expected",
                    g.start
                ))
            })
            .collect())
    }

    /// Runs [`APPEND_ONE`] for one group: whether it was applied.
    async fn apply_one(&mut self, g: &Append) -> Result<bool, Attempt> {
        let ttl = self.ttl_secs();
        let lines: Vec<&str> = g.lines.iter().map(String::as_str).collect();
        let conn = self.conn().await?;
        let applied = conn
            .client
            .query(
                &conn.append_one,
                &[&g.id, &g.token, &g.start, &g.end, &ttl, &g.seqs, &lines],
            )
            .await
            .map_err(classify)?;
        Ok(!applied.is_empty())
    }

    /// Runs [`APPEND`] for several groups: whether each was applied.
    async fn apply(&mut self, groups: &[Append]) -> Result<Vec<bool>, Attempt> {
        let ttl = self.ttl_secs();
        let n = groups.len();
        let (mut gi, mut ids, mut tokens, mut starts, mut ends) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let rows: usize = groups.iter().map(|g| g.seqs.len()).sum();
        let (mut row_gi, mut seqs, mut lines) = (
            Vec::with_capacity(rows),
            Vec::with_capacity(rows),
            Vec::with_capacity(rows),
        );
        for (i, g) in groups.iter().enumerate() {
            let i = i32::try_from(i).unwrap_or(i32::MAX);
            gi.push(i);
            ids.push(g.id.as_str());
            tokens.push(g.token);
            starts.push(g.start);
            ends.push(g.end);
            for (seq, line) in g.seqs.iter().zip(&g.lines) {
                row_gi.push(i);
                seqs.push(*seq);
                lines.push(line.as_str());
            }
        }
        let conn = self.conn().await?;
        let applied = conn
            .client
            .query(
                &conn.append,
                &[
                    &gi, &ids, &tokens, &starts, &ends, &ttl, &row_gi, &seqs, &lines,
                ],
            )
            .await
            .map_err(classify)?;
        let mut done = vec![false; n];
        for row in &applied {
            if let Some(d) = usize::try_from(row.get::<_, i32>(0))
                .ok()
                .and_then(|i| done.get_mut(i))
            {
                *d = true;
            }
        }
        if let Some(row) = applied.first() {
            let inserted: i64 = row.get(1);
            let expected: usize = groups
                .iter()
                .zip(&done)
                .filter(|(_, d)| **d)
                .map(|(g, _)| g.seqs.len())
                .sum();
            if usize::try_from(inserted).ok() != Some(expected) {
                return Err(Attempt::Failed(format!(
                    "the store inserted {inserted} rows for {expected} lines"
                )));
            }
        }
        Ok(done)
    }

    /// Extends every lease held, recording this connection's backend as their holder's;
    /// notes the ones lost (their appends are refused by the token anyway). Whether the
    /// database was reached (true when nothing is held).
    async fn renew(&mut self) -> bool {
        let (ids, tokens): (Vec<String>, Vec<i64>) = self
            .held
            .iter()
            .filter(|(_, lost)| lost.is_none())
            .map(|((id, token), _)| (id.clone(), *token))
            .unzip();
        if ids.is_empty() {
            return true;
        }
        let ttl = self.ttl_secs();
        let Ok(conn) = self.conn().await else {
            return false;
        };
        let Ok(renewed) = conn.client.query(RENEW, &[&ids, &tokens, &ttl]).await else {
            self.conn = None;
            return false;
        };
        let renewed: std::collections::HashSet<(String, i64)> =
            renewed.into_iter().map(|r| (r.get(0), r.get(1))).collect();
        for (id, token) in ids.into_iter().zip(tokens) {
            if !renewed.contains(&(id.clone(), token)) {
                let reason = format!(
                    "session {id}: another process took the session's lease over; this process may not append"
                );
                tracing::error!("{reason}");
                self.held.insert((id, token), Some(reason));
            }
        }
        true
    }

    async fn release(&mut self, releases: Vec<(String, i64, std_mpsc::SyncSender<()>)>) {
        let mut ids = Vec::new();
        let mut tokens = Vec::new();
        for (id, token, _) in &releases {
            if let Some(None) = self.held.remove(&(id.clone(), *token)) {
                ids.push(id.as_str());
                tokens.push(*token);
            }
        }
        if !ids.is_empty()
            && let Ok(conn) = self.conn().await
        {
            let _ = conn.client.execute(RELEASE, &[&ids, &tokens]).await;
        }
        for (_, _, done) in releases {
            let _ = done.send(());
        }
    }
}

fn attempt_text(a: Attempt) -> String {
    match a {
        Attempt::Lost(e) | Attempt::Failed(e) => e,
    }
}
