//! Bad data in the table is reported with its session and seq; live tails.

use dsh_session::{Event, OpenOptions};
use dsh_store_postgres::StoreError;

use super::support::{client, fresh_store, opened_with_a_turn, turns};

#[tokio::test]
async fn a_row_that_is_not_an_event_is_reported_with_its_session_and_seq() {
    let (store, url) = fresh_store().await;
    turns(&store, "bad", 1..=3).await;
    let c = client(&url).await;
    c.execute(
        "UPDATE dsh_events SET line = 'not json' WHERE session_id = 'bad' AND seq = 3",
        &[],
    )
    .await
    .expect("damage");
    for result in [
        store.verify("bad").await.map(drop),
        store.open("bad", "/", OpenOptions::new()).await.map(drop),
    ] {
        let Err(e @ StoreError::BadRow { .. }) = result else {
            panic!("expected a bad row, got {result:?}");
        };
        assert!(e.to_string().starts_with("session bad, seq 3: "), "{e}");
    }
    // A row moved to another seq: a gap, reported at the first row out of place.
    c.execute(
        "UPDATE dsh_events SET line = '{\"type\":\"turn/end\",\"data\":{\"turn\":2,\"reason\":{\"kind\":\"completed\"}}}', seq = 30 WHERE session_id = 'bad' AND seq = 3",
        &[],
    )
    .await
    .expect("damage");
    let gap = store.verify("bad").await;
    let Err(e @ StoreError::BadRow { .. }) = gap else {
        panic!("expected a bad row, got {gap:?}");
    };
    assert!(
        e.to_string()
            .starts_with("session bad, seq 4: the row's seq should be 3"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_sees_every_line_in_seq_order_as_it_is_committed_and_ends_with_the_writer() {
    let (store, _) = fresh_store().await;
    let s = opened_with_a_turn(&store, "live").await;
    let mut tail = store.tail("live", 0).await.expect("tail");
    let first = tail.recv().await.expect("line").expect("ok");
    assert_eq!(first.seq, 0);
    for i in 0..50 {
        s.session
            .append(Event::other(
                "test/note",
                dsh_core::Json::from_shallow(serde_json::json!({"i": i})),
            ))
            .await
            .expect("append");
        let line = tail.recv().await.expect("line").expect("ok");
        assert_eq!(line.seq, i + 1);
        assert!(line.line.contains(&format!("\"i\":{i}")));
    }
    s.session.close().await.expect("close");
    assert!(tail.recv().await.is_none(), "the tail ends with the writer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_whose_connection_is_terminated_reconnects_and_misses_nothing() {
    let (store, url) = fresh_store().await;
    let s = opened_with_a_turn(&store, "cut").await;
    let mut tail = store.tail("cut", 0).await.expect("tail");
    let note = |i: u64| {
        Event::other(
            "test/note",
            dsh_core::Json::from_shallow(serde_json::json!({"i": i})),
        )
    };
    let c = client(&url).await;
    let mut seen = Vec::new();
    for round in 0..3u64 {
        for i in round * 10..round * 10 + 10 {
            s.session.append(note(i)).await.expect("append");
        }
        // Every other backend of the database is terminated: the tail's (and the writer's,
        // which reconnects on its own).
        c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .expect("terminate");
    }
    s.session
        .append(note(30))
        .await
        .expect("append after the cuts");
    s.session.close().await.expect("close");
    while let Some(line) = tail.recv().await {
        seen.push(line.expect("no error: the tail reconnected").seq);
    }
    let want: Vec<u64> = (0..=31).collect();
    assert_eq!(seen, want, "every line once, in seq order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_being_written_always_verifies_clean() {
    // Its next seq and its rows are read from one snapshot: read in two, a commit between them
    // made the rows end past the recorded next seq, and `dsh check` call a live session bad.
    let (store, _) = fresh_store().await;
    let s = opened_with_a_turn(&store, "busy").await;
    let session = s.session.clone();
    let writing = tokio::spawn(async move {
        for i in 0..300 {
            session
                .append(Event::other(
                    "test/note",
                    dsh_core::Json::from_shallow(serde_json::json!({"i": i})),
                ))
                .await
                .expect("append");
        }
    });
    let mut verified = 0;
    while !writing.is_finished() {
        store
            .verify("busy")
            .await
            .expect("a live session verifies clean");
        verified += 1;
    }
    writing.await.expect("writer");
    assert!(verified > 0);
    s.session.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i4_a_tail_says_last_that_the_writer_stopped_without_closing_the_session() {
    let (store, url) = fresh_store().await;
    let s = opened_with_a_turn(&store, "left").await;
    // Its writer, on another host, is gone without releasing the lease (its backend went with
    // it): this process's own writer loses the lease to it and is silenced.
    client(&url)
        .await
        .execute(
            "UPDATE dsh_sessions SET lease_token = lease_token + 1, lease_owner = 'elsewhere:7',
                    lease_backend = NULL WHERE id = 'left'",
            &[],
        )
        .await
        .expect("lose the writer");
    let mut tail = store.tail("left", 0).await.expect("tail");
    let first = tail.recv().await.expect("line").expect("the turn's start");
    assert_eq!(first.seq, 0);
    let last = tail.recv().await.expect("the ending");
    let Err(e @ StoreError::Abandoned { .. }) = last else {
        panic!("expected the writer reported gone, got {last:?}");
    };
    assert!(
        e.to_string()
            .starts_with("session left: its writer elsewhere:7 stopped without closing"),
        "{e}"
    );
    assert!(tail.recv().await.is_none(), "the error is the last message");
    drop(s);

    // A writer that closed its session ends the tail quietly.
    let closed = opened_with_a_turn(&store, "closed").await;
    closed.session.close().await.expect("close");
    let mut tail = store.tail("closed", 0).await.expect("tail");
    assert_eq!(tail.recv().await.expect("line").expect("ok").seq, 0);
    assert!(
        tail.recv().await.is_none(),
        "a closed session ends the tail"
    );
}

#[tokio::test]
async fn l4_rows_missing_at_the_end_or_past_it_are_named_where_they_are() {
    let (store, url) = fresh_store().await;
    turns(&store, "ends", 1..=2).await;
    let c = client(&url).await;
    // turn 1 (seqs 0-1), turn 2 (seqs 2-3): next seq 4.
    c.execute(
        "INSERT INTO dsh_events (session_id, seq, line) VALUES ('ends', 4,
           '{\"type\":\"turn/start\",\"data\":{\"turn\":3}}')",
        &[],
    )
    .await
    .expect("damage");
    let past = store.verify("ends").await.map(drop);
    let Err(e @ StoreError::BadRow { .. }) = past else {
        panic!("expected a bad row, got {past:?}");
    };
    assert!(
        e.to_string().starts_with(
            "session ends, seq 4: a row past the session's recorded end: its next seq is recorded as 4, and its rows go on to 4"
        ),
        "{e}"
    );
    c.execute(
        "DELETE FROM dsh_events WHERE session_id = 'ends' AND seq >= 3",
        &[],
    )
    .await
    .expect("damage");
    let short = store.verify("ends").await.map(drop);
    let Err(e @ StoreError::BadRow { .. }) = short else {
        panic!("expected a bad row, got {short:?}");
    };
    assert!(
        e.to_string()
            .starts_with("session ends, seq 3: the session's next seq is recorded as 4, but its rows end before 3"),
        "{e}"
    );
}
