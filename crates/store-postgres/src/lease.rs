//! Taking a session's lease (spec I4 over PostgreSQL): the fencing token and who holds it.
//!
//! Guarantees: taking the lease is one transaction that creates the session when asked, bumps
//! its fencing token and records the holder's writer backend, and reads its rows; it succeeds
//! only when no live process holds the lease, otherwise nothing changes and the holder is
//! named. No live process holds it when it is unheld or expired, or when the holder's recorded
//! backend is gone AND either its process is known dead (an owner `host:pid` of this host
//! whose pid is not running or a zombie) or, for a holder whose process cannot be seen (another host,
//! another owner form), the backend stayed gone for [`Lease::takeover_grace`] under the same
//! fencing token. A holder of this host whose process is running keeps its lease until it
//! expires, even with its backend gone (a stopped process cannot renew, but is not dead). A live holder whose connection dropped (a network blip, a pooler
//! or server restart) renews on a new connection at once (`writer.rs`), which records its new
//! backend: it is never taken over for a dropped connection.

use std::path::Path;
use std::time::Duration;

use tokio_postgres::Client;

use crate::error::StoreError;

/// How a store's sessions hold their leases.
#[derive(Clone, Debug)]
pub struct Lease {
    /// How long a lease lasts without renewal (default 30 s). The store's writer renews every
    /// lease it holds every third of this.
    pub ttl: Duration,
    /// How long a lost connection is retried before an append fails (default 10 s).
    pub retry_for: Duration,
    /// Who holds it, as other processes are told (default `host:pid`; in that form a taker
    /// on the same host can tell the holder's process died).
    pub owner: String,
    /// How long a holder's backend must stay gone, its lease unrenewed, before another process
    /// takes the lease over, when the holder's process cannot be seen (another host, another
    /// owner form; a holder of this host is taken over at once when its process is gone, and
    /// only at expiry while it runs); default 3 s: a live holder reconnects well within it. A
    /// reader asking whether the session is being written ([`crate::PgStore::is_leased`], a
    /// tail) watches such a holder for as long before it answers no.
    pub takeover_grace: Duration,
}

impl Default for Lease {
    fn default() -> Lease {
        Lease {
            ttl: Duration::from_secs(30),
            retry_for: Duration::from_secs(10),
            owner: format!("{}:{}", host(), std::process::id()),
            takeover_grace: Duration::from_secs(3),
        }
    }
}

/// This machine's name, as owners are written.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned())
}

/// For an `owner` that names another process of this host (`host:pid`), whether that process
/// is running; `None` for an owner of another host, of another form, or this very process
/// (which cannot tell its own forgotten handle from a live one).
fn running_here(owner: &str) -> Option<bool> {
    let (host_name, pid) = owner.rsplit_once(':')?;
    let pid = pid.parse::<u32>().ok()?;
    // Without `/proc` (not Linux) no process can be seen: the grace applies.
    if host_name != host() || pid == std::process::id() || !Path::new("/proc/self").exists() {
        return None;
    }
    // A zombie (killed, not yet reaped by its parent) is dead: its state follows the command
    // name's closing parenthesis in `/proc/PID/stat`.
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Some(false);
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    Some(!matches!(state, Some('Z' | 'X')))
}

/// The lease as another process sees it.
struct Holder {
    token: i64,
    owner: String,
    /// Unheld or expired.
    free: bool,
    /// Its recorded backend is connected.
    alive: bool,
}

async fn holder(client: &Client, id: &str) -> Result<Option<Holder>, StoreError> {
    let row = client
        .query_opt(
            "SELECT lease_token, coalesce(lease_owner, ''),
                    lease_until IS NULL OR lease_until < now() OR lease_backend IS NULL,
                    EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = d.lease_backend)
               FROM dsh_sessions d WHERE id = $1",
            &[&id],
        )
        .await
        .map_err(db("read the lease"))?;
    Ok(row.map(|r| Holder {
        token: r.get(0),
        owner: r.get(1),
        free: r.get(2),
        alive: r.get(3),
    }))
}

/// Where a session's lease stands, as another process judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Unheld or expired.
    Free,
    /// Held by a live process: its backend is connected, or came back within the grace.
    Live,
    /// Held under this fencing token by a holder whose backend is gone for good: its process
    /// died here, or its backend stayed gone for [`Lease::takeover_grace`].
    Gone(i64),
}

