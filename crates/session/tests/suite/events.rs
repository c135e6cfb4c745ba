//! Event shapes (spec L2; conformance LOG-04, LOG-14..17) and verbatim round trips.

use std::sync::Arc;

use dsh_core::{ContentBlock, ContextMessage, ErrorInfo};
use dsh_session::{Event, EventKind, Session, SessionError, SurfaceOp};
use serde_json::{Value, json};

use super::support::{j, put, text};

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect()
}

fn line_value(e: &Event) -> Value {
    serde_json::from_str(&e.to_json_line()).expect("line is JSON")
}

#[tokio::test]
async fn log_04_tool_call_keeps_call_id_name_and_raw_string_arguments() {
    let session = Session::in_memory("s");
    let seq = put(&session, Event::tool_call(1, 1, "c1", "echo", "{}")).await;
    let events = session.events();
    let (got_seq, event) = events.get(0).expect("appended");
    assert_eq!((seq, *got_seq), (0, 0));
    assert_eq!(event.event_type(), "tool/call");
    assert_eq!(
        *event.data().value(),
        json!({"turn": 1, "step": 1, "callId": "c1", "name": "echo", "arguments": "{}"})
    );
    assert_eq!(
        keys(event.data().value()),
        ["turn", "step", "callId", "name", "arguments"]
    );
    assert!(event.data().value()["arguments"].is_string());
    match event.kind() {
        EventKind::ToolCall(call) => {
            assert_eq!(
                (call.call_id, call.name, call.arguments),
                ("c1", "echo", "{}")
            );
            assert_eq!((call.turn, call.step), (Some(1), Some(1)));
        }
        other => panic!("expected a tool/call view, got {other:?}"),
    }
    assert_eq!(event.surface_op(), None);
    assert_eq!(event.source_event_seqs(), None);
    assert_eq!(
        event.to_json_line(),
        r#"{"type":"tool/call","data":{"turn":1,"step":1,"callId":"c1","name":"echo","arguments":"{}"}}"#
    );
}

#[test]
fn log_14_invalid_json_arguments_are_logged_as_the_exact_raw_string() {
    let event = Event::tool_call(1, 1, "c1", "echo", "not json");
    assert_eq!(event.data().value()["arguments"], json!("not json"));
    let back = Event::from_json_line(&event.to_json_line()).expect("reads back");
    assert_eq!(back.as_tool_call().map(|c| c.arguments), Some("not json"));
}

#[test]
fn log_15_empty_arguments_are_logged_as_the_empty_raw_string() {
    let event = Event::tool_call(1, 1, "c1", "echo", "");
    assert_eq!(event.data().value()["arguments"], json!(""));
    let back = Event::from_json_line(&event.to_json_line()).expect("reads back");
    assert_eq!(back, event);
}

#[test]
fn log_16_typed_failure_result_carries_exactly_name_and_code() {
    let info = ErrorInfo {
        name: Arc::from("HarnessError"),
        code: Arc::from("BOOM"),
    };
    let event = Event::tool_result(
        1,
        1,
        "c1",
        4,
        text("Error: exploded"),
        true,
        Some(&info),
        None,
    );
    let data = event.data().value();
    assert_eq!(
        data["error"],
        json!({"name": "HarnessError", "code": "BOOM"})
    );
    assert_eq!(data["message"]["content"][0]["isError"], json!(true));
    assert_eq!(
        data["message"]["content"][0]["content"],
        json!([{"type": "text", "text": "Error: exploded"}])
    );
    assert_eq!(keys(data), ["turn", "step", "message", "error"]);
}

#[test]
fn log_17_presentation_meta_is_logged_on_the_result() {
    let meta = j(json!({"presentation": "diff-card"}));
    let event = Event::tool_result(1, 1, "c1", 0, text("ok"), false, None, Some(&meta));
    let data = event.data().value();
    assert_eq!(data["meta"], json!({"presentation": "diff-card"}));
    assert_eq!(keys(data), ["turn", "step", "message", "meta"]);
    assert!(data.get("error").is_none(), "a success has no error key");
}

