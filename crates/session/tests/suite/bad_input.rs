//! Bad input (issue 2): malformed lines, unknown header versions, unknown types, non-UTF-8, a
//! 10 MB line, 100k-deep nesting. Each is a clear error with its line or is kept verbatim; none
//! panics or overflows the stack; nothing already in the log is lost.

use dsh_core::Json;
use dsh_session::{
    Event, Header, OpenOptions, Session, SessionError, check_bytes, read_log, repair_bytes,
};
use serde_json::{Value, json};

use super::support::{j, put, tempdir};

fn header_line() -> Vec<u8> {
    let mut out = Header::new("bad", "/").json().to_json_string().into_bytes();
    out.push(b'\n');
    out
}

fn with_line(middle: &[u8]) -> Vec<u8> {
    let mut bytes = header_line();
    bytes.extend_from_slice(Event::turn_start(1).to_json_line().as_bytes());
    bytes.push(b'\n');
    bytes.extend_from_slice(middle);
    bytes.push(b'\n');
    bytes.extend_from_slice(
        Event::turn_end(1, j(json!({"kind": "completed"})))
            .to_json_line()
            .as_bytes(),
    );
    bytes.push(b'\n');
    bytes
}

/// Opening `bytes` fails with an error naming `line`, and the file is left exactly as it was.
async fn refused_on_line(bytes: &[u8], line: usize, needle: &str) {
    let dir = tempdir();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(&path, bytes).expect("write");
    let err = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect_err("refused");
    assert_eq!(err.line(), Some(line), "{err}");
    let shown = err.to_string();
    assert!(
        shown.contains(&format!("line {line}")) && shown.contains(needle),
        "{shown}"
    );
    assert_eq!(
        std::fs::read(&path).expect("read"),
        bytes,
        "nothing was changed"
    );
    let problems = check_bytes(bytes);
    assert!(problems.iter().any(|p| p.line == line), "{problems:?}");
}

fn deep_array(depth: usize) -> String {
    let mut s = "[".repeat(depth);
    s.push_str(&"]".repeat(depth));
    s
}

#[tokio::test]
async fn malformed_event_lines_are_errors_with_their_line() {
    refused_on_line(&with_line(b"{\"type\":\"x\",\"data\":"), 3, "invalid JSON").await;
    refused_on_line(&with_line(b"[1,2,3]"), 3, "must be a JSON object").await;
    refused_on_line(&with_line(b"{\"data\":{}}"), 3, "no `type`").await;
    refused_on_line(&with_line(b"{\"type\":\"x\"}"), 3, "no `data`").await;
    refused_on_line(
        &with_line(b"{\"type\":\"x\",\"data\":{},\"sourceEventSeqs\":[-1]}"),
        3,
        "non-negative",
    )
    .await;
    refused_on_line(
        &with_line(b"{\"type\":\"text-chunks\",\"data\":{\"texts\":[]}}"),
        3,
        "non-empty `texts`",
    )
    .await;
}

#[tokio::test]
async fn an_unknown_header_version_is_a_clear_error() {
    let mut bytes =
        b"{\"type\":\"session\",\"version\":2,\"id\":\"x\",\"createdAt\":0,\"cwd\":\"/\"}\n"
            .to_vec();
    bytes.extend_from_slice(Event::turn_start(1).to_json_line().as_bytes());
    bytes.push(b'\n');
    let dir = tempdir();
    let path = dir.path().join("v2.jsonl");
    std::fs::write(&path, &bytes).expect("write");
    let err = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect_err("refused");
    assert!(
        matches!(&err, SessionError::UnknownVersion { version } if version == "2"),
        "{err}"
    );
    assert!(err.to_string().contains("unknown session log version 2"));
    assert_eq!(err.line(), Some(1));
    assert_eq!(std::fs::read(&path).expect("read"), bytes);
}

#[tokio::test]
async fn non_utf8_bytes_are_an_error_with_their_line() {
    refused_on_line(
        &with_line(b"{\"type\":\"x\",\"data\":\"caf\xe9\"}"),
        3,
        "not valid UTF-8",
    )
    .await;
    let mut bytes = b"{\"type\":\"session\",\"version\":0,\"id\":\"\xff\"}\n".to_vec();
    bytes.extend_from_slice(b"{}\n");
    refused_on_line(&bytes, 1, "UTF-8").await;
}

#[tokio::test]
async fn unknown_event_types_survive_a_file_round_trip_verbatim() {
    let dir = tempdir();
    let path = dir.path().join("unknown.jsonl");
    let odd = Event::other(
        "plugin/whatever",
        j(json!({"z": 1, "a": [true, null, 2.5, "s"], "m": {"y": {}, "b": []}})),
    );
    let (s, _) = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect("opens");
    put(&s, odd.clone()).await;
    s.close().await.expect("closes");
    let mut bytes = std::fs::read(&path).expect("read");
    let foreign = br#"{"data":{"k":1},"type":"foreign/layout","note":"kept"}"#;
    bytes.extend_from_slice(foreign);
    bytes.push(b'\n');
    std::fs::write(&path, &bytes).expect("write");
    let (s, report) = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect("reopens");
    assert!(report.is_clean());
    let events = s.events();
    assert_eq!(events.get(0).expect("first").1, odd);
    assert_eq!(
        events.get(1).expect("second").1.to_json_line().as_bytes(),
        foreign
    );
}

