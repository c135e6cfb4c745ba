//! Many sessions on one store handle (spec L3 across sessions): they share a few connections,
//! their appends are group-committed together, and every session checks clean afterwards; four
//! processes on one database, each with many sessions.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use dsh_session::{Event, OpenOptions, Session, check_bytes};
use dsh_store_postgres::{DEFAULT_POOL_SIZE, PgStore};
use serde_json::json;

use super::support::{client, fresh_store};

/// Appends one turn of `notes` notes (a clean log) and closes the session.
async fn one_turn(session: Session, notes: usize) {
    session
        .append(Event::turn_start(1))
        .await
        .expect("turn start");
    for i in 0..notes {
        session
            .append(Event::other(
                "test/note",
                dsh_core::Json::from_shallow(json!({"i": i})),
            ))
            .await
            .expect("note");
    }
    session
        .append(Event::turn_end(
            1,
            dsh_core::Json::from_shallow(json!({"kind": "completed"})),
        ))
        .await
        .expect("turn end");
    session.close().await.expect("close");
}

/// Every session `prefix-0..n` holds `notes + 2` events, verifies, and its export checks clean.
async fn all_clean(store: &PgStore, prefix: &str, n: usize, notes: usize) {
    for i in 0..n {
        let id = format!("{prefix}-{i}");
        store.verify(&id).await.expect("verify");
        let log = store.export(&id).await.expect("export");
        assert!(
            check_bytes(&log).is_empty(),
            "{id}: {}",
            String::from_utf8_lossy(&log)
        );
        assert_eq!(
            log.iter().filter(|b| **b == b'\n').count(),
            notes + 3,
            "{id}: header and {} events",
            notes + 2
        );
        assert!(!store.is_leased(&id).await.expect("lease"), "{id} released");
    }
}

/// Polls the server's connection count to the test database until stopped; returns the most.
fn watch_connections(url: String, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<i64> {
    let most = Arc::new(AtomicI64::new(0));
    tokio::spawn(async move {
        let c = client(&url).await;
        while !stop.load(Ordering::SeqCst) {
            let n: i64 = c
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()",
                    &[],
                )
                .await
                .expect("count connections")
                .get(0);
            most.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        most.load(Ordering::SeqCst)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l3_a_thousand_sessions_in_one_process_share_a_few_connections_and_all_check_clean() {
    const SESSIONS: usize = 1000;
    const NOTES: usize = 8;
    let (store, url) = fresh_store().await;
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch_connections(url.clone(), stop.clone());
    let mut tasks = Vec::new();
    for i in 0..SESSIONS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let opened = store
                .open(&format!("many-{i}"), "/", OpenOptions::new())
                .await
                .expect("open");
            one_turn(opened.session, NOTES).await;
        }));
    }
    for t in tasks {
        t.await.expect("session task");
    }
    stop.store(true, Ordering::SeqCst);
    let most = watcher.await.expect("watcher");
    // The writer, the pool, this test's watcher and the client `fresh_store` used to migrate.
    let bound = 1 + DEFAULT_POOL_SIZE as i64 + 2;
    assert!(
        most <= bound,
        "{most} connections for {SESSIONS} sessions (at most {bound} expected)"
    );
    all_clean(&store, "many", SESSIONS, NOTES).await;
    // The appends of different sessions were committed together: far fewer transactions
    // than appends.
    let c = client(&url).await;
    let transactions: i64 = c
        .query_one("SELECT count(DISTINCT xmin::text) FROM dsh_events", &[])
        .await
        .expect("transactions")
        .get(0);
    let appends = (SESSIONS * (NOTES + 2)) as i64;
    eprintln!(
        "{SESSIONS} sessions: at most {most} connections; {appends} appends in {transactions} transactions"
    );
    assert!(
        transactions * 4 < appends,
        "{transactions} transactions for {appends} appends"
    );
}

