//! Rows 27-31 of BENCHMARKS.md: the PostgreSQL store (issue 24, item 7), on a throwaway cluster
//! (`fsync=on`, loopback) on this machine. Prints one `DSH-BENCH {json}` record per figure, with
//! its baseline measured in the same run:
//!
//! - `group-commit`: 10 concurrent appenders on one session vs a raw loop of batched `INSERT`s
//!   of the same rows in the same batch sizes (one statement per transaction the store made),
//!   alternated over 7 rounds of 1,000 events, medians;
//!   The same rounds also replay the store's batches through the store's own append statement
//!   from a raw client loop (`statement_ns`): the database's share of an append alone;
//! - `sessions`: 1,000 sessions of one store handle appending at once (10 events each) vs the
//!   raw loop of the same rows in the same transactions; the process's resident memory before
//!   and at its peak;
//! - `processes`: four processes of 250 sessions each (this program started again as a child)
//!   vs the same sessions and appends in one process;
//! - `flat`: 1,000 appends (10 appenders) onto a session holding 1k events vs one holding 1M
//!   (loaded by import), once the database settled (`VACUUM`, `CHECKPOINT`), alternated over
//!   7 rounds, medians.
//!
//! Run: `cargo bench -p dsh --bench store`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "fixtures/alternate.rs"]
#[allow(dead_code)] // The store's rounds are its own (three sides, async); it shares the median.
mod alternate;

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dsh_session::{Event, OpenOptions, Session};
use dsh_store_postgres::PgStore;
use dsh_test_support::postgres::Cluster;
use serde_json::json;

use alternate::median;

const APPENDERS: usize = 10;
const ROUNDS: usize = 7;
const PER_ROUND: usize = 1000;
const BIG: usize = 1_000_000;
const FLAT_ROUNDS: usize = 7;
const SESSIONS: usize = 1000;
const PER_SESSION: usize = 10;
const PROCESSES: usize = 4;
const CHILD: &str = "DSH_STORE_BENCH_CHILD";

fn note(i: usize) -> Event {
    Event::other(
        "test/note",
        dsh_core::Json::from_shallow(
            json!({"i": i, "text": "a line of about a hundred bytes of text, as a small tool result"}),
        ),
    )
}

fn record(value: serde_json::Value) {
    println!("DSH-BENCH {value}");
}

fn ns_per(took: Duration, events: usize) -> f64 {
    took.as_secs_f64() * 1e9 / events as f64
}

