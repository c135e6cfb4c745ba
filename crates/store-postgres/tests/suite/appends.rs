//! Appends (spec L1, L3): committed before acknowledged, seqs in call order, group commit, an
//! export byte-identical to the file store's log; import then export is lossless.

use dsh_session::{Event, OpenOptions, Session, check_bytes};
use serde_json::json;

use super::support::{client, fresh_store};

fn note(i: usize) -> Event {
    Event::other(
        "test/note",
        dsh_core::Json::from_shallow(json!({"i": i, "text": "é \u{1F600} \\ \""})),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l3_concurrent_appends_get_seqs_in_call_order_and_the_export_equals_the_file_log() {
    let (store, url) = fresh_store().await;
    let opened = store
        .open("s1", "/work", OpenOptions::new())
        .await
        .expect("open");
    assert!(opened.created);
    assert!(opened.repair.is_clean());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s1.jsonl");
    let header = store.export("s1").await.expect("export");
    std::fs::write(&path, &header).expect("write header");
    let (file, _) = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect("file");
    for session in [&opened.session, &file] {
        let mut pending = vec![
            session.append(Event::turn_start(1)),
            session.append(Event::step_start(1, 1)),
        ];
        pending.extend((0..200).map(|i| session.append(note(i))));
        let seqs: Vec<u64> = futures::future::join_all(pending)
            .await
            .into_iter()
            .map(|r| r.expect("acked"))
            .collect();
        assert_eq!(seqs, (0..202).collect::<Vec<u64>>());
        session
            .append(Event::step_end(1, 1))
            .await
            .expect("step end");
        session
            .append(Event::turn_end(
                1,
                dsh_core::Json::from_shallow(json!({"kind": "completed"})),
            ))
            .await
            .expect("turn end");
        session.close().await.expect("close");
    }
    let exported = store.export("s1").await.expect("export");
    assert_eq!(exported, std::fs::read(&path).expect("read"));
    assert!(check_bytes(&exported).is_empty());
    let c = client(&url).await;
    let rows: i64 = c
        .query_one(
            "SELECT count(*) FROM dsh_events WHERE session_id = 's1'",
            &[],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(rows, 204);
    // Rows of one transaction share their `xmin`: 202 appends made together took few commits.
    let commits: i64 = c
        .query_one(
            "SELECT count(DISTINCT xmin::text) FROM dsh_events WHERE session_id = 's1'",
            &[],
        )
        .await
        .expect("xmin")
        .get(0);
    assert!(
        commits <= 20,
        "{commits} transactions for 204 appends: not group-committed"
    );
}

#[tokio::test]
async fn a_resumed_session_continues_its_seqs_and_its_log() {
    let (store, _) = fresh_store().await;
    let first = store
        .open("s2", "/w", OpenOptions::new())
        .await
        .expect("open");
    first
        .session
        .append(Event::turn_start(1))
        .await
        .expect("append");
    first
        .session
        .append(Event::turn_end(
            1,
            dsh_core::Json::from_shallow(json!({"kind": "completed"})),
        ))
        .await
        .expect("append");
    first.session.close().await.expect("close");
    let again = store
        .open("s2", "/elsewhere", OpenOptions::new())
        .await
        .expect("resume");
    assert!(!again.created);
    assert!(again.repair.is_clean());
    assert_eq!(again.session.events().len(), 2);
    assert_eq!(again.session.header().cwd(), Some("/w"));
    assert_eq!(
        again
            .session
            .append(Event::turn_start(2))
            .await
            .expect("append"),
        2
    );
    again.session.close().await.expect("close");
    let missing = store.resume("nope", OpenOptions::new()).await;
    assert!(
        matches!(
            missing,
            Err(dsh_store_postgres::StoreError::NoSuchSession(_))
        ),
        "{missing:?}"
    );
}

#[tokio::test]
async fn every_reference_harness_log_imported_then_exported_is_byte_identical() {
    let (store, _) = fresh_store().await;
    let dir = std::path::Path::new("/work/shared/fixtures/reference-sessions");
    let dir = if dir.is_dir() {
        dir.to_path_buf()
    } else {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../session/tests/fixtures/reference-sessions")
    };
    let mut imported = 0;
    for entry in std::fs::read_dir(&dir).expect("fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("read");
        let stem = path.file_stem().and_then(|s| s.to_str()).expect("name");
        let done = store
            .import_as(&bytes, Some(stem))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let back = store.export(&done.id).await.expect("export");
        assert!(
            back == bytes,
            "{} changed through the store",
            path.display()
        );
        store.verify(&done.id).await.expect("verify");
        imported += 1;
    }
    assert!(imported >= 5, "only {imported} logs in {}", dir.display());
    // The same log twice is refused.
    let any = std::fs::read_dir(&dir)
        .expect("fixtures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .expect("a log");
    let stem = any
        .file_stem()
        .and_then(|s| s.to_str())
        .expect("name")
        .to_owned();
    let again = store
        .import_as(&std::fs::read(&any).expect("read"), Some(&stem))
        .await;
    assert!(
        matches!(again, Err(dsh_store_postgres::StoreError::Exists(_))),
        "{again:?}"
    );
}
