//! Every reference log reads, checks clean, writes back equal JSON values in the same key order,
//! resumes without repair, passes the invariant checks, and derives a consistent history.

use std::collections::HashSet;

use dsh_session::{
    OpenOptions, Session, check_bytes, derive_messages_from, read_log, to_anthropic, to_openai,
};
use serde_json::Value;

use super::support::{completed, fixtures, put, tempdir};
use dsh_session::Event;

/// A line's JSON re-serialized compactly (key order kept: serde_json preserves order here).
fn normalized(line: &str) -> String {
    let v: Value = serde_json::from_str(line).expect("fixture line is JSON");
    serde_json::to_string(&v).expect("serializes")
}

#[test]
fn every_fixture_reads_checks_clean_and_writes_back_the_same_values_in_order() {
    for path in fixtures() {
        let bytes = std::fs::read(&path).expect("read");
        let problems = check_bytes(&bytes);
        assert!(problems.is_empty(), "{}: {problems:?}", path.display());
        let log = read_log(&bytes).expect("reads");
        let text = String::from_utf8(bytes).expect("utf8");
        let lines: Vec<&str> = text.lines().collect();
        let header = log.header.as_ref().expect("header");
        assert_eq!(header.json().to_json_string(), normalized(lines[0]));
        assert_eq!(log.events.len(), lines.len() - 1, "{}", path.display());
        for ((_, event), line) in log.events.iter().zip(&lines[1..]) {
            assert_eq!(event.to_json_line(), normalized(line), "{}", path.display());
        }
    }
}

#[test]
fn fixture_seqs_count_chunk_runs_by_their_entries() {
    for path in fixtures() {
        let bytes = std::fs::read(&path).expect("read");
        let log = read_log(&bytes).expect("reads");
        let text = String::from_utf8(bytes).expect("utf8");
        let mut expected = 0u64;
        for (i, line) in text.lines().skip(1).enumerate() {
            let v: Value = serde_json::from_str(line).expect("json");
            let ty = v["type"].as_str().expect("type");
            assert_eq!(
                log.events[i].0,
                expected,
                "{} line {}",
                path.display(),
                i + 2
            );
            expected += if ty.ends_with("-chunks") {
                let key = if ty == "tool-call-chunks" {
                    "args"
                } else {
                    "texts"
                };
                v["data"][key].as_array().expect("entries").len() as u64
            } else {
                1
            };
            if ty == "tool/result" {
                let call_seq = v["sourceEventSeqs"][0].as_u64().expect("seq");
                let (_, call) = log
                    .events
                    .iter()
                    .find(|(s, _)| *s == call_seq)
                    .expect("the result points at an event");
                assert_eq!(call.event_type(), "tool/call", "{}", path.display());
            }
        }
        assert_eq!(log.next_seq(), expected);
    }
}

#[tokio::test]
async fn every_fixture_resumes_without_repair_under_the_invariant_checks() {
    let dir = tempdir();
    for path in fixtures() {
        let bytes = std::fs::read(&path).expect("read");
        let log = read_log(&bytes).expect("reads");
        let copy = dir.path().join(path.file_name().expect("name"));
        std::fs::write(&copy, &bytes).expect("copy");
        let (session, report) = Session::open_jsonl(&copy, OpenOptions::new().invariants(true))
            .await
            .expect("opens");
        assert!(report.is_clean(), "{}: {report:?}", path.display());
        assert_eq!(session.events().len(), log.events.len());
        assert_eq!(session.next_seq(), log.next_seq());
        assert_eq!(session.open_turn(), None);
        let id = log.header.as_ref().map(|h| h.id().to_owned());
        assert_eq!(Some(session.id().to_owned()), id);
        let next = log.next_seq();
        assert_eq!(put(&session, Event::turn_start(9)).await, next);
        put(&session, Event::turn_end(9, completed())).await;
        session.close().await.expect("closes");
        let after = std::fs::read(&copy).expect("read back");
        assert!(
            after.starts_with(&bytes),
            "existing lines are kept byte for byte"
        );
        assert!(check_bytes(&after).is_empty());
    }
}

#[test]
fn every_fixture_derives_a_history_whose_results_answer_earlier_calls() {
    for path in fixtures() {
        let bytes = std::fs::read(&path).expect("read");
        let log = read_log(&bytes).expect("reads");
        let pairs = log.events.iter().map(|(s, e)| (*s, e));
        let messages = derive_messages_from(pairs);
        let count = |t: &str| {
            log.events
                .iter()
                .filter(|(_, e)| e.event_type() == t)
                .count()
        };
        let results = count("tool/result");
        let surface = count("user/message") + count("assistant/message") + results;
        assert!(messages.len() <= surface && messages.len() >= count("user/message") + results);

        let openai = to_openai(&messages);
        let mut offered = HashSet::new();
        let mut answered = 0;
        for m in openai.value().as_array().expect("array") {
            if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
                for c in calls {
                    assert!(c["function"]["arguments"].is_string());
                    offered.insert(c["id"].as_str().expect("id").to_owned());
                }
            }
            if m["role"] == "tool" {
                let id = m["tool_call_id"].as_str().expect("id");
                assert!(
                    offered.contains(id),
                    "{}: tool message for {id} before its call",
                    path.display()
                );
                answered += 1;
            }
        }
        assert_eq!(answered, results, "{}", path.display());

        let anthropic = to_anthropic(&messages);
        let mut used = HashSet::new();
        let mut last_role = String::new();
        let mut answered = 0;
        for m in anthropic.value().as_array().expect("array") {
            let role = m["role"].as_str().expect("role").to_owned();
            assert_ne!(role, last_role, "roles alternate");
            last_role = role;
            for b in m["content"].as_array().expect("content") {
                match b["type"].as_str() {
                    Some("tool_use") => {
                        assert!(b["input"].is_object());
                        used.insert(b["id"].as_str().expect("id").to_owned());
                    }
                    Some("tool_result") => {
                        assert!(used.contains(b["tool_use_id"].as_str().expect("id")));
                        answered += 1;
                    }
                    _ => {}
                }
            }
        }
        assert_eq!(answered, results, "{}", path.display());
    }
}
