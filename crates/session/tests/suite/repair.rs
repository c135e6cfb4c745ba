//! Crash repair (spec I4): torn tails cut, in-flight calls closed with INTERRUPTED results, open
//! step and turn closed; every complete line kept; bad lines before the tail refused.

use dsh_core::ContextMessage;
use dsh_session::{
    Event, Header, OpenOptions, Session, SessionError, check_bytes, read_log, repair, repair_bytes,
};
use serde_json::{Value, json};

use super::support::{completed, fixtures, j, tempdir, text};

fn log_bytes(events: &[Event]) -> Vec<u8> {
    let mut out = Header::new("crash", "/w")
        .json()
        .to_json_string()
        .into_bytes();
    out.push(b'\n');
    for e in events {
        out.extend_from_slice(e.to_json_line().as_bytes());
        out.push(b'\n');
    }
    out
}

/// A valid log with chunk runs, parallel calls, Code Mode records and two steps.
fn sample_log() -> Vec<u8> {
    let args = j(json!({"value": "x"}));
    let events = vec![
        Event::turn_start(1),                                               // 0
        Event::step_start(1, 1),                                            // 1
        Event::user_message(&ContextMessage::plugin_text("user", "do it")), // 2
        Event::other(
            "text-chunks",
            j(json!({"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b"]})),
        ), // 3,4
        Event::assistant_message(
            1,
            1,
            j(json!({"role": "assistant", "content": [
            {"type": "tool-call", "id": "c1", "name": "echo", "arguments": "{}"},
            {"type": "tool-call", "id": "c2", "name": "run_code", "arguments": "{}"}]})),
        ), // 5
        Event::tool_call(1, 1, "c1", "echo", "{}"),                         // 6
        Event::tool_call(1, 1, "c2", "run_code", "{}"),                     // 7
        Event::code_dispatch_start("c2", "c2", "c2:code:1", "echo", args.clone()), // 8
        Event::tool_result(1, 1, "c1", 6, text("echo"), false, None, None), // 9
        Event::code_dispatch(
            "c2",
            "c2",
            "c2:code:1",
            "echo",
            args.clone(),
            false,
            text("echo:x"),
        ), // 10
        Event::tool_result(1, 1, "c2", 7, text("done"), false, None, None), // 11
        Event::step_end(1, 1),                                              // 12
        Event::step_start(1, 2),                                            // 13
        Event::tool_call(1, 2, "c3", "echo", "not json"),                   // 14
        Event::tool_result(1, 2, "c3", 14, text("Error: bad"), true, None, None), // 15
        Event::step_end(1, 2),                                              // 16
        Event::turn_end(1, completed()),                                    // 17
    ];
    let bytes = log_bytes(&events);
    assert!(check_bytes(&bytes).is_empty(), "the sample is valid");
    bytes
}

fn complete_prefix(cut: &[u8]) -> &[u8] {
    match cut.iter().rposition(|&b| b == b'\n') {
        Some(i) => &cut[..=i],
        None => &[],
    }
}

#[test]
fn a_log_cut_at_every_byte_offset_repairs_to_a_clean_log_keeping_every_complete_line() {
    let bytes = sample_log();
    let mut interrupted_seen = 0;
    for k in 0..=bytes.len() {
        let cut = &bytes[..k];
        let (repaired, report) = repair_bytes(cut).unwrap_or_else(|e| panic!("offset {k}: {e}"));
        let kept = complete_prefix(cut);
        assert!(
            repaired.starts_with(kept),
            "offset {k}: a complete line was lost"
        );
        let problems = check_bytes(&repaired);
        assert!(problems.is_empty(), "offset {k}: {problems:?}");
        match &report.torn_tail {
            None => assert!(repaired.starts_with(cut), "offset {k}: nothing was cut"),
            Some(torn) => assert_eq!(torn.bytes, k - kept.len(), "offset {k}: only the torn tail"),
        }
        assert_eq!(
            report.added_newline,
            report.torn_tail.is_none() && kept.len() < k
        );
        if !report.interrupted_calls.is_empty() {
            interrupted_seen += 1;
        }
        if !report.interrupted_calls.is_empty() && interrupted_seen % 5 == 1 {
            let log = read_log(&repaired).expect("reads");
            for call in &report.interrupted_calls {
                let result = log
                    .events
                    .iter()
                    .find_map(|(_, e)| e.as_tool_result().filter(|r| r.call_seq == Some(call.seq)))
                    .expect("a synthetic result");
                assert_eq!(result.call_id, call.call_id);
                assert_eq!(
                    result.error,
                    Some(&json!({"name": "InterruptedError", "code": "INTERRUPTED"}))
                );
            }
        }
        if k % 29 == 0 {
            let (again, second) = repair_bytes(&repaired).expect("repairs again");
            assert!(
                second.is_clean() && again == repaired,
                "offset {k}: repair is idempotent"
            );
        }
    }
    assert!(
        interrupted_seen > 0,
        "some cuts fall between a call and its result"
    );
}