#[tokio::test]
async fn a_ten_megabyte_line_is_written_read_and_checked() {
    let dir = tempdir();
    let path = dir.path().join("big.jsonl");
    let big = "x".repeat(10 << 20);
    let (s, _) = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect("opens");
    put(&s, Event::other("test/big", j(json!({"text": big})))).await;
    put(&s, Event::other("test/after", j(json!({})))).await;
    s.close().await.expect("closes");
    let bytes = std::fs::read(&path).expect("read");
    assert!(bytes.len() > 10 << 20);
    assert!(check_bytes(&bytes).is_empty());
    let log = read_log(&bytes).expect("reads");
    assert_eq!(
        log.events[0].1.data().value()["text"]
            .as_str()
            .map(str::len),
        Some(10 << 20)
    );

    // The same line torn in the middle is cut by repair; every earlier line is kept.
    let torn = &bytes[..bytes.len() / 2];
    let (repaired, report) = repair_bytes(torn).expect("repairs");
    assert_eq!(report.torn_tail.map(|t| t.line), Some(2));
    assert_eq!(repaired, header_line_of(&bytes));
}

fn header_line_of(bytes: &[u8]) -> Vec<u8> {
    let end = bytes.iter().position(|&b| b == b'\n').expect("newline");
    bytes[..=end].to_vec()
}

#[tokio::test]
async fn a_hundred_thousand_levels_of_nesting_is_an_error_not_a_stack_overflow() {
    let line = format!("{{\"type\":\"x\",\"data\":{}}}", deep_array(100_000));
    refused_on_line(&with_line(line.as_bytes()), 3, "nests deeper than").await;
    // As a torn tail (never closed) it is simply cut.
    let header = header_line();
    let mut bytes = header.clone();
    bytes.extend_from_slice(b"{\"type\":\"x\",\"data\":");
    bytes.extend_from_slice("[".repeat(100_000).as_bytes());
    let (repaired, report) = repair_bytes(&bytes).expect("repairs");
    assert!(report.torn_tail.is_some());
    assert_eq!(repaired, header);
}

#[tokio::test]
async fn an_event_nested_beyond_the_limit_is_refused_and_nothing_is_appended() {
    let mut deep = Value::Null;
    for _ in 0..100_000 {
        deep = Value::Array(vec![deep]);
    }
    let event = Event::other("test/deep", Json::from_shallow(deep));
    let dir = tempdir();
    let (s, _) = Session::open_jsonl(&dir.path().join("deep.jsonl"), OpenOptions::new())
        .await
        .expect("opens");
    let err = s.append(event).await.expect_err("refused");
    assert!(
        matches!(&err, SessionError::InvalidEvent(m) if m.contains("deeper")),
        "{err}"
    );
    assert_eq!(s.next_seq(), 0);
}

#[tokio::test]
async fn nesting_at_the_limit_round_trips_through_a_file() {
    let too_deep = Json::parse(&deep_array(dsh_core::json::MAX_DEPTH)).expect("a valid Json");
    let err = Session::in_memory("m")
        .append(Event::other("test/deep", too_deep))
        .await
        .expect_err("its line would be too deep to read back");
    assert!(err.to_string().contains("deeper than"), "{err}");
    let data = Json::parse(&deep_array(dsh_session::MAX_DATA_DEPTH)).expect("at the limit");
    let dir = tempdir();
    let path = dir.path().join("limit.jsonl");
    let (s, _) = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect("opens");
    put(&s, Event::other("test/deep", data.clone())).await;
    s.close().await.expect("closes");
    let bytes = std::fs::read(&path).expect("read");
    let problems = check_bytes(&bytes);
    assert!(problems.is_empty(), "{problems:?}");
    let log = read_log(&bytes).expect("reads");
    assert_eq!(log.events[0].1.data(), &data);
}

#[test]
fn deep_values_pass_through_checks_history_and_exports_on_a_small_stack() {
    let run = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let depth = dsh_session::MAX_DATA_DEPTH - 8;
            let deep = Json::parse(&deep_array(depth)).expect("deep");
            let session = Session::in_memory("deep");
            session.enable_invariants().expect("enables");
            let block = dsh_core::ContentBlock::Other(
                Json::parse(&format!(
                    "{{\"type\":\"resource\",\"v\":{}}}",
                    deep_array(depth - 4)
                ))
                .expect("block"),
            );
            let appended = futures::executor::block_on(async {
                session.append(Event::turn_start(1)).await?;
                let args = format!("{{\"a\":{}}}", deep_array(depth - 4));
                let message = json!({"role": "assistant", "content": [
                    {"type": "tool-call", "id": "c", "name": "echo", "arguments": args}
                ]});
                session
                    .append(Event::assistant_message(
                        1,
                        1,
                        Json::new(message).expect("msg"),
                    ))
                    .await?;
                let call = session
                    .append(Event::tool_call(1, 1, "c", "echo", args.as_str()))
                    .await?;
                session
                    .append(Event::tool_result(
                        1,
                        1,
                        "c",
                        call,
                        &([block])[..],
                        false,
                        None,
                        Some(&deep),
                    ))
                    .await?;
                let asked = Event::other(
                    "approval/asked",
                    Json::new(json!({"id": "x", "toolName": "t"})).expect("ask"),
                );
                session.append(asked).await?;
                let weird = Json::new(json!({"id": "x", "outcome": Value::Null})).expect("decided");
                let _ = session
                    .append(Event::other("approval/decided", weird))
                    .await;
                Ok::<(), SessionError>(())
            });
            appended.expect("appends");
            let messages = dsh_session::derive_messages(&session.events());
            let openai = dsh_session::to_openai(&messages);
            let anthropic = dsh_session::to_anthropic(&messages);
            let problems = dsh_session::check_events(session.events().pairs());
            (
                messages.len(),
                openai.value().as_array().map(Vec::len),
                anthropic.value().as_array().map(Vec::len),
                problems.len(),
            )
        })
        .expect("thread");
    assert_eq!(
        run.join().expect("no stack overflow"),
        (2, Some(2), Some(2), 0)
    );
}
