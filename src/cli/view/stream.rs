//! `api/stream?id=ID&after=SEQ&offset=BYTES`: a session followed live as Server-Sent Events.
//! Each message is an `api/events` answer (the first one everything from `after` on, then what
//! was appended since), its SSE id `next:offset`, so a browser that reconnects (sending
//! `Last-Event-ID`) goes on where it stopped without a duplicate.
//!
//! Of a log file, the server looks at the file's end every [`WATCH`] and reads only the bytes
//! appended (a log that is not held by a writer is watched too: it may be resumed). Of a stored
//! session, the store's own live reader ([`PgStore::tail`], `LISTEN`/`NOTIFY`) delivers the
//! lines; once the writer is gone and every line was sent, a last message says `live: false`
//! and an `end` event closes the stream (the page then looks again every few seconds, so it
//! sees a later `dsh repair`, and follows the session live again once a process writes it). An error after the first message is an `problem`
//! event (its data the sentence); one before it is a plain JSON error answer, so the page can
//! tell a session that cannot be read from a stream that cannot be opened.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use dsh_store_postgres::PgStore;
use tokio::sync::mpsc;

use super::App;
use super::api::{self, Batch, Head, Located, Problem, Source, param};

/// How often a followed log file is looked at.
pub(super) const WATCH: Duration = Duration::from_millis(200);

/// Answers `api/stream`.
pub(super) async fn handle(app: Arc<App>, query: &str, headers: &HeaderMap) -> Response {
    let id = param(query, "id").unwrap_or_default();
    let number = |key| {
        param(query, key)
            .and_then(|a| a.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let (mut after, mut offset) = (number("after"), number("offset"));
    // A reconnecting browser says where it stopped.
    if let Some((n, o)) = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(':'))
        && let (Ok(n), Ok(o)) = (n.parse(), o.parse())
    {
        (after, offset) = (n, o);
    }
    let first = match api::batch(&app.source, &id, after, offset).await {
        Ok(b) => b,
        Err(problem) => return api::refused(problem),
    };
    let (tx, mut rx) = mpsc::channel::<Event>(8);
    tokio::spawn(async move {
        let sent = send(&tx, &first).await;
        if sent {
            follow(&app.source, &id, first, &tx).await;
        }
    });
    let stream =
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx).map(|e| e.map(Ok::<_, Infallible>)));
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn message(b: &Batch) -> Event {
    Event::default()
        .id(format!("{}:{}", b.next, b.offset))
        .data(&b.body)
}

/// Sends one answer; false once the page is gone.
async fn send(tx: &mpsc::Sender<Event>, b: &Batch) -> bool {
    tx.send(message(b)).await.is_ok()
}

async fn problem(tx: &mpsc::Sender<Event>, (_, sentence): Problem) {
    let _ = tx
        .send(Event::default().event("problem").data(sentence))
        .await;
}

/// Sends what is appended to the session after `last`, until the page goes away (a file) or
/// the session's writer is gone (a store).
async fn follow(source: &Source, id: &str, last: Batch, tx: &mpsc::Sender<Event>) {
    match source.locate(id) {
        Ok(Located::Stored(store, id)) => follow_store(source, store, id, last, tx).await,
        Ok(Located::File(path)) => follow_file(path, id, last, tx).await,
        Err(p) => problem(tx, p).await,
    }
}

async fn follow_file(path: PathBuf, id: &str, mut last: Batch, tx: &mpsc::Sender<Event>) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(WATCH) => {}
            () = tx.closed() => return,
        }
        let b = match api::file_batch(path.clone(), id, last.next, last.offset).await {
            Ok(b) => b,
            Err(p) => return problem(tx, p).await,
        };
        if (b.events > 0 || b.reset || b.live != last.live) && !send(tx, &b).await {
            return;
        }
        last = b;
    }
}

/// The head of a message of a stored session's stream.
fn head<'a>(id: &'a str, place: &'a str, repair: &'a str, live: bool, next: u64) -> Head<'a> {
    Head {
        id,
        place,
        repair,
        live,
        next,
        offset: 0,
        reset: false,
        header: None,
    }
}

async fn follow_store(
    source: &Source,
    store: &PgStore,
    id: &str,
    first: Batch,
    tx: &mpsc::Sender<Event>,
) {
    let url = match source {
        Source::Store { url, .. } => url.as_str(),
        _ => "",
    };
    let place = source.place(id);
    let repair = source.store_repair(id);
    let mut lines = match store.tail(id, first.next).await {
        Ok(lines) => lines,
        Err(e) => return problem(tx, api::store_problem(url, e)).await,
    };
    let mut next = first.next;
    loop {
        let got = tokio::select! {
            got = lines.recv() => got,
            () = tx.closed() => return,
        };
        let Some(line) = got else { break };
        // What has come meanwhile goes in the same message.
        let mut events = Vec::new();
        let mut pending = Some(line);
        // The writer stopped without closing the session: the stream ends as when it closed
        // it, and the page says what it left open (as the file's stream does).
        let mut abandoned = false;
        while let Some(line) = pending.take().or_else(|| lines.try_recv().ok()) {
            if matches!(line, Err(dsh_store_postgres::StoreError::Abandoned { .. })) {
                abandoned = true;
                break;
            }
            let parsed = line.map_err(|e| api::store_problem(url, e)).and_then(|l| {
                dsh::session::Event::from_json_line(&l.line)
                    .map(|e| (l.seq, e))
                    .map_err(|e| api::internal(format!("{place}: seq {}: {e}", l.seq)))
            });
            match parsed {
                Ok((seq, event)) => {
                    next = seq + event.seq_span();
                    events.push((seq, event.to_json_line()));
                }
                Err(p) => return problem(tx, p).await,
            }
        }
        if abandoned && events.is_empty() {
            break;
        }
        let sent = match api::render(head(id, &place, &repair, true, next), &events) {
            Ok(b) => send(tx, &b).await,
            Err(p) => return problem(tx, p).await,
        };
        if !sent {
            return;
        }
        if abandoned {
            break;
        }
    }
    // The writer is gone and every line it wrote was sent.
    if let Ok(b) = api::render(head(id, &place, &repair, false, next), &[]) {
        let _ = send(tx, &b).await;
    }
    // With data: a browser drops an event whose data is empty, and would reconnect for ever.
    let _ = tx
        .send(Event::default().event("end").data("the writer is gone"))
        .await;
}