#[test]
fn reference_fixtures_cut_at_line_ends_and_mid_line_repair_clean() {
    let mut small = fixtures();
    small.sort_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(u64::MAX));
    for path in small.into_iter().take(4) {
        let bytes = std::fs::read(&path).expect("read");
        let mut offsets: Vec<usize> = bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1)
            .collect();
        offsets.extend((0..bytes.len()).step_by(997));
        for k in offsets {
            let (repaired, _) = repair_bytes(&bytes[..k]).expect("repairs");
            assert!(repaired.starts_with(complete_prefix(&bytes[..k])));
            let problems = check_bytes(&repaired);
            assert!(
                problems.is_empty(),
                "{} at {k}: {problems:?}",
                path.display()
            );
        }
    }
}

#[tokio::test]
async fn an_in_flight_call_gets_an_interrupted_result_and_the_step_and_turn_are_closed() {
    let dir = tempdir();
    let path = dir.path().join("crashed.jsonl");
    let events = vec![
        Event::turn_start(1),
        Event::step_start(1, 1),
        Event::tool_call(1, 1, "done", "echo", "{}"),
        Event::tool_result(1, 1, "done", 2, text("ok"), false, None, None),
        Event::tool_call(1, 1, "flying", "bash", "{\"command\":\"rm -rf build\"}"),
    ];
    let mut bytes = log_bytes(&events);
    bytes.extend_from_slice(br#"{"type":"tool/result","data":{"turn":1,"st"#);
    std::fs::write(&path, &bytes).expect("write");

    let (session, report) = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect("opens");
    assert_eq!(report.torn_tail.as_ref().map(|t| t.line), Some(7));
    assert_eq!(report.interrupted_calls.len(), 1);
    assert_eq!(
        (
            report.interrupted_calls[0].call_id.as_str(),
            report.interrupted_calls[0].seq
        ),
        ("flying", 4)
    );
    assert_eq!(report.closed_step, Some((1, 1)));
    assert_eq!(report.closed_turn, Some(1));
    assert_eq!(report.appended_events(), 3);
    assert_eq!((session.open_turn(), session.open_step()), (None, None));
    assert_eq!(session.next_seq(), 8);
    session.close().await.expect("closes");

    let after = std::fs::read(&path).expect("read");
    let complete = complete_prefix(&bytes);
    assert!(after.starts_with(complete));
    assert!(check_bytes(&after).is_empty());
    let tail: Vec<Value> = std::str::from_utf8(&after[complete.len()..])
        .expect("utf8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(tail.len(), 3);
    let result = &tail[0];
    assert_eq!(result["type"], json!("tool/result"));
    assert_eq!(result["sourceEventSeqs"], json!([4]));
    assert_eq!(result["surfaceOp"], json!("append"));
    assert_eq!(
        result["data"]["error"],
        json!({"name": "InterruptedError", "code": "INTERRUPTED"})
    );
    let block = &result["data"]["message"]["content"][0];
    assert_eq!(block["toolCallId"], json!("flying"));
    assert_eq!(block["isError"], json!(true));
    let said = block["content"][0]["text"].as_str().expect("text");
    assert!(
        said.starts_with("Error: ") && said.contains("may or may not have run"),
        "{said}"
    );
    assert_eq!(
        tail[1],
        json!({"type": "step/end", "data": {"turn": 1, "step": 1}})
    );
    assert_eq!(
        tail[2],
        json!({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "interrupted"}}})
    );
}