/// `APPENDERS` tasks appending `per` events each, at once; returns the wall time. The events
/// are built before the clock starts (the raw loop's rows are prebuilt too): what is timed is
/// the store's append, serialization of the line included.
async fn appenders(session: &Session, per: usize) -> Duration {
    let batches: Vec<Vec<Event>> = (0..APPENDERS)
        .map(|t| (0..per).map(|i| note(t * per + i)).collect())
        .collect();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for events in batches {
        let s = session.clone();
        tasks.push(tokio::spawn(async move {
            for event in events {
                s.append(event).await.unwrap();
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

fn status_kb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// The store's transactions for sessions matching `like`: each one's `(session, seq, line)`
/// rows, in commit order (by the first seq of each session... approximated by xmin order).
async fn transactions(
    c: &tokio_postgres::Client,
    like: &str,
) -> Vec<(Vec<String>, Vec<i64>, Vec<String>)> {
    let rows = c
        .query(
            "SELECT xmin::text::bigint AS x, session_id, seq, line FROM dsh_events
              WHERE session_id LIKE $1 ORDER BY x, session_id, seq",
            &[&like],
        )
        .await
        .unwrap();
    let mut out: Vec<(Vec<String>, Vec<i64>, Vec<String>)> = Vec::new();
    let mut last = None;
    for r in rows {
        let x: i64 = r.get(0);
        if last != Some(x) {
            out.push(Default::default());
            last = Some(x);
        }
        let t = out.last_mut().unwrap();
        t.0.push(format!("raw-{}", r.get::<_, String>(1)));
        t.1.push(r.get(2));
        t.2.push(r.get(3));
    }
    out
}

/// Replays `txs` as raw batched INSERTs into `raw_events`; returns the time.
async fn raw_replay(
    c: &tokio_postgres::Client,
    txs: &[(Vec<String>, Vec<i64>, Vec<String>)],
) -> Duration {
    let insert = c
        .prepare(
            "INSERT INTO raw_events SELECT u.s, u.seq, u.line
               FROM unnest($1::text[], $2::bigint[], $3::text[]) AS u(s, seq, line)",
        )
        .await
        .unwrap();
    let start = Instant::now();
    for (sessions, seqs, lines) in txs {
        c.execute(&insert, &[sessions, seqs, lines]).await.unwrap();
    }
    start.elapsed()
}

/// Replays `txs` through the store's own append statement ([`dsh_store_postgres::APPEND_STATEMENT`])
/// from a raw client, onto a session row `id` made for it: what the database costs an append
/// (the fenced update, the insert, the notification) without the appenders' hand-offs.
async fn statement_replay(
    c: &tokio_postgres::Client,
    txs: &[(Vec<String>, Vec<i64>, Vec<String>)],
    id: &str,
) -> Duration {
    const TOKEN: i64 = 1;
    c.execute(
        "INSERT INTO dsh_sessions (id, header, lease_token) VALUES ($1, '{}', $2)",
        &[&id, &TOKEN],
    )
    .await
    .unwrap();
    let append = c
        .prepare(dsh_store_postgres::APPEND_STATEMENT)
        .await
        .unwrap();
    let ttl = 30.0_f64;
    let mut next = 0_i64;
    let start = Instant::now();
    for (_, seqs, lines) in txs {
        let seqs: Vec<i64> = (next..).take(seqs.len()).collect();
        let end = next + seqs.len() as i64;
        let applied = c
            .query(&append, &[&id, &TOKEN, &next, &end, &ttl, &seqs, lines])
            .await
            .unwrap();
        assert_eq!(applied.len(), 1, "the replayed group was not applied");
        next = end;
    }
    start.elapsed()
}

/// Opens `n` sessions `prefix-N`, then (once `go` resolves) appends `PER_SESSION` notes to each
/// at once; returns the appends' wall time.
async fn many_sessions(
    store: &PgStore,
    prefix: &str,
    n: usize,
    go: impl Future<Output = ()>,
) -> Duration {
    let mut opening = Vec::new();
    for i in 0..n {
        let store = store.clone();
        let id = format!("{prefix}-{i}");
        opening.push(tokio::spawn(async move {
            store
                .open(&id, "/", OpenOptions::new())
                .await
                .unwrap()
                .session
        }));
    }
    let mut sessions = Vec::new();
    for o in opening {
        sessions.push(o.await.unwrap());
    }
    go.await;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for s in &sessions {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..PER_SESSION {
                s.append(note(i)).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let took = start.elapsed();
    for s in &sessions {
        s.close().await.unwrap();
    }
    took
}

/// A child of the `processes` figure: opens its sessions, says READY, waits for a line on
/// stdin, appends, prints its time and peak memory.
async fn child(spec: &str) {
    let mut parts = spec.splitn(3, ' ');
    let url = parts.next().unwrap().to_owned();
    let prefix = parts.next().unwrap().to_owned();
    let n: usize = parts.next().unwrap().parse().unwrap();
    let store = PgStore::connect(&url).await.unwrap();
    let go = async {
        println!("READY");
        tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
        })
        .await
        .unwrap();
    };
    let took = many_sessions(&store, &prefix, n, go).await;
    println!("DONE {} {}", took.as_secs_f64(), status_kb("VmHWM:") * 1024);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if let Ok(spec) = std::env::var(CHILD) {
        return child(&spec).await;
    }
    let cluster = Cluster::start();
    let url = cluster.url();
    let store = PgStore::connect(&url).await.unwrap();
    let c = client(&url).await;
    c.batch_execute(
        "CREATE TABLE raw_events (session_id text, seq bigint, line text, PRIMARY KEY (session_id, seq))",
    )
    .await
    .unwrap();

    // Group commit, alternating the store and the raw loop of its own batches.
    let (mut store_ns, mut raw_ns, mut statement_ns, mut txs_seen) =
        (Vec::new(), Vec::new(), Vec::new(), 0);
    for round in 0..ROUNDS {
        let id = format!("group{round}");
        let opened = store.open(&id, "/", OpenOptions::new()).await.unwrap();
        let took = appenders(&opened.session, PER_ROUND / APPENDERS).await;
        opened.session.close().await.unwrap();
        let txs = transactions(&c, &id).await;
        txs_seen += txs.len();
        let raw = raw_replay(&c, &txs).await;
        let statement = statement_replay(&c, &txs, &format!("replay{round}")).await;
        store_ns.push(ns_per(took, PER_ROUND));
        raw_ns.push(ns_per(raw, PER_ROUND));
        statement_ns.push(ns_per(statement, PER_ROUND));
    }
    record(json!({
        "bench": "store", "figure": "group-commit",
        "store_ns": median(store_ns.clone()), "raw_ns": median(raw_ns.clone()),
        "statement_ns": median(statement_ns.clone()),
        "rounds_store_ns": store_ns, "rounds_raw_ns": raw_ns, "rounds_statement_ns": statement_ns,
        "events_per_transaction": (ROUNDS * PER_ROUND) as f64 / txs_seen as f64,
    }));

    // 1,000 sessions in one process.
    let idle = status_kb("VmRSS:") * 1024;
    let took = many_sessions(&store, "many", SESSIONS, async {}).await;
    let peak = status_kb("VmHWM:") * 1024;
    let txs = transactions(&c, "many-%").await;
    let raw = raw_replay(&c, &txs).await;
    let events = SESSIONS * PER_SESSION;
    let one_ns = ns_per(took, events);
    record(json!({
        "bench": "store", "figure": "sessions",
        "store_ns": one_ns, "raw_ns": ns_per(raw, events),
        "events_per_second": events as f64 / took.as_secs_f64(),
        "transactions": txs.len(),
        "idle_rss_bytes": idle, "peak_rss_bytes": peak,
    }));

    // Four processes of 250 sessions each.
    let exe = std::env::current_exe().unwrap();
    let mut children = Vec::new();
    for p in 0..PROCESSES {
        let mut child = Command::new(&exe)
            .env(CHILD, format!("{url} p{p} {}", SESSIONS / PROCESSES))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "READY", "child {p}");
        children.push((child, out));
    }
    let start = Instant::now();
    for (child, _) in &mut children {
        writeln!(child.stdin.as_mut().unwrap()).unwrap();
    }
    let mut peaks = Vec::new();
    for (mut child, mut out) in children {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some("DONE"), "{line}");
        let _ = words.next();
        peaks.push(words.next().unwrap().parse::<u64>().unwrap());
        assert!(child.wait().unwrap().success());
    }
    let took = start.elapsed();
    let process_txs = transactions(&c, "p%").await.len();
    record(json!({
        "bench": "store", "figure": "processes",
        "transactions": process_txs,
        "store_ns": ns_per(took, events), "one_ns": one_ns,
        "events_per_second": events as f64 / took.as_secs_f64(),
        "peak_rss_bytes_per_process": peaks,
    }));

    // Append cost at 1k and 1M events.
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
    // Settle the import first (`VACUUM` sets the imported rows' hint bits and visibility map,
    // `CHECKPOINT` writes what that dirtied), open both sessions, then alternate 1,000 appends
    // onto each for `FLAT_ROUNDS` rounds: the commit latency of this shared disk drifts by 2x
    // within seconds, so one back-to-back pair would measure the drift, not the session size.
    c.batch_execute("VACUUM (ANALYZE) dsh_events")
        .await
        .unwrap();
    c.batch_execute("CHECKPOINT").await.unwrap();
    let mut opens = Vec::new();
    let mut opened = Vec::new();
    for id in ["small", "big"] {
        let t = Instant::now();
        opened.push(store.resume(id, OpenOptions::new()).await.unwrap());
        opens.push(t.elapsed().as_secs_f64());
    }
    c.batch_execute("CHECKPOINT").await.unwrap();
    let (mut small, mut big) = (Vec::new(), Vec::new());
    for _ in 0..FLAT_ROUNDS {
        small.push(ns_per(
            appenders(&opened[0].session, 100).await,
            APPENDERS * 100,
        ));
        big.push(ns_per(
            appenders(&opened[1].session, 100).await,
            APPENDERS * 100,
        ));
    }
    let autovacuum: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    for o in &opened {
        o.session.close().await.unwrap();
    }
    record(json!({
        "bench": "store", "figure": "flat",
        "small_ns": median(small.clone()), "big_ns": median(big.clone()),
        "rounds_small_ns": small, "rounds_big_ns": big,
        "autovacuum_workers_after": autovacuum,
        "open_small_seconds": opens[0], "open_big_seconds": opens[1],
        "import_big_seconds": import_took.as_secs_f64(),
    }));
}