#[test]
fn tool_result_points_at_its_call_and_appends_to_the_surface() {
    let event = Event::tool_result(2, 3, "call_a", 18, text("alpha"), false, None, None);
    assert_eq!(event.source_event_seqs(), Some(&[18u64][..]));
    assert_eq!(event.surface_op(), Some(&SurfaceOp::Append));
    let line = line_value(&event);
    assert_eq!(
        keys(&line),
        ["type", "data", "sourceEventSeqs", "surfaceOp"]
    );
    let message = &line["data"]["message"];
    assert_eq!(keys(message), ["source", "content", "role", "id"]);
    assert_eq!(
        message["source"],
        json!({"kind": "tool", "callId": "call_a"})
    );
    assert_eq!(message["role"], json!("user"));
    assert!(message["id"].as_str().is_some_and(|id| !id.is_empty()));
    assert_eq!(
        keys(&message["content"][0]),
        ["type", "toolCallId", "content", "isError"]
    );
    assert_eq!(message["content"][0]["toolCallId"], json!("call_a"));
    let view = event.as_tool_result().expect("result view");
    assert_eq!(
        (view.call_id, view.call_seq, view.turn, view.step),
        ("call_a", Some(18), Some(2), Some(3))
    );
    assert_eq!(view.is_error, Some(false));
    let other = Event::tool_result(2, 3, "call_a", 18, text("alpha"), false, None, None);
    assert_ne!(
        event.data().value()["message"]["id"],
        other.data().value()["message"]["id"],
        "each result message gets a fresh id"
    );
}

#[test]
fn user_message_has_the_reference_shape() {
    let ctx = ContextMessage::plugin_text("goal", "keep going");
    let event = Event::user_message(&ctx);
    let line = line_value(&event);
    assert_eq!(keys(&line), ["type", "data", "surfaceOp"]);
    assert_eq!(line["surfaceOp"], json!("append"));
    assert_eq!(keys(&line["data"]), ["content", "source", "role", "id"]);
    assert_eq!(
        line["data"]["source"],
        json!({"kind": "plugin", "plugin": "goal"})
    );
    assert_eq!(
        line["data"]["content"],
        json!([{"type": "text", "text": "keep going"}])
    );
}

#[test]
fn framing_and_dispatch_events_have_the_reference_shapes() {
    assert_eq!(
        line_value(&Event::turn_start(1)),
        json!({"type": "turn/start", "data": {"turn": 1}})
    );
    assert_eq!(
        line_value(&Event::turn_end(1, j(json!({"kind": "completed"})))),
        json!({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}})
    );
    assert_eq!(
        line_value(&Event::step_start(1, 2)),
        json!({"type": "step/start", "data": {"turn": 1, "step": 2}})
    );
    assert_eq!(
        line_value(&Event::step_end(1, 2)),
        json!({"type": "step/end", "data": {"turn": 1, "step": 2}})
    );
    let args = j(json!({"command": "echo hi"}));
    let start = line_value(&Event::code_dispatch_start(
        "r",
        "r",
        "r:code:1",
        "bash",
        args.clone(),
    ));
    assert_eq!(
        keys(&start["data"]),
        [
            "rootCallId",
            "parentCallId",
            "subCallId",
            "name",
            "arguments"
        ]
    );
    let done = line_value(&Event::code_dispatch(
        "r",
        "r",
        "r:code:1",
        "bash",
        args.clone(),
        false,
        text("hi\n"),
    ));
    assert_eq!(
        keys(&done["data"]),
        [
            "rootCallId",
            "parentCallId",
            "subCallId",
            "name",
            "arguments",
            "isError",
            "content"
        ]
    );
    assert_eq!(done["data"]["arguments"], json!({"command": "echo hi"}));
    let message = j(json!({"role": "assistant", "content": [{"type": "text", "text": "DONE"}]}));
    let assistant = line_value(&Event::assistant_message_with_usage(
        1,
        2,
        message,
        Some(&j(json!({"inputTokens": 1}))),
    ));
    assert_eq!(
        keys(&assistant["data"]),
        ["turn", "step", "message", "usage"]
    );
    assert_eq!(assistant["surfaceOp"], json!("append"));
}

