//! Figures of the PostgreSQL store (issue 24, item 7), on a throwaway cluster (`fsync=on`) on
//! this machine. Prints one `DSH-BENCH` line per figure; the notes of BENCHMARKS.md quote them.
//!
//! 1. group commit: 10 concurrent appenders on one session vs a raw loop of batched `INSERT`s
//!    of the same rows in the same batch sizes (one statement per batch, as the store's);
//! 2. append cost flat: 10 concurrent appenders onto a session holding 1k events vs one holding
//!    `BIG` events (loaded by import);
//! 3. many sessions: `SESSIONS` sessions in one process appending at once (one connection
//!    each), throughput and resident memory (run first, before the large import).
//!
//! Run: `cargo bench -p dsh-store-postgres --bench store`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use dsh_session::{Event, OpenOptions, Session};
use dsh_store_postgres::PgStore;
use dsh_test_support::postgres::Cluster;

const APPENDERS: usize = 10;
const PER_APPENDER: usize = 1000;
const BIG: usize = 1_000_000;
const SESSIONS: usize = 200;

fn note(i: usize) -> Event {
    Event::other(
        "test/note",
        dsh_core::Json::from_shallow(
            serde_json::json!({"i": i, "text": "a line of about a hundred bytes of text, as a small tool result"}),
        ),
    )
}

