//! Live readers: a session's lines as they are committed (`LISTEN`/`NOTIFY`).
//!
//! Guarantees: every line is delivered once, in seq order, starting at the seq asked for; a
//! notification only wakes the reader (the lines are read from the table), so a notification
//! lost with a connection loses nothing; the tail ends once every line is delivered and no live
//! process holds the session's lease (a writer reconnecting after its connection dropped is
//! live: the tail waits for it, up to the lease's takeover grace).

use std::time::Duration;

use futures::StreamExt as _;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

use crate::error::StoreError;
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

impl PgStore {
    /// Tails session `id` from seq `from`: sends each committed line to the returned channel,
    /// in seq order; the channel closes once the writer is gone and every line was sent, or on
    /// an error (sent last).
    pub async fn tail(
        &self,
        id: &str,
        from: u64,
    ) -> Result<mpsc::Receiver<Result<TailLine, StoreError>>, StoreError> {
        let (client, mut connection) = crate::writer::connect_raw(self.config()).await?;
        let (wake_tx, mut wake_rx) = mpsc::channel::<()>(1);
        let id_owned = id.to_owned();
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(AsyncMessage::Notification(n))
                        if n.payload().rsplit_once(' ').map(|(s, _)| s) == Some(&id_owned) =>
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
        let (tx, rx) = mpsc::channel(256);
        let id = id.to_owned();
        let lease = self.lease().clone();
        tokio::spawn(async move {
            let mut next = i64::try_from(from).unwrap_or(i64::MAX);
            loop {
                // Whether the writer is gone is read BEFORE the lines, so the last lines it
                // wrote are read after.
                let live = crate::store::leased(&client, &id, &lease).await;
                let rows = client
                    .query(
                        "SELECT seq, line FROM dsh_events WHERE session_id = $1 AND seq >= $2 ORDER BY seq",
                        &[&id, &next],
                    )
                    .await
                    .map_err(db("read the session"));
                let (live, rows) = match (live, rows) {
                    (Ok(l), Ok(r)) => (l, r),
                    (Err(e), _) | (_, Err(e)) => {
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
                    return;
                }
                let _ = tokio::time::timeout(POLL, wake_rx.recv()).await;
            }
        });
        Ok(rx)
    }
}
