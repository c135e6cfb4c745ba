//! Sessions and stores: seq order, frozen events, durable JSON Lines with group commit (spec L1,
//! L3), the write lock, write failures, subscribers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use dsh_session::{
    Event, Header, LogSink, OpenOptions, Session, SessionError, check_file, read_log,
};
use serde_json::{Value, json};

use super::support::{completed, j, put, tempdir};

fn note(writer: usize, i: usize) -> Event {
    Event::other("test/note", j(json!({"writer": writer, "i": i})))
}

#[tokio::test]
async fn seqs_follow_append_call_order_not_await_order() {
    let session = Session::in_memory("s");
    let a = session.append(Event::turn_start(1));
    let b = session.append(note(0, 1));
    let c = session.append(note(0, 2));
    assert_eq!(c.await.expect("c"), 2);
    assert_eq!(b.await.expect("b"), 1);
    assert_eq!(a.await.expect("a"), 0);

    let dir = tempdir();
    let (file, _) = Session::open_jsonl(&dir.path().join("log.jsonl"), OpenOptions::new())
        .await
        .expect("opens");
    let futures: Vec<_> = (0..5).map(|i| file.append(note(0, i))).collect();
    let mut seqs = Vec::new();
    for f in futures.into_iter().rev() {
        seqs.push(f.await.expect("append"));
    }
    assert_eq!(seqs, [4, 3, 2, 1, 0]);
}

#[tokio::test]
async fn appended_events_are_frozen_and_snapshots_never_change() {
    let session = Session::in_memory("s");
    put(&session, note(0, 0)).await;
    let before = session.events();
    for i in 1..3000 {
        put(&session, note(0, i)).await;
    }
    let after = session.events();
    assert_eq!(before.len(), 1);
    assert_eq!(after.len(), 3000);
    let (_, first_before) = before.get(0).expect("first");
    let (_, first_after) = after.get(0).expect("first");
    assert!(
        std::ptr::eq(first_before.data(), first_after.data()),
        "events' data are shared, not copied"
    );
    assert_eq!(
        after.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        (0..3000).collect::<Vec<u64>>()
    );
    assert_eq!(after.last().map(|(s, _)| *s), Some(2999));
}

#[tokio::test]
async fn open_turn_and_step_follow_the_framing_events() {
    let session = Session::in_memory("s");
    assert_eq!((session.open_turn(), session.open_step()), (None, None));
    put(&session, Event::turn_start(3)).await;
    put(&session, Event::step_start(3, 1)).await;
    assert_eq!(
        (session.open_turn(), session.open_step()),
        (Some(3), Some((3, 1)))
    );
    put(&session, Event::step_end(3, 1)).await;
    assert_eq!((session.open_turn(), session.open_step()), (Some(3), None));
    put(&session, Event::turn_end(3, completed())).await;
    assert_eq!(session.open_turn(), None);
}

#[tokio::test]
async fn a_new_log_starts_with_the_reference_header_then_one_event_a_line() {
    let dir = tempdir();
    let path = dir.path().join("new.jsonl");
    let (session, report) =
        Session::open_jsonl(&path, OpenOptions::new().id("sess-1").cwd("/work"))
            .await
            .expect("creates");
    assert!(report.is_clean());
    assert_eq!(session.id(), "sess-1");
    assert_eq!(session.path(), Some(path.as_path()));
    put(&session, Event::turn_start(1)).await;
    put(
        &session,
        Event::tool_call(1, 1, "c1", "echo", "{\"text\":\"hi\"}"),
    )
    .await;
    session.close().await.expect("closes");
    let text = std::fs::read_to_string(&path).expect("read");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(text.ends_with('\n'));
    let header: Value = serde_json::from_str(lines[0]).expect("header");
    let keys: Vec<&str> = header
        .as_object()
        .expect("obj")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["type", "version", "id", "createdAt", "cwd"]);
    assert_eq!(
        (header["type"].clone(), header["version"].clone()),
        (json!("session"), json!(0))
    );
    assert_eq!(
        (header["id"].clone(), header["cwd"].clone()),
        (json!("sess-1"), json!("/work"))
    );
    assert!(
        header["createdAt"]
            .as_u64()
            .is_some_and(|t| t > 1_600_000_000_000)
    );
    assert_eq!(lines[1], r#"{"type":"turn/start","data":{"turn":1}}"#);
    assert_eq!(
        lines[2],
        r#"{"type":"tool/call","data":{"turn":1,"step":1,"callId":"c1","name":"echo","arguments":"{\"text\":\"hi\"}"}}"#
    );
}

