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