/// Judges session `id`'s lease (`None`: no such session). A holder whose backend is gone but
/// whose process cannot be seen to have died is watched for up to the grace: a live holder
/// whose connection dropped reconnects within it, and is then [`Standing::Live`]. So a reader
/// (`dsh check`, a tail, the viewer) never takes a writer that is reconnecting for a dead one,
/// by the same rule a taker uses.
pub(crate) async fn standing(
    client: &Client,
    id: &str,
    lease: &Lease,
) -> Result<Option<Standing>, StoreError> {
    let Some(first) = holder(client, id).await? else {
        return Ok(None);
    };
    if first.free {
        return Ok(Some(Standing::Free));
    }
    if first.alive {
        return Ok(Some(Standing::Live));
    }
    match running_here(&first.owner) {
        Some(false) => return Ok(Some(Standing::Gone(first.token))),
        // Running here, yet its backend is gone: stopped (a debugger, SIGSTOP, a suspended
        // laptop) or unable to reach the database. It is live until its lease expires.
        Some(true) => return Ok(Some(Standing::Live)),
        None => {}
    }
    let until = tokio::time::Instant::now() + lease.takeover_grace;
    loop {
        let now = tokio::time::Instant::now();
        if now >= until {
            return Ok(Some(Standing::Gone(first.token)));
        }
        tokio::time::sleep((until - now).min(Duration::from_millis(100))).await;
        let Some(h) = holder(client, id).await? else {
            return Ok(None);
        };
        if h.free {
            return Ok(Some(Standing::Free));
        }
        if h.alive || h.token != first.token {
            // The holder came back, or another process took the lease (and is connected to
            // do so): live either way.
            return Ok(Some(Standing::Live));
        }
    }
}

/// The holder of session `id`'s lease when that lease was never released (its writer did not
/// close the session): `None` once released, or when there is no such session. Only
/// meaningful once the lease is known not to be live ([`standing`]).
pub(crate) async fn unreleased(client: &Client, id: &str) -> Result<Option<String>, StoreError> {
    let row = client
        .query_opt(
            "SELECT coalesce(lease_owner, '') FROM dsh_sessions WHERE id = $1 AND lease_until IS NOT NULL",
            &[&id],
        )
        .await
        .map_err(db("read the lease"))?;
    Ok(row.map(|r| r.get(0)))
}

/// The fencing token of a holder whose backend is gone and which may be taken over now (see
/// [`standing`]). `None` when the lease is free, held by a live backend, or its holder came
/// back.
async fn gone_holder(client: &Client, id: &str, lease: &Lease) -> Result<Option<i64>, StoreError> {
    Ok(match standing(client, id, lease).await? {
        Some(Standing::Gone(token)) => Some(token),
        _ => None,
    })
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

fn db(context: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    move |source| StoreError::Db { context, source }
}

/// Takes session `id`'s lease for the writer whose backend is `backend` (creating the session
/// with `new_header` when it is absent and that is given), and reads the session.
pub(crate) async fn acquire(
    client: &mut Client,
    id: &str,
    new_header: Option<&str>,
    lease: &Lease,
    backend: i32,
) -> Result<Acquired, StoreError> {
    let ttl = lease.ttl.as_secs_f64();
    // A holder whose backend is gone may still be alive, reconnecting: taken over only as the
    // module docs say (the token seen, so a holder that came back in between keeps it).
    let gone = gone_holder(client, id, lease).await?;
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
                    lease_backend = $4,
                    lease_until = now() + make_interval(secs => $3)
              WHERE id = $1
                AND (lease_until IS NULL OR lease_until < now() OR lease_backend IS NULL
                     OR (lease_token = $5
                         AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                                          WHERE a.pid = dsh_sessions.lease_backend)))
          RETURNING lease_token, header, next_seq",
            &[&id, &lease.owner, &ttl, &backend, &gone],
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
            None => StoreError::NoSuchSession(id.to_owned()),
            Some(h) => StoreError::Leased {
                id: id.to_owned(),
                owner: h.get(0),
                until: crate::error::until_text(h.get(1)),
            },
        });
    };
    let rows = event_rows(&tx, id).await?;
    tx.commit().await.map_err(db("commit the lease"))?;
    if !created {
        tracing::info!(session = %id, owner = %lease.owner, "took the session's lease");
    }
    Ok(Acquired {
        token: row.get(0),
        created,
        header: row.get(1),
        rows,
        next_seq: row.get(2),
    })
}

/// A session's `(seq, line)` rows in seq order, read through `client` (a connection or a
/// transaction).
pub(crate) async fn event_rows(
    client: &impl tokio_postgres::GenericClient,
    id: &str,
) -> Result<Vec<(i64, String)>, StoreError> {
    Ok(client
        .query(
            "SELECT seq, line FROM dsh_events WHERE session_id = $1 ORDER BY seq",
            &[&id],
        )
        .await
        .map_err(db("read the session"))?
        .into_iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect())
}