#[tokio::test]
async fn a_reopened_log_resumes_after_its_last_seq_with_equal_events() {
    let dir = tempdir();
    let path = dir.path().join("resume.jsonl");
    let (session, _) = Session::open_jsonl(&path, OpenOptions::new().id("r"))
        .await
        .expect("opens");
    put(&session, Event::turn_start(1)).await;
    put(
        &session,
        Event::other(
            "text-chunks",
            j(json!({"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b"]})),
        ),
    )
    .await;
    put(&session, Event::turn_end(1, completed())).await;
    let written = session.events().to_vec();
    drop(session);
    // Dropping the last handle lets the writer finish and release the lock; reopening waits
    // for nothing else.
    let reopened = loop {
        match Session::open_jsonl(&path, OpenOptions::new()).await {
            Err(e) if e.is_locked() => tokio::time::sleep(Duration::from_millis(5)).await,
            other => break other.expect("reopens"),
        }
    };
    let (session, report) = reopened;
    assert!(report.is_clean());
    assert_eq!(session.id(), "r");
    assert_eq!(session.next_seq(), 4);
    let read = session.events().to_vec();
    assert_eq!(read.len(), written.len());
    for ((s1, e1), (s2, e2)) in written.iter().zip(&read) {
        assert_eq!((s1, e1), (s2, e2));
    }
    assert_eq!(put(&session, Event::turn_start(2)).await, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_under_ten_concurrent_appenders_keeps_every_acknowledged_event() {
    let dir = tempdir();
    let path = dir.path().join("group.jsonl");
    let (session, _) = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect("opens");
    let mut tasks = Vec::new();
    for writer in 0..10 {
        let session = session.clone();
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for i in 0..40 {
                let seq = session.append(note(writer, i)).await.expect("append");
                acked.push((seq, i));
            }
            (writer, acked)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.push(t.await.expect("task"));
    }
    session.close().await.expect("closes");
    let log = read_log(&std::fs::read(&path).expect("read")).expect("reads");
    assert_eq!(log.events.len(), 400);
    for (writer, acked) in all {
        let mut last = None;
        for (seq, i) in acked {
            let (_, event) = log
                .events
                .iter()
                .find(|(s, _)| *s == seq)
                .expect("acked event is on disk");
            assert_eq!(event.data().value()["writer"], json!(writer));
            assert_eq!(event.data().value()["i"], json!(i));
            assert!(last < Some(seq), "one appender's events keep their order");
            last = Some(seq);
        }
    }
    assert!(check_file(&path).expect("checks").is_empty());
}

/// A sink that records what it was given, counts syncs, can hold its first write until released,
/// and can fail from the n-th write on.
#[derive(Clone, Default)]
struct TestSink {
    data: Arc<Mutex<Vec<u8>>>,
    syncs: Arc<AtomicUsize>,
    gate: Arc<(Mutex<bool>, Condvar)>,
    hold_first: bool,
    fail_from: Option<usize>,
}

impl TestSink {
    fn release(&self) {
        let (open, cv) = &*self.gate;
        *open.lock().expect("gate") = true;
        cv.notify_all();
    }
    fn text(&self) -> String {
        String::from_utf8(self.data.lock().expect("data").clone()).expect("utf8")
    }
}

impl LogSink for TestSink {
    fn append_durably(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let n = self.syncs.fetch_add(1, Ordering::SeqCst);
        if self.hold_first && n == 0 {
            let (open, cv) = &*self.gate;
            let mut guard = open.lock().expect("gate");
            while !*guard {
                guard = cv.wait(guard).expect("gate");
            }
        }
        if self.fail_from.is_some_and(|f| n >= f) {
            // A partial write reaches the medium before the failure.
            self.data
                .lock()
                .expect("data")
                .extend_from_slice(&bytes[..bytes.len() / 2]);
            return Err(std::io::Error::other("No space left on device"));
        }
        self.data.lock().expect("data").extend_from_slice(bytes);
        Ok(())
    }

    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.data.lock().expect("data").truncate(len as usize);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_waiting_behind_a_sync_are_committed_together_with_one_sync() {
    let sink = TestSink {
        hold_first: true,
        ..TestSink::default()
    };
    // The header write is the first sync; it is held while ten appends queue up behind it.
    let session = Session::with_sink(Header::new("g", "/"), sink.clone()).expect("session");
    let futures: Vec<_> = (0..10).map(|i| session.append(note(i, 0))).collect();
    let waiting = tokio::spawn(futures::future::join_all(futures));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !waiting.is_finished(),
        "nothing is acknowledged before it is durable"
    );
    assert!(
        session.events().is_empty(),
        "nothing is visible before it is durable"
    );
    sink.release();
    let acked = waiting.await.expect("join");
    let seqs: Vec<u64> = acked.into_iter().map(|r| r.expect("acked")).collect();
    assert_eq!(seqs, (0..10).collect::<Vec<u64>>());
    assert_eq!(
        sink.syncs.load(Ordering::SeqCst),
        2,
        "header, then ONE group for all ten appends"
    );
    assert_eq!(session.events().len(), 10);
    assert_eq!(sink.text().lines().count(), 11);
}

#[tokio::test]
async fn a_failed_write_is_a_clear_error_and_the_log_keeps_exactly_what_was_acknowledged() {
    let sink = TestSink {
        fail_from: Some(3),
        ..TestSink::default()
    };
    let session = Session::with_sink(Header::new("f", "/"), sink.clone()).expect("session");
    assert_eq!(put(&session, note(0, 0)).await, 0);
    assert_eq!(put(&session, note(0, 1)).await, 1);
    let err = session.append(note(0, 2)).await.expect_err("disk full");
    assert!(
        matches!(&err, SessionError::Write(e) if e.to_string().contains("No space")),
        "{err}"
    );
    let later = session
        .append(note(0, 3))
        .await
        .expect_err("refused after the failure");
    assert!(
        matches!(&later, SessionError::Poisoned(m) if m.contains("No space")),
        "{later}"
    );
    assert_eq!(
        session.events().len(),
        2,
        "only acknowledged events are visible"
    );
    let text = sink.text();
    let log = read_log(text.as_bytes()).expect("the medium holds a whole log");
    assert_eq!(log.events.len(), 2, "the partial write was cut back");
    assert!(text.ends_with('\n'));
    assert!(session.close().await.is_err(), "close reports the failure");
}

#[tokio::test]
async fn a_second_open_for_writing_fails_clearly_until_the_first_is_closed() {
    let dir = tempdir();
    let path = dir.path().join("locked.jsonl");
    let (first, _) = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect("opens");
    put(&first, Event::turn_start(1)).await;
    let err = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect_err("locked");
    assert!(err.is_locked(), "{err}");
    assert!(
        err.to_string().contains("already open for writing"),
        "{err}"
    );
    let err = dsh_session::repair(&path).expect_err("repair needs the lock too");
    assert!(err.is_locked());

    // Another process sees the lock as well (util-linux `flock`, where it is installed).
    let other = std::process::Command::new("flock")
        .args(["-n", "-x"])
        .arg(&path)
        .arg("true")
        .status();
    match other {
        Ok(status) => assert!(!status.success(), "a second process cannot take the lock"),
        Err(e) => eprintln!("flock(1) unavailable, cross-process check skipped: {e}"),
    }

    first.close().await.expect("closes");
    let (second, report) = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect("reopens");
    assert_eq!(
        report.closed_turn,
        Some(1),
        "the open turn was closed by repair"
    );
    assert!(put(&second, Event::turn_start(2)).await > 0);
}

#[tokio::test]
async fn appends_after_close_are_refused() {
    let dir = tempdir();
    let (file, _) = Session::open_jsonl(&dir.path().join("c.jsonl"), OpenOptions::new())
        .await
        .expect("opens");
    file.close().await.expect("closes");
    assert!(matches!(
        file.append(note(0, 0)).await,
        Err(SessionError::Closed)
    ));
    let memory = Session::in_memory("m");
    memory.close().await.expect("closes");
    assert!(matches!(
        memory.append(note(0, 0)).await,
        Err(SessionError::Closed)
    ));
}

#[tokio::test]
async fn subscribers_see_durable_events_in_seq_order_and_a_panicking_one_is_contained() {
    let dir = tempdir();
    let (file, _) = Session::open_jsonl(&dir.path().join("s.jsonl"), OpenOptions::new())
        .await
        .expect("opens");
    for session in [Session::in_memory("m"), file] {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let _boom = session.subscribe(|_, _| panic!("observer failure"));
        let sink = seen.clone();
        let sub = session.subscribe(move |seq, e| {
            sink.lock()
                .expect("seen")
                .push((seq, e.event_type().to_owned()));
        });
        let futures: Vec<_> = (0..5).map(|i| session.append(note(0, i))).collect();
        for f in futures {
            f.await
                .expect("the append stands despite the panicking observer");
        }
        assert_eq!(
            *seen.lock().expect("seen"),
            (0..5)
                .map(|s| (s, "test/note".to_owned()))
                .collect::<Vec<_>>()
        );
        drop(sub);
        put(&session, note(0, 9)).await;
        assert_eq!(
            seen.lock().expect("seen").len(),
            5,
            "a dropped subscription hears nothing"
        );
    }
}

#[tokio::test]
async fn a_subscriber_may_append_and_its_event_follows_in_order() {
    let session = Session::in_memory("m");
    let inner = session.clone();
    let _sub = session.subscribe(move |_, e| {
        if e.event_type() == "test/ping" {
            // The seq is taken at call time; the in-memory append needs no awaiting.
            drop(inner.append(Event::other("test/pong", j(json!({})))));
        }
    });
    put(&session, Event::other("test/ping", j(json!({})))).await;
    let types: Vec<String> = session
        .events()
        .iter()
        .map(|(_, e)| e.event_type().to_owned())
        .collect();
    assert_eq!(types, ["test/ping", "test/pong"]);
}

#[test]
fn a_blocking_open_works_outside_a_runtime_and_create_false_refuses_a_missing_file() {
    let dir = tempdir();
    let missing = dir.path().join("missing.jsonl");
    let err = Session::open_jsonl_blocking(&missing, OpenOptions::new().create(false))
        .expect_err("no such file");
    assert!(matches!(&err, SessionError::Io { op: "open", .. }), "{err}");
    assert!(!missing.exists());
    let (session, report) =
        Session::open_jsonl_blocking(&missing, OpenOptions::new().id("b")).expect("creates");
    assert!(report.is_clean());
    let seq = futures::executor::block_on(session.append(Event::turn_start(1))).expect("append");
    assert_eq!(seq, 0);
    futures::executor::block_on(session.close()).expect("closes");
    assert_eq!(
        std::fs::read_to_string(&missing)
            .expect("read")
            .lines()
            .count(),
        2
    );
}

#[tokio::test]
async fn appends_still_queued_when_the_last_handle_is_dropped_are_written() {
    let sink = TestSink {
        hold_first: true,
        ..TestSink::default()
    };
    let session = Session::with_sink(Header::new("h", "/"), sink.clone()).expect("session");
    // Queued behind the held header write, then every handle is dropped.
    let pending: Vec<_> = (0..3).map(|i| session.append(note(0, i))).collect();
    drop(session);
    sink.release();
    for (i, f) in pending.into_iter().enumerate() {
        assert_eq!(f.await.expect("written after the hang-up"), i as u64);
    }
    let text = sink.text();
    assert_eq!(read_log(text.as_bytes()).expect("log").events.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_appender_that_stops_polling_does_not_hold_back_the_rest_of_its_group() {
    let sink = TestSink {
        hold_first: true,
        ..TestSink::default()
    };
    let session = Session::with_sink(Header::new("l", "/"), sink.clone()).expect("session");
    // Both appends queue behind the held header write and form one group; the first, polled
    // once and then never again, is the one the acknowledgement wakes.
    let mut stuck = Box::pin(session.append(note(0, 0)));
    assert!(futures::poll!(&mut stuck).is_pending());
    let other = tokio::spawn(session.append(note(1, 0)));
    tokio::time::sleep(Duration::from_millis(20)).await;
    sink.release();
    let seq = tokio::time::timeout(Duration::from_secs(10), other)
        .await
        .expect("not held back by the appender that stopped polling")
        .expect("join")
        .expect("append");
    assert_eq!(seq, 1);
    assert_eq!(stuck.await.expect("append"), 0);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..proptest::prelude::ProptestConfig::default() })]

    /// Any number of concurrent appenders, and a medium that may fail from any write on: every
    /// acknowledged event is on the medium and nothing else is, in seq order; each appender's
    /// seqs rise; after the first failure every append fails; subscribers and `events()` see
    /// exactly the acknowledged events, in seq order.
    #[test]
    fn concurrent_appends_over_a_failing_medium_keep_exactly_the_acknowledged_events(
        appenders in 1usize..12,
        per in 1usize..16,
        fail_from in proptest::option::of(1usize..24),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let sink = TestSink { fail_from, ..TestSink::default() };
        let (results, seen, events) = rt.block_on(async {
            let session = Session::with_sink(Header::new("p", "/"), sink.clone()).expect("session");
            let seen = Arc::new(Mutex::new(Vec::new()));
            let observer = seen.clone();
            let _sub = session.subscribe(move |seq, _| observer.lock().expect("seen").push(seq));
            let tasks: Vec<_> = (0..appenders)
                .map(|w| {
                    let session = session.clone();
                    tokio::spawn(async move {
                        let mut out = Vec::new();
                        for i in 0..per {
                            out.push((w, i, session.append(note(w, i)).await.ok()));
                        }
                        out
                    })
                })
                .collect();
            let mut results = Vec::new();
            for t in tasks {
                results.push(t.await.expect("appender"));
            }
            let _ = session.close().await;
            let seen = seen.lock().expect("seen").clone();
            (results, seen, session.events().to_vec())
        });
        let mut acked: Vec<(u64, usize, usize)> = Vec::new();
        for lane in &results {
            let mut failed = false;
            let mut last = None;
            for (w, i, seq) in lane {
                match seq {
                    Some(seq) => {
                        proptest::prop_assert!(!failed, "an append succeeded after a failure");
                        proptest::prop_assert!(last < Some(*seq));
                        last = Some(*seq);
                        acked.push((*seq, *w, *i));
                    }
                    None => failed = true,
                }
            }
        }
        acked.sort_unstable();
        if fail_from.is_none() {
            proptest::prop_assert_eq!(acked.len(), appenders * per);
        }
        let text = sink.text();
        proptest::prop_assert!(text.ends_with('\n'));
        let log = read_log(text.as_bytes()).expect("the medium holds a whole log");
        proptest::prop_assert_eq!(log.events.len(), acked.len());
        for ((seq, w, i), (on_disk, event)) in acked.iter().zip(&log.events) {
            proptest::prop_assert_eq!(on_disk, seq, "lines are in seq order with no gap");
            proptest::prop_assert_eq!(&event.data().value()["writer"], &json!(w));
            proptest::prop_assert_eq!(&event.data().value()["i"], &json!(i));
        }
        let acked_seqs: Vec<u64> = acked.iter().map(|(s, _, _)| *s).collect();
        proptest::prop_assert_eq!(&seen, &acked_seqs);
        proptest::prop_assert_eq!(events.iter().map(|(s, _)| *s).collect::<Vec<_>>(), acked_seqs);
    }
}

#[tokio::test]
async fn a_late_subscriber_hears_exactly_the_events_made_durable_after_it_subscribed() {
    let dir = tempdir();
    let (file, _) = Session::open_jsonl(&dir.path().join("late.jsonl"), OpenOptions::new())
        .await
        .expect("opens");
    for session in [Session::in_memory("m"), file] {
        // Appends before anyone listens are not queued for anyone...
        for i in 0..3 {
            put(&session, note(0, i)).await;
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let _sub = session.subscribe(move |seq, _| sink.lock().expect("seen").push(seq));
        // ...and every one after is heard once, in seq order.
        for i in 3..6 {
            put(&session, note(0, i)).await;
        }
        assert_eq!(*seen.lock().expect("seen"), vec![3, 4, 5]);
        assert_eq!(session.events().len(), 6);
    }
}