#[tokio::test]
async fn chunk_runs_occupy_one_seq_per_entry() {
    let session = Session::in_memory("s");
    let texts = Event::other(
        "text-chunks",
        j(json!({"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "texts": ["he", "l", "lo"]})),
    );
    assert_eq!(texts.seq_span(), 3);
    let args = Event::other(
        "tool-call-chunks",
        j(
            json!({"turn": 1, "step": 1, "index": 1, "dt": [0], "id": "c", "name": "n", "args": ["{", "}"]}),
        ),
    );
    assert_eq!(args.seq_span(), 2);
    assert_eq!(put(&session, Event::turn_start(1)).await, 0);
    assert_eq!(put(&session, texts).await, 1);
    assert_eq!(put(&session, args).await, 4);
    assert_eq!(
        put(&session, Event::turn_end(1, super::support::completed())).await,
        6
    );
    assert_eq!(session.next_seq(), 7);
    let events = session.events();
    assert_eq!(events.len(), 4);
    assert_eq!(
        events.find_seq(2).map(|(s, _)| *s),
        Some(1),
        "seq 2 is inside the text run"
    );
    assert_eq!(
        events.find_seq(5).map(|(s, e)| (*s, e.event_type())),
        Some((4, "tool-call-chunks"))
    );
}

#[tokio::test]
async fn chunk_run_without_entries_is_refused_and_not_appended() {
    let session = Session::in_memory("s");
    let empty = Event::other("text-chunks", j(json!({"turn": 1, "step": 1, "texts": []})));
    let err = session.append(empty).await.expect_err("refused");
    assert!(
        matches!(&err, SessionError::InvalidEvent(m) if m.contains("texts")),
        "{err}"
    );
    assert_eq!(session.next_seq(), 0);
    assert!(session.events().is_empty());
}

#[test]
fn unknown_event_types_and_layouts_are_kept_verbatim() {
    let lines = [
        r#"{"type":"hook/invoked","data":{"hook":"x","nested":{"deep":[1,2,{"k":null}]},"n":1.5}}"#,
        r#"{"type":"approval/asked","data":{"id":"a","toolName":"bash"}}"#,
        r#"{"data":{"a":1},"type":"odd/order"}"#,
        r#"{"type":"x","data":{},"surfaceOp":"append","sourceEventSeqs":[1]}"#,
        r#"{"type":"x","data":[],"extra":true}"#,
        r#"{"type":"user/message","data":{"content":[]},"sourceEventSeqs":[0,1],"surfaceOp":{"op":"replace","startSeq":0,"endSeq":1}}"#,
    ];
    for line in lines {
        let event = Event::from_json_line(line).expect(line);
        assert_eq!(event.to_json_line(), line);
    }
    let replaced = Event::from_json_line(lines[5]).expect("reads");
    assert!(
        matches!(replaced.surface_op(), Some(SurfaceOp::Other(op)) if op.value()["op"] == "replace")
    );
}

#[test]
fn other_content_blocks_are_kept_verbatim_in_results() {
    let odd =
        ContentBlock::from_value(json!({"type": "resource", "uri": "file:///x", "extra": [1]}))
            .expect("block");
    let event = Event::tool_result(
        1,
        1,
        "c",
        0,
        &([odd, ContentBlock::text("t")])[..],
        false,
        None,
        None,
    );
    assert_eq!(
        event.data().value()["message"]["content"][0]["content"],
        json!([{"type": "resource", "uri": "file:///x", "extra": [1]}, {"type": "text", "text": "t"}])
    );
}