#[test]
fn a_complete_last_line_without_its_newline_is_kept() {
    let mut bytes = log_bytes(&[Event::turn_start(1)]);
    bytes.extend_from_slice(Event::turn_end(1, completed()).to_json_line().as_bytes());
    let (repaired, report) = repair_bytes(&bytes).expect("repairs");
    assert!(report.added_newline && report.torn_tail.is_none());
    assert_eq!(repaired.len(), bytes.len() + 1);
    assert!(repaired.starts_with(&bytes) && repaired.ends_with(b"\n"));
    assert_eq!(report.closed_turn, None);
}

#[tokio::test]
async fn bad_json_in_the_middle_is_an_error_with_its_line_and_nothing_is_changed() {
    let dir = tempdir();
    let path = dir.path().join("bad.jsonl");
    let mut bytes = log_bytes(&[Event::turn_start(1)]);
    bytes.extend_from_slice(b"{\"type\":\"step/start\",\"data\":{\"turn\":1,\n");
    bytes.extend_from_slice(Event::turn_end(1, completed()).to_json_line().as_bytes());
    bytes.push(b'\n');
    std::fs::write(&path, &bytes).expect("write");
    let err = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect_err("refused");
    assert!(
        matches!(err, SessionError::Corrupt { line: 3, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("line 3"), "{err}");
    let err = repair(&path).expect_err("repair refuses too");
    assert_eq!(err.line(), Some(3));
    assert_eq!(
        std::fs::read(&path).expect("read"),
        bytes,
        "nothing was changed"
    );
    let problems = check_bytes(&bytes);
    assert_eq!(problems.iter().map(|p| p.line).collect::<Vec<_>>(), [3]);
}

#[tokio::test]
async fn a_torn_header_leaves_a_log_that_was_never_started() {
    let dir = tempdir();
    let path = dir.path().join("torn-header.jsonl");
    std::fs::write(&path, br#"{"type":"session","vers"#).expect("write");
    let report = repair(&path).expect("repairs");
    assert!(report.header_lost);
    assert!(std::fs::read(&path).expect("read").is_empty());
    assert!(check_bytes(b"").is_empty());

    std::fs::write(&path, br#"{"type":"session","vers"#).expect("write");
    let (session, report) = Session::open_jsonl(&path, OpenOptions::new().id("fresh"))
        .await
        .expect("opens");
    assert!(report.header_lost);
    assert_eq!(session.id(), "fresh");
    session.close().await.expect("closes");
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(
        text.starts_with(r#"{"type":"session","version":0,"id":"fresh""#),
        "{text}"
    );
}

#[tokio::test]
async fn a_log_breaking_the_pairing_rules_is_refused_unless_opened_leniently() {
    let dir = tempdir();
    let path = dir.path().join("unpaired.jsonl");
    let bytes = log_bytes(&[
        Event::turn_start(1),
        Event::step_start(1, 1),
        Event::tool_call(1, 1, "lost", "echo", "{}"),
        Event::step_end(1, 1),
        Event::turn_end(1, completed()),
    ]);
    std::fs::write(&path, &bytes).expect("write");
    let err = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect_err("refused");
    match &err {
        SessionError::Invalid { problems } => {
            assert_eq!(problems.len(), 1);
            assert_eq!(problems[0].line, 4);
            assert!(problems[0].message.contains("\"lost\""), "{}", problems[0]);
        }
        other => panic!("expected Invalid, got {other}"),
    }
    assert_eq!(std::fs::read(&path).expect("read"), bytes);
    let (session, report) = Session::open_jsonl(&path, OpenOptions::new().strict(false))
        .await
        .expect("opens leniently");
    assert!(
        report.is_clean(),
        "a call whose step ended is not in flight: {report:?}"
    );
    assert_eq!(session.next_seq(), 5);
}