/// The child of `four_processes_...`: opens `DSH_FLEET_SESSIONS` sessions named
/// `DSH_FLEET_PREFIX-N` on `DSH_FLEET_URL`, all appending at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by four_processes_share_a_store_each_with_many_sessions"]
async fn fleet_child_process() {
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    let url = var("DSH_FLEET_URL");
    let prefix = var("DSH_FLEET_PREFIX");
    let sessions: usize = var("DSH_FLEET_SESSIONS").parse().expect("a number");
    let store = PgStore::connect(&url).await.expect("connect");
    let mut tasks = Vec::new();
    for i in 0..sessions {
        let store = store.clone();
        let id = format!("{prefix}-{i}");
        tasks.push(tokio::spawn(async move {
            let opened = store
                .open(&id, "/", OpenOptions::new())
                .await
                .expect("open");
            one_turn(opened.session, 8).await;
        }));
    }
    for t in tasks {
        t.await.expect("session task");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_share_a_store_each_with_many_sessions() {
    const SESSIONS: usize = 250;
    let (store, url) = fresh_store().await;
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch_connections(url.clone(), stop.clone());
    let exe = std::env::current_exe().expect("test binary");
    let children: Vec<_> = (0..4)
        .map(|p| {
            tokio::process::Command::new(&exe)
                .args([
                    "--exact",
                    "suite::fleet::fleet_child_process",
                    "--ignored",
                    "--nocapture",
                ])
                .env("DSH_FLEET_URL", &url)
                .env("DSH_FLEET_PREFIX", format!("p{p}"))
                .env("DSH_FLEET_SESSIONS", SESSIONS.to_string())
                .output()
        })
        .collect();
    for (p, out) in futures::future::join_all(children)
        .await
        .into_iter()
        .enumerate()
    {
        let out = out.expect("start the child");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "child {p}: {}\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    stop.store(true, Ordering::SeqCst);
    let most = watcher.await.expect("watcher");
    let bound = 4 * (1 + DEFAULT_POOL_SIZE as i64) + 2;
    eprintln!("4 processes of {SESSIONS} sessions: at most {most} connections");
    assert!(
        most <= bound,
        "{most} connections (at most {bound} expected)"
    );
    for p in 0..4 {
        all_clean(&store, &format!("p{p}"), SESSIONS, 8).await;
    }
}

/// Every session appends a turn's start at once, so their groups share statements: all
/// commit but session `bad`'s, whose append fails saying `why`.
async fn all_commit_but(sessions: &[Session], bad: usize, why: &str) {
    let results =
        futures::future::join_all(sessions.iter().map(|s| s.append(Event::turn_start(1)))).await;
    for (i, r) in results.iter().enumerate() {
        if i == bad {
            let e = r.as_ref().expect_err("that session's append fails");
            assert!(e.to_string().contains(why), "{e}");
        } else {
            assert_eq!(*r.as_ref().expect("the other sessions' appends commit"), 0);
        }
    }
}

/// Opens sessions `prefix-0` .. `prefix-{n-1}`.
async fn open_sessions(store: &PgStore, prefix: &str, n: usize) -> Vec<Session> {
    let mut sessions = Vec::with_capacity(n);
    for i in 0..n {
        let opened = store
            .open(&format!("{prefix}-{i}"), "/", OpenOptions::new())
            .await
            .expect("open");
        sessions.push(opened.session);
    }
    sessions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_the_database_refuses_fails_only_its_own_session() {
    let (store, url) = fresh_store().await;
    let sessions = open_sessions(&store, "g", 20).await;
    // Bad data: a row already sits where session g-7's next event goes.
    client(&url)
        .await
        .execute(
            "INSERT INTO dsh_events (session_id, seq, line) VALUES ('g-7', 0, '{}')",
            &[],
        )
        .await
        .expect("damage");
    all_commit_but(&sessions, 7, "duplicate key").await;
    for (i, s) in sessions.iter().enumerate() {
        if i != 7 {
            s.close().await.expect("close");
            let log = store.export(&format!("g-{i}")).await.expect("export");
            assert!(String::from_utf8_lossy(&log).contains("turn/start"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i4_a_fenced_group_in_a_statement_of_many_sessions_is_refused_and_the_others_commit() {
    let (store, url) = fresh_store().await;
    let sessions = open_sessions(&store, "f", 20).await;
    // Another process took session f-5 over: its token moved on.
    let c = client(&url).await;
    c.execute(
        "UPDATE dsh_sessions SET lease_token = lease_token + 1, lease_owner = 'elsewhere' WHERE id = 'f-5'",
        &[],
    )
    .await
    .expect("take over");
    all_commit_but(&sessions, 5, "taken over").await;
    let fenced: i64 = c
        .query_one(
            "SELECT count(*) FROM dsh_events WHERE session_id = 'f-5'",
            &[],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(fenced, 0, "nothing of the fenced session landed");
    // The groups shared statements (the many-group statement ran, not only the one-group one):
    // rows of different sessions committed by one transaction.
    let shared: i64 = c
        .query_one(
            "SELECT coalesce(max(n), 0) FROM (SELECT count(DISTINCT session_id) AS n
               FROM dsh_events WHERE session_id LIKE 'f-%' GROUP BY xmin::text) t",
            &[],
        )
        .await
        .expect("transactions")
        .get(0);
    assert!(shared > 1, "no statement held two sessions' groups");
}
