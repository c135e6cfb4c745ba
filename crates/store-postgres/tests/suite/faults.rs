//! Connection faults: the lease connection terminated (`pg_terminate_backend`) and the server
//! restarted mid-run. Appends fail cleanly or are retried idempotently: nothing acknowledged is
//! lost and no seq is ever written twice.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dsh_session::{Event, OpenOptions, Session};
use dsh_test_support::postgres::Cluster;

use super::support::{client, fresh_store, fresh_url_on, short_lease};

fn note(i: usize) -> Event {
    Event::other(
        "test/note",
        dsh_core::Json::from_shallow(serde_json::json!({"i": i})),
    )
}

/// Appends `n` notes from 4 concurrent tasks; returns the acknowledged seqs and the failures.
async fn append_concurrently(session: &Session, n: usize) -> (BTreeSet<u64>, usize) {
    let mut tasks = Vec::new();
    for t in 0..4 {
        let s = session.clone();
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut failed = 0;
            for i in 0..n / 4 {
                match s.append(note(t * n + i)).await {
                    Ok(seq) => acked.push(seq),
                    Err(_) => failed += 1,
                }
            }
            (acked, failed)
        }));
    }
    let mut acked = BTreeSet::new();
    let mut failed = 0;
    for t in tasks {
        let (a, f) = t.await.expect("join");
        for seq in a {
            assert!(acked.insert(seq), "seq {seq} acknowledged twice");
        }
        failed += f;
    }
    (acked, failed)
}

/// The seqs in the table; panics on a gap.
async fn stored_seqs(url: &str, id: &str) -> Vec<u64> {
    let c = client(url).await;
    let rows = c
        .query(
            "SELECT seq FROM dsh_events WHERE session_id = $1 ORDER BY seq",
            &[&id],
        )
        .await
        .expect("rows");
    let seqs: Vec<u64> = rows.iter().map(|r| r.get::<_, i64>(0) as u64).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<u64>>(), "no gap");
    seqs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_the_lease_connection_mid_run_loses_nothing_acknowledged_and_duplicates_no_seq()
{
    let (store, url) = fresh_store().await;
    let opened = store
        .with_lease(short_lease("killer-test"))
        .open("k", "/", OpenOptions::new())
        .await
        .expect("open");
    let stop = Arc::new(AtomicBool::new(false));
    let killer = {
        let stop = stop.clone();
        let url = url.clone();
        tokio::spawn(async move {
            let c = client(&url).await;
            let mut kills = 0;
            while !stop.load(Ordering::SeqCst) {
                let killed: bool = c
                    .query_one(
                        "SELECT coalesce(bool_or(pg_terminate_backend(lease_backend)), false) FROM dsh_sessions WHERE id = 'k'",
                        &[],
                    )
                    .await
                    .expect("terminate")
                    .get(0);
                kills += usize::from(killed);
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
            kills
        })
    };
    let (acked, failed) = append_concurrently(&opened.session, 2000).await;
    stop.store(true, Ordering::SeqCst);
    let kills = killer.await.expect("join");
    assert!(
        kills >= 3,
        "the connection was terminated only {kills} times"
    );
    assert_eq!(failed, 0, "every append was retried to success");
    opened.session.close().await.expect("close");
    let stored = stored_seqs(&url, "k").await;
    assert_eq!(stored.len(), 2000);
    assert!(acked.iter().all(|s| stored.binary_search(s).is_ok()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_restarted_mid_run_loses_nothing_acknowledged_and_duplicates_no_seq() {
    let cluster = Arc::new(Cluster::start());
    let url = fresh_url_on(&cluster).await;
    let store = dsh_store_postgres::PgStore::connect(&url)
        .await
        .expect("connect")
        .with_lease(short_lease("restart-test"));
    let opened = store
        .open("r", "/", OpenOptions::new())
        .await
        .expect("open");
    let restarter = {
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || {
            std::thread::sleep(Duration::from_millis(150));
            cluster.stop_immediately();
            cluster.restart();
        })
    };
    let (acked, failed) = append_concurrently(&opened.session, 4000).await;
    restarter.await.expect("join");
    opened.session.close().await.ok();
    let stored = stored_seqs(&url, "r").await;
    for seq in &acked {
        assert!(
            stored.binary_search(seq).is_ok(),
            "acknowledged seq {seq} lost in the restart"
        );
    }
    assert_eq!(failed, 0, "appends were retried across the restart");
    assert_eq!(stored.len(), 4000);
    // The restart was real: the server's log shows recovery.
    assert!(
        cluster
            .server_log()
            .contains("database system was interrupted")
            || cluster.server_log().contains("redo"),
        "{}",
        cluster.server_log()
    );
    let _ = fresh_store;
}
