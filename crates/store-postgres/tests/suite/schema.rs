//! Schema versions: a database made by an older dsh is migrated and keeps its sessions; with
//! no foreign key (version 2) a session's events still never outlive it nor appear without it.

use dsh_session::Event;
use dsh_store_postgres::{PgStore, SCHEMA_VERSION};

use super::support::{client, cluster, fresh_store, fresh_url_on, opened_with_a_turn, turns};

const VERSION_1: &str = include_str!("../../src/migrations/0001_sessions.sql");

async fn event_rows(c: &tokio_postgres::Client, id: &str) -> i64 {
    c.query_one(
        "SELECT count(*) FROM dsh_events WHERE session_id = $1",
        &[&id],
    )
    .await
    .expect("count")
    .get(0)
}

#[tokio::test]
async fn l3_a_version_1_database_is_migrated_to_the_current_schema_and_keeps_its_sessions() {
    // A session's export, written by this program elsewhere.
    let (elsewhere, elsewhere_url) = fresh_store().await;
    turns(&elsewhere, "old", 1..=3).await;
    let exported = elsewhere.export("old").await.expect("export");
    let source = client(&elsewhere_url).await;
    let (header, next_seq): (String, i64) = source
        .query_one(
            "SELECT header, next_seq FROM dsh_sessions WHERE id = 'old'",
            &[],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .expect("session row");
    let rows = source
        .query(
            "SELECT seq, line FROM dsh_events WHERE session_id = 'old' ORDER BY seq",
            &[],
        )
        .await
        .expect("event rows");
    // The same session in a database as version 1 left it (with its foreign key).
    let url = fresh_url_on(cluster()).await;
    let c = client(&url).await;
    c.batch_execute(VERSION_1).await.expect("version 1 schema");
    c.batch_execute(
        "CREATE TABLE dsh_schema_migrations (version integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now());
         INSERT INTO dsh_schema_migrations (version) VALUES (1);",
    )
    .await
    .expect("record version 1");
    c.execute(
        "INSERT INTO dsh_sessions (id, header, next_seq) VALUES ('old', $1, $2)",
        &[&header, &next_seq],
    )
    .await
    .expect("session row");
    for row in rows {
        let (seq, line): (i64, String) = (row.get(0), row.get(1));
        c.execute(
            "INSERT INTO dsh_events (session_id, seq, line) VALUES ('old', $1, $2)",
            &[&seq, &line],
        )
        .await
        .expect("event row");
    }
    let keys = "SELECT count(*) FROM pg_constraint WHERE conrelid = 'dsh_events'::regclass AND contype = 'f'";
    let count = |row: tokio_postgres::Row| row.get::<_, i64>(0);
    assert_eq!(count(c.query_one(keys, &[]).await.expect("keys")), 1);

    // Connecting migrates it: the program's version is recorded and the key is gone ...
    let store = PgStore::connect(&url).await.expect("connect");
    let version: i32 = c
        .query_one("SELECT max(version) FROM dsh_schema_migrations", &[])
        .await
        .expect("version")
        .get(0);
    assert_eq!((version, SCHEMA_VERSION), (2, 2));
    assert_eq!(count(c.query_one(keys, &[]).await.expect("keys")), 0);
    // ... and the session is unchanged, byte for byte, and can go on.
    assert_eq!(store.export("old").await.expect("export"), exported);
    turns(&store, "old", 4..=5).await;
    store.verify("old").await.expect("verify");
    assert_eq!(event_rows(&c, "old").await, 10);
}

#[tokio::test]
async fn l3_deleting_a_session_deletes_its_events_in_the_same_transaction() {
    let (store, url) = fresh_store().await;
    turns(&store, "gone", 1..=2).await;
    turns(&store, "kept", 1..=1).await;
    let c = client(&url).await;
    assert_eq!(event_rows(&c, "gone").await, 4);
    assert!(store.delete("gone").await.expect("delete"));
    assert_eq!(event_rows(&c, "gone").await, 0);
    assert_eq!(event_rows(&c, "kept").await, 2);
    store
        .verify("kept")
        .await
        .expect("the other session is whole");
    // A session held by a live process is not deleted, nor are its events.
    let held = opened_with_a_turn(&store, "held").await;
    assert!(!store.delete("held").await.expect("delete"));
    assert_eq!(event_rows(&c, "held").await, 1);
    held.session.close().await.expect("close");
}

#[tokio::test]
async fn l3_an_append_to_a_session_whose_row_was_removed_inserts_no_row_and_is_refused() {
    let (store, url) = fresh_store().await;
    let s = opened_with_a_turn(&store, "orphan").await;
    let c = client(&url).await;
    c.execute("DELETE FROM dsh_sessions WHERE id = 'orphan'", &[])
        .await
        .expect("remove the row behind the writer's back");
    let refused = s.session.append(Event::turn_start(2)).await;
    let Err(e) = refused else {
        panic!("an append to a removed session was acknowledged");
    };
    assert!(e.to_string().contains("deleted from the store"), "{e}");
    // Only the row written before the removal exists; nothing was inserted without a session.
    assert_eq!(event_rows(&c, "orphan").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn l3_processes_that_first_use_an_empty_database_at_once_all_connect() {
    // Eight stores (eight connections, as eight processes have) connecting at the same instant
    // to an empty database, on several databases: each must find the schema made once, none
    // may fail on the catalog's unique index by creating it at the same time as another.
    for _ in 0..6 {
        let url = fresh_url_on(cluster()).await;
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(8));
        let connects: Vec<_> = (0..8)
            .map(|_| {
                let (url, start) = (url.clone(), start.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    PgStore::connect(&url).await.map(drop)
                })
            })
            .collect();
        for connect in connects {
            let connected = connect.await.expect("the connect task ran");
            assert!(connected.is_ok(), "{url}: {:?}", connected.err());
        }
        let c = client(&url).await;
        let versions: i64 = c
            .query_one("SELECT count(*) FROM dsh_schema_migrations", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(versions, i64::from(dsh_store_postgres::SCHEMA_VERSION));
    }
}

#[tokio::test]
async fn l3_a_role_that_may_only_read_and_write_the_tables_uses_a_current_database() {
    // The usual grant to a fleet: the tables' rows, not the right to create tables.
    let (store, url) = fresh_store().await;
    turns(&store, "made", 1..=1).await;
    let c = client(&url).await;
    c.batch_execute(
        "DO $$ BEGIN
           IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dsh_rows') THEN
             CREATE ROLE dsh_rows LOGIN;
           END IF;
         END $$;
         REVOKE CREATE ON SCHEMA public FROM PUBLIC;
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO dsh_rows;",
    )
    .await
    .expect("grant");
    let limited = url.replacen("postgres://dsh@", "postgres://dsh_rows@", 1);
    let rows = PgStore::connect(&limited)
        .await
        .expect("connect as dsh_rows");
    assert!(!rows.export("made").await.expect("export").is_empty());
    turns(&rows, "new", 1..=1).await;
    rows.verify("new")
        .await
        .expect("written by the limited role");
}