async fn appenders(session: &Session, per: usize) -> Duration {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..APPENDERS {
        let s = session.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per {
                s.append(note(t * per + i)).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

async fn client(url: &str) -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    c
}

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let cluster = Cluster::start();
    let url = cluster.url();
    let store = PgStore::connect(&url).await.unwrap();
    let c = client(&url).await;

    // 3. Many sessions in one process.
    let before = rss_kb();
    let mut sessions = Vec::new();
    for i in 0..SESSIONS {
        sessions.push(
            store
                .open(&format!("many-{i}"), "/", OpenOptions::new())
                .await
                .unwrap()
                .session,
        );
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for s in &sessions {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..50 {
                s.append(note(i)).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let took = start.elapsed();
    let during = rss_kb();
    for s in &sessions {
        s.close().await.unwrap();
    }
    println!(
        "DSH-BENCH store/sessions {SESSIONS} sessions in one process, 50 appends each at once: {:.0} events/s; RSS {:.1} MB with them open (+{:.1} MB for the sessions: one connection, thread and runtime each)",
        (SESSIONS * 50) as f64 / took.as_secs_f64(),
        during as f64 / 1024.0,
        during.saturating_sub(before) as f64 / 1024.0
    );

    // 1. Group commit vs raw batched INSERTs.
    let opened = store.open("group", "/", OpenOptions::new()).await.unwrap();
    let took = appenders(&opened.session, PER_APPENDER).await;
    opened.session.close().await.unwrap();
    let total = APPENDERS * PER_APPENDER;
    let batches: Vec<i64> = c
        .query(
            "SELECT count(*) FROM dsh_events WHERE session_id = 'group' GROUP BY xmin::text ORDER BY min(seq)",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let lines: Vec<String> = c
        .query(
            "SELECT line FROM dsh_events WHERE session_id = 'group' ORDER BY seq",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    c.batch_execute("CREATE TABLE raw_events (session_id text, seq bigint, line text, PRIMARY KEY (session_id, seq))")
        .await
        .unwrap();
    let start = Instant::now();
    let mut at = 0usize;
    for n in &batches {
        let n = *n as usize;
        let seqs: Vec<i64> = (at..at + n).map(|s| s as i64).collect();
        let rows = &lines[at..at + n];
        c.execute(
            "INSERT INTO raw_events SELECT 'raw', u.seq, u.line FROM unnest($1::bigint[], $2::text[]) AS u(seq, line)",
            &[&seqs, &rows],
        )
        .await
        .unwrap();
        at += n;
    }
    let raw = start.elapsed();
    // Diagnostic: the store's own statement (fenced UPDATE + INSERT + NOTIFY) alone, same batches.
    c.batch_execute("INSERT INTO dsh_sessions (id, header) VALUES ('stmt', '{}')")
        .await
        .unwrap();
    let start = Instant::now();
    let mut at = 0usize;
    for n in &batches {
        let n = *n as usize;
        let seqs: Vec<i64> = (at..at + n).map(|s| s as i64).collect();
        let rows = &lines[at..at + n];
        let (first, end) = (at as i64, (at + n) as i64);
        c.query_one(
            "WITH s AS (UPDATE dsh_sessions SET next_seq = $3, updated_at = now(), lease_until = now() + make_interval(secs => 30)
                         WHERE id = $1 AND lease_token = 0 AND next_seq = $2 RETURNING id),
                  ins AS (INSERT INTO dsh_events (session_id, seq, line) SELECT s.id, u.seq, u.line FROM s, unnest($4::bigint[], $5::text[]) AS u(seq, line) RETURNING 1)
             SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM ins),
                    (SELECT count(*) FROM (SELECT pg_notify('dsh_events', $1 || ' ' || $3::text) FROM s) n)",
            &[&"stmt", &first, &end, &seqs, &rows],
        )
        .await
        .unwrap();
        at += n;
    }
    let stmt = start.elapsed();
    let per_event = took.as_secs_f64() / total as f64;
    let raw_per_event = raw.as_secs_f64() / total as f64;
    println!(
        "DSH-BENCH store/group-commit {total} events, {APPENDERS} appenders: {:.2} µs/event ({:.0} events/s, {} transactions, {:.1} events each); raw batched INSERT loop of the same batches: {:.2} µs/event; ratio {:.2}x throughput",
        per_event * 1e6,
        1.0 / per_event,
        batches.len(),
        total as f64 / batches.len() as f64,
        raw_per_event * 1e6,
        raw_per_event / per_event
    );
    println!(
        "DSH-BENCH store/statement the store's fenced append statement alone, same batches: {:.2} µs/event ({:.2}x the raw INSERT's throughput)",
        stmt.as_secs_f64() / total as f64 * 1e6,
        raw.as_secs_f64() / stmt.as_secs_f64()
    );

    // 2. Append cost at 1k vs BIG events.
    let mut small_log = format!(
        "{}\n",
        dsh_session::Header::new("small", "/").to_json_line()
    );
    for i in 0..1000 {
        small_log.push_str(&note(i).to_json_line());
        small_log.push('\n');
    }
    store.import(small_log.as_bytes()).await.unwrap();
    let mut big_log = format!("{}\n", dsh_session::Header::new("big", "/").to_json_line());
    for i in 0..BIG {
        big_log.push_str(&note(i).to_json_line());
        big_log.push('\n');
    }
    let t = Instant::now();
    store.import(big_log.as_bytes()).await.unwrap();
    let import_took = t.elapsed();
    drop(big_log);
    let mut per = Vec::new();
    for id in ["small", "big"] {
        // The import's WAL is flushed first, so no checkpoint runs during either measurement.
        c.batch_execute("CHECKPOINT").await.unwrap();
        let t = Instant::now();
        let opened = store.resume(id, OpenOptions::new()).await.unwrap();
        let open_took = t.elapsed();
        let took = appenders(&opened.session, 100).await;
        opened.session.close().await.unwrap();
        per.push((took.as_secs_f64() / (APPENDERS * 100) as f64, open_took));
    }
    println!(
        "DSH-BENCH store/flat 1000 appends ({APPENDERS} appenders) onto 1k events: {:.2} µs/event; onto {BIG} events: {:.2} µs/event; ratio {:.2}x throughput (open with {BIG} events: {:.2} s; import of {BIG} events: {:.1} s)",
        per[0].0 * 1e6,
        per[1].0 * 1e6,
        per[0].0 / per[1].0,
        per[1].1.as_secs_f64(),
        import_took.as_secs_f64()
    );
}
