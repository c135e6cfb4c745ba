//! `dsh view --store URL`: the sessions of a real PostgreSQL store (a throwaway cluster, shared
//! with `store_cli.rs`; these tests fail without one) listed, shown, and a running one followed
//! live through the store's own tail (`LISTEN`/`NOTIFY`) as Server-Sent Events.

use serde_json::Value;

use super::store_cli::fresh_db;
use super::support::*;
use super::view::{Stream, Viewer, demo_log, get};

#[test]
fn view_store_lists_the_stores_sessions_and_shows_one_as_its_log() {
    let url = fresh_db();
    let t = tmp();
    let log = demo_log(t.path());
    let out = dsh_run(&["import", "--store", &url, s(&log), "--id", "demo"]);
    assert_eq!(out.code, 0, "{}", out.both());

    // A session id after the URL opens it first (the page reads the fragment).
    let viewer = Viewer::store(&url, Some("demo"));
    assert!(viewer.url.ends_with("/#demo"), "{}", viewer.url);
    let base = viewer.base();
    let (status, list) = get(&format!("{base}api/sessions"));
    assert_eq!(status, 200, "{list}");
    let list: Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["id"], "demo");
    assert_eq!(list[0]["live"], false);
    assert_eq!(list[0]["size"], events(&log).len() as u64);
    let place = list[0]["path"].as_str().unwrap();
    assert!(place.starts_with("demo in postgres://"), "{place}");

    let (status, all) = get(&format!("{base}api/events?id=demo&after=0"));
    assert_eq!(status, 200, "{all}");
    let all: Value = serde_json::from_str(&all).unwrap();
    let logged = events(&log);
    let shown: Vec<&Value> = all["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["event"])
        .collect();
    assert_eq!(shown, logged.iter().collect::<Vec<_>>());
    assert_eq!(all["header"], header(&log));
    assert_eq!(all["live"], false);

    // From a seq on: only the rest.
    let (_, tail) = get(&format!("{base}api/events?id=demo&after=60"));
    let tail: Value = serde_json::from_str(&tail).unwrap();
    assert_eq!(tail["events"][0]["seq"], 60);
    assert_eq!(tail["events"].as_array().unwrap().len(), logged.len() - 60);

    let (status, missing) = get(&format!("{base}api/events?id=nope"));
    assert_eq!(status, 404, "{missing}");
    let (status, missing) = get(&format!("{base}api/stream?id=nope"));
    assert_eq!(status, 404, "{missing}");
}

#[test]
fn view_store_streams_a_running_sessions_rows_until_its_writer_is_gone() {
    let url = fresh_db();
    let t = tmp();
    let viewer = Viewer::store(&url, None);
    // A run whose one call takes a while: the stream opens while it runs.
    let run = super::store_cli::running_store_session(t.path(), &url, "live-1", "slow", 4000);

    let (_, list) = get(&format!("{}api/sessions", viewer.url));
    let list: Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list[0]["id"], "live-1", "{list}");
    assert_eq!(list[0]["live"], true, "{list}");

    let mut stream = Stream::open(
        &format!("{}api/stream?id=live-1&after=0&offset=0", viewer.url),
        None,
    );
    let first = stream.next().unwrap();
    let body = first.json();
    assert_eq!(body["live"], true, "{body}");
    let types = |b: &Value| -> Vec<String> {
        b["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["event"]["type"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(types(&body).contains(&"tool/call".to_owned()), "{body}");
    assert!(
        !types(&body).contains(&"tool/result".to_owned()),
        "the call takes 4 s: {body}"
    );
    assert_eq!(first.id, format!("{}:0", body["next"]));

    // The rest is pushed as it is committed, numbered on from the first message.
    let mut next = body["next"].as_u64().unwrap();
    let mut later = Vec::new();
    let last = loop {
        let msg = stream.next().expect("the stream ends with an `end` event");
        if msg.event == "end" {
            break later.pop().unwrap();
        }
        assert_eq!(msg.event, "message", "{msg:?}");
        let b = msg.json();
        if let Some(first) = b["events"].as_array().unwrap().first() {
            assert_eq!(first["seq"], next, "{b}");
        }
        next = b["next"].as_u64().unwrap();
        later.push(b);
    };
    assert_eq!(wait(run.child), 0);
    let pushed: Vec<String> = later.iter().flat_map(types).collect();
    assert!(pushed.contains(&"tool/result".to_owned()), "{pushed:?}");
    assert!(pushed.contains(&"turn/end".to_owned()), "{pushed:?}");
    // The last message says the writer is gone; everything it wrote came before.
    assert_eq!(last["live"], false, "{last}");
    let exported = dsh_run(&["export", "--store", &url, "live-1"]);
    assert_eq!(exported.stdout.lines().count() as u64 - 1, next);
    drop(viewer);
}
