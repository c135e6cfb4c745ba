//! Live readers: a session's lines as they are committed (`LISTEN`/`NOTIFY`).
//!
//! Guarantees: every line is delivered once, in seq order, starting at the seq asked for; a
//! notification only wakes the reader (the lines are read from the table), so a notification
//! lost with a connection loses nothing; a lost connection (a server restart, a terminated
//! backend, a network blip) is replaced by a new one, retried for up to [`Lease::retry_for`],
//! and the tail goes on from the next seq it had not delivered; the tail ends once every line
//! is delivered and no live process holds the session's lease (a writer reconnecting after its
//! connection dropped is live: the tail waits for it, up to the lease's takeover grace).

use std::time::Duration;

use futures::StreamExt as _;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, Config};

use crate::error::StoreError;
use crate::lease::Lease;
use crate::store::PgStore;

/// The notification channel every append notifies, with payload `<session id> <next seq>`.
pub const CHANNEL: &str = "dsh_events";

/// One line delivered by a tail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TailLine {
    /// The seq of the line's (first) event.
    pub seq: u64,
    /// The canonical line text, without its newline.
    pub line: String,
}

fn db(context: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    move |source| StoreError::Db { context, source }
}

/// How often a tail looks at the table without a notification (a safety net).
const POLL: Duration = Duration::from_millis(500);

/// A connection listening on [`CHANNEL`], and what wakes the tail of one session.
struct Listening {
    client: Client,
    wake: mpsc::Receiver<()>,
}

/// Connects and listens for the appends of session `id`.
async fn listen(config: &Config, id: &str) -> Result<Listening, StoreError> {
    let (client, mut connection) = crate::writer::connect_raw(config).await?;
    let (wake_tx, wake) = mpsc::channel::<()>(1);
    let id = id.to_owned();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n))
                    if n.payload().rsplit_once(' ').map(|(s, _)| s) == Some(&id) =>
                {
                    let _ = wake_tx.try_send(());
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .map_err(db("listen"))?;
    Ok(Listening { client, wake })
}

/// Whether `e` is a lost connection a new one may mend (not an answer of the database).
fn lost(e: &StoreError) -> bool {
    match e {
        StoreError::Db { source, .. } => crate::writer::connection_lost(source),
        StoreError::ConnectTimeout { .. } => true,
        _ => false,
    }
}

/// Whether the session is being written, then its rows from seq `next` on. Whether the writer
/// is gone is read BEFORE the lines, so the last lines it wrote are read after.
async fn look(
    client: &Client,
    id: &str,
    next: i64,
    lease: &Lease,
) -> Result<(bool, Vec<tokio_postgres::Row>), StoreError> {
    let live = crate::store::leased(client, id, lease).await?;
    let rows = client
        .query(
            "SELECT seq, line FROM dsh_events WHERE session_id = $1 AND seq >= $2 ORDER BY seq",
            &[&id, &next],
        )
        .await
        .map_err(db("read the session"))?;
    Ok((live, rows))
}

impl PgStore {
    /// Tails session `id` from seq `from`: sends each committed line to the returned channel,
    /// in seq order; the channel closes once the writer is gone and every line was sent, or on
    /// an error (sent last). A writer gone without closing the session (killed, or cut off
    /// until its lease expired) ends the tail with [`StoreError::Abandoned`]. A lost connection is replaced and the tail goes on; only one not
    /// regained within [`Lease::retry_for`] ends it, with that error.
    pub async fn tail(
        &self,
        id: &str,
        from: u64,
    ) -> Result<mpsc::Receiver<Result<TailLine, StoreError>>, StoreError> {
        let first = listen(self.config(), id).await?;
        let (tx, rx) = mpsc::channel(256);
        let id = id.to_owned();
        let lease = self.lease().clone();
        let config = self.config().clone();
        tokio::spawn(async move {
            let mut next = i64::try_from(from).unwrap_or(i64::MAX);
            let mut listening = Some(first);
            let mut pause = Duration::from_millis(20);
            // When the connection was lost, while it is.
            let mut lost_at: Option<tokio::time::Instant> = None;
            loop {
                let looked = match &listening {
                    Some(l) => look(&l.client, &id, next, &lease).await,
                    None => match listen(&config, &id).await {
                        Ok(l) => {
                            let looked = look(&l.client, &id, next, &lease).await;
                            listening = Some(l);
                            looked
                        }
                        Err(e) => Err(e),
                    },
                };
                let (live, rows) = match looked {
                    Ok(looked) => {
                        if lost_at.take().is_some() {
                            tracing::info!(session = %id, "tail: connection regained");
                        }
                        pause = Duration::from_millis(20);
                        looked
                    }
                    Err(e) if lost(&e) => {
                        listening = None;
                        let since = *lost_at.get_or_insert_with(tokio::time::Instant::now);
                        if since.elapsed() + pause > lease.retry_for {
                            let _ = tx.send(Err(e)).await;
                            return;
                        }
                        tracing::warn!(session = %id, error = %e, "tail: connection lost; reconnecting");
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_millis(500));
                        continue;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                };
                for row in rows {
                    let seq: i64 = row.get(0);
                    next = seq + 1;
                    let line = TailLine {
                        seq: u64::try_from(seq).unwrap_or(0),
                        line: row.get(1),
                    };
                    if tx.send(Ok(line)).await.is_err() {
                        return;
                    }
                }
                if !live {
                    // Gone: closed (its lease released), or stopped without closing, which
                    // the reader is told last.
                    if let Some(l) = &listening {
                        match crate::lease::unreleased(&l.client, &id).await {
                            Ok(Some(owner)) => {
                                let _ = tx
                                    .send(Err(StoreError::Abandoned {
                                        session: id.clone(),
                                        owner,
                                    }))
                                    .await;
                            }
                            Ok(None) => {}
                            Err(e) => {
                                let _ = tx.send(Err(e)).await;
                            }
                        }
                    }
                    return;
                }
                if let Some(l) = &mut listening {
                    let _ = tokio::time::timeout(POLL, l.wake.recv()).await;
                }
            }
        });
        Ok(rx)
    }
}
