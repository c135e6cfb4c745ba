//! Events built by the typed constructors keep their data as text and build the tree lazily:
//! the tree, its key order and the log line must be exactly those of the tree built eagerly
//! (spec L2; conformance LOG-04, LOG-16, LOG-17).

use std::sync::Arc;

use dsh_core::json::MAX_DEPTH;
use dsh_core::{ContentBlock, ContextMessage, ErrorInfo, Json};
use dsh_session::{Event, MAX_DATA_DEPTH, Session, SessionError, SurfaceOp};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// An object with keys in the order given (the crate's canonical key order).
fn obj(entries: Vec<(&str, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in entries {
        m.insert(k.to_owned(), v);
    }
    Value::Object(m)
}

/// The keys of every object in `v`, depth first: equal values with different key orders differ.
fn key_paths(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                out.push(k.clone());
                key_paths(c, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|c| key_paths(c, out)),
        _ => {}
    }
}

/// The line the tree path writes: `{type, data, sourceEventSeqs?, surfaceOp?}` serialized from
/// the expected data value.
fn expected_line(e: &Event, data: &Value) -> String {
    let mut m = Map::new();
    m.insert("type".into(), Value::from(e.event_type()));
    m.insert("data".into(), data.clone());
    if let Some(seqs) = e.source_event_seqs() {
        m.insert("sourceEventSeqs".into(), json!(seqs));
    }
    if let Some(op) = e.surface_op() {
        m.insert("surfaceOp".into(), serde_json::to_value(op).expect("op"));
    }
    serde_json::to_string(&Value::Object(m)).expect("line")
}

/// Asserts the event's data equals `expected` with the same key order everywhere, and its line
/// is byte for byte the one serializing that tree gives, before and after the tree is built.
fn assert_same(e: &Event, expected: &Value) {
    let line_before = e.to_json_line();
    assert_eq!(line_before, expected_line(e, expected));
    assert_eq!(e.data().value(), expected);
    let (mut got, mut want) = (Vec::new(), Vec::new());
    key_paths(e.data().value(), &mut got);
    key_paths(expected, &mut want);
    assert_eq!(got, want);
    assert_eq!(e.to_json_line(), line_before);
    // The same data given as a tree writes the same line.
    let mut rebuilt = Event::other(e.event_type(), e.data().clone());
    if let Some(seqs) = e.source_event_seqs() {
        rebuilt = rebuilt.with_source_event_seqs(seqs.to_vec());
    }
    if let Some(op) = e.surface_op() {
        rebuilt = rebuilt.with_surface_op(op.clone());
    }
    assert_eq!(rebuilt.to_json_line(), line_before);
    assert_eq!(&rebuilt, e);
    let back = Event::from_json_line(&line_before).expect("line reads back");
    assert_eq!(&back, e);
}

fn content_value(content: &[ContentBlock]) -> Value {
    Value::Array(content.iter().map(ContentBlock::to_value).collect())
}

fn result_expected(
    e: &Event,
    call_id: &str,
    content: &[ContentBlock],
    is_error: bool,
    error: Option<&ErrorInfo>,
    meta: Option<&Json>,
) -> Value {
    let id = e.data().value()["message"]["id"].clone();
    let block = obj(vec![
        ("type", json!("tool-result")),
        ("toolCallId", json!(call_id)),
        ("content", content_value(content)),
        ("isError", json!(is_error)),
    ]);
    let message = obj(vec![
        (
            "source",
            obj(vec![("kind", json!("tool")), ("callId", json!(call_id))]),
        ),
        ("content", json!([block])),
        ("role", json!("user")),
        ("id", id),
    ]);
    let mut data = vec![("turn", json!(3)), ("step", json!(4)), ("message", message)];
    if let Some(info) = error {
        data.push((
            "error",
            obj(vec![
                ("name", json!(&*info.name)),
                ("code", json!(&*info.code)),
            ]),
        ));
    }
    if let Some(meta) = meta {
        data.push(("meta", meta.value().clone()));
    }
    obj(data)
}

#[test]
fn log_04_typed_constructors_give_the_eager_tree_and_line() {
    let reason = Json::new(json!({"kind": "completed", "z": 1.5, "a": [null, true]})).expect("j");
    let message = Json::new(
        json!({"role": "assistant", "content": [{"type": "text", "text": "hi"}], "b": -0.0}),
    )
    .expect("j");
    let usage = Json::new(json!({"output": 7, "input": 1e300})).expect("j");
    let args = Json::new(json!({"path": "a\"b", "n": 0.1})).expect("j");
    let content = [
        ContentBlock::text("t\u{1}\"\\é"),
        ContentBlock::Other(Json::new(json!({"type": "x", "y": 1, "a": 2})).expect("j")),
    ];
    let ctx = ContextMessage::from_plugin("pl\"ug", Arc::from(content.to_vec()));
    let ctx_value = obj(vec![
        ("content", content_value(&content)),
        ("source", ctx.source.value().clone()),
        ("role", json!(&*ctx.role)),
        ("id", json!(&*ctx.id)),
    ]);
    let dispatch = |extra: Vec<(&str, Value)>| {
        let mut d = vec![
            ("rootCallId", json!("r")),
            ("parentCallId", json!("p")),
            ("subCallId", json!("s")),
            ("name", json!("n")),
            ("arguments", args.value().clone()),
        ];
        d.extend(extra);
        obj(d)
    };
    let cases = vec![
        (
            Event::tool_call(1, 2, "c\"1", "na\nme", "{\"x\": 1}"),
            obj(vec![
                ("turn", json!(1)),
                ("step", json!(2)),
                ("callId", json!("c\"1")),
                ("name", json!("na\nme")),
                ("arguments", json!("{\"x\": 1}")),
            ]),
        ),
        (Event::turn_start(u32::MAX), json!({"turn": u32::MAX})),
        (
            Event::turn_end(2, reason.clone()),
            obj(vec![("turn", json!(2)), ("reason", reason.value().clone())]),
        ),
        (
            Event::step_start(1, 0),
            obj(vec![("turn", json!(1)), ("step", json!(0))]),
        ),
        (
            Event::step_end(1, 9),
            obj(vec![("turn", json!(1)), ("step", json!(9))]),
        ),
        (
            Event::assistant_message(1, 1, message.clone()),
            obj(vec![
                ("turn", json!(1)),
                ("step", json!(1)),
                ("message", message.value().clone()),
            ]),
        ),
        (
            Event::assistant_message_with_usage(1, 1, message.clone(), Some(&usage)),
            obj(vec![
                ("turn", json!(1)),
                ("step", json!(1)),
                ("message", message.value().clone()),
                ("usage", usage.value().clone()),
            ]),
        ),
        (Event::user_message(&ctx), ctx_value),
        (
            Event::code_dispatch_start("r", "p", "s", "n", args.clone()),
            dispatch(vec![]),
        ),
        (
            Event::code_dispatch("r", "p", "s", "n", args.clone(), true, &content[..]),
            dispatch(vec![
                ("isError", json!(true)),
                ("content", content_value(&content)),
            ]),
        ),
    ];
    for (event, expected) in &cases {
        assert_same(event, expected);
    }
}

#[test]
fn log_16_17_tool_results_give_the_eager_tree_and_line() {
    let content = [ContentBlock::text("out"), ContentBlock::text("")];
    let info = ErrorInfo {
        name: Arc::from("ToolError"),
        code: Arc::from("E\"X"),
    };
    let meta = Json::new(json!({"z": [1, 2.25], "a": {"k": "v"}})).expect("j");
    for (error, meta) in [
        (None, None),
        (Some(&info), None),
        (None, Some(&meta)),
        (Some(&info), Some(&meta)),
    ] {
        let e = Event::tool_result(
            3,
            4,
            "call\\1",
            7,
            &content[..],
            error.is_some(),
            error,
            meta,
        );
        let expected = result_expected(&e, "call\\1", &content, error.is_some(), error, meta);
        assert_same(&e, &expected);
        assert_eq!(e.source_event_seqs(), Some(&[7][..]));
        assert_eq!(e.surface_op(), Some(&SurfaceOp::Append));
    }
}

#[test]
fn views_read_from_kept_facts_match_the_tree() {
    for id in ["plain", "quo\"te", "back\\slash", "ctl\u{7}", "ünï"] {
        let e = Event::tool_call(5, 6, id, id, id);
        let view = e.as_tool_call().expect("call view");
        assert_eq!((view.call_id, view.name, view.arguments), (id, id, id));
        assert_eq!((view.turn, view.step), (Some(5), Some(6)));
        let tree = Event::other(e.event_type(), e.data().clone());
        assert_eq!(tree.as_tool_call(), Some(view));
        assert_eq!(tree.kind(), e.kind());
    }
    for e in [
        Event::turn_start(4),
        Event::step_start(4, 2),
        Event::step_end(4, 2),
    ] {
        let tree = Event::other(e.event_type(), e.data().clone());
        assert_eq!(tree.kind(), e.kind());
    }
}

#[test]
fn a_clone_shares_the_built_tree_and_known_types_share_their_name() {
    let e = Event::tool_call(1, 1, "c", "n", "{}");
    let c = e.clone();
    assert!(Json::ptr_eq(e.data(), c.data()));
    assert!(Arc::ptr_eq(
        Event::turn_start(1).event_type_arc(),
        Event::turn_start(2).event_type_arc()
    ));
    fn shared<T: Clone + Send + Sync + 'static>() {}
    shared::<Event>();
}

#[tokio::test]
async fn data_nested_past_the_limit_is_refused_and_still_readable() {
    let deep = Json::parse(&format!(
        "{}{}",
        "[".repeat(MAX_DEPTH),
        "]".repeat(MAX_DEPTH)
    ))
    .expect("at the limit");
    let e = Event::tool_result(1, 1, "c", 0, &([])[..], false, None, Some(&deep));
    let session = Session::in_memory("s");
    let err = session.append(e.clone()).await.expect_err("too deep");
    assert!(matches!(err, SessionError::InvalidEvent(m) if m.contains("deeper")));
    assert_eq!(e.data().depth(), MAX_DEPTH + 1);
    assert!(e.data().depth() > MAX_DATA_DEPTH);
    assert_eq!(e.data().value()["meta"].as_array().map(Vec::len), Some(1));
}

fn json_value() -> impl Strategy<Value = Value> {
    super::support::json_value(32, 4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn log_04_any_tool_call_text_matches_the_tree(
        turn in any::<u32>(), step in any::<u32>(),
        id in any::<String>(), name in any::<String>(), args in any::<String>(),
    ) {
        let e = Event::tool_call(turn, step, id.as_str(), name.as_str(), args.as_str());
        let expected = obj(vec![
            ("turn", json!(turn)),
            ("step", json!(step)),
            ("callId", json!(id)),
            ("name", json!(name)),
            ("arguments", json!(args)),
        ]);
        assert_same(&e, &expected);
        let view = e.as_tool_call().expect("view");
        prop_assert_eq!((view.call_id, view.name, view.arguments), (&*id, &*name, &*args));
    }

    #[test]
    fn log_17_any_meta_and_content_round_trip_exactly(
        id in any::<String>(), meta in json_value(), other in json_value(),
        text in any::<String>(), is_error in any::<bool>(),
    ) {
        let meta = Json::new(meta).expect("shallow");
        let content = [ContentBlock::text(text), ContentBlock::Other(Json::new(other).expect("shallow"))];
        let e = Event::tool_result(3, 4, id.as_str(), 1, &content[..], is_error, None, Some(&meta));
        let expected = result_expected(&e, &id, &content, is_error, None, Some(&meta));
        assert_same(&e, &expected);
    }
}

/// `tool/call` and `tool/result` keep their fields and write their text on first use: the text
/// is the same whenever and through whichever clone it is first written, and the message id was
/// drawn when the result was built (a result written late does not get a new id).
#[test]
fn l2_results_written_late_keep_the_id_they_were_built_with() {
    let content: dsh_core::Content = Arc::from([ContentBlock::text("done")]);
    let a = Event::tool_result(1, 2, Arc::from("c1"), 7, content.clone(), false, None, None);
    let b = Event::tool_result(1, 2, Arc::from("c1"), 7, content, false, None, None);
    let clone = a.clone();
    let first = clone.to_json_line();
    assert_eq!(a.to_json_line(), first);
    let id_a = a.data().value()["message"]["id"].clone();
    assert!(first.contains(id_a.as_str().expect("id")), "{first}");
    // Two results built apart have two ids, however late their text is written.
    assert_ne!(b.data().value()["message"]["id"], id_a);
    let expected = result_expected(&a, "c1", &[ContentBlock::text("done")], false, None, None);
    let mut expected = expected;
    expected["turn"] = json!(1);
    expected["step"] = json!(2);
    assert_same(&a, &expected);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A result built over shared fields writes exactly the tree and line of its values.
    #[test]
    fn l2_log_16_results_kept_as_fields_match_the_tree(
        id in any::<String>(), text in any::<String>(), is_error in any::<bool>(),
    ) {
        let content = [ContentBlock::text(text)];
        let info = ErrorInfo { name: Arc::from("AbortError"), code: Arc::from("ABORTED") };
        let error = is_error.then_some(&info);
        let e = Event::tool_result(3, 4, Arc::from(&*id), 9, Arc::from(content.clone()), is_error, error, None);
        let expected = result_expected(&e, &id, &content, is_error, error, None);
        assert_same(&e, &expected);
        prop_assert_eq!(e.source_event_seqs(), Some(&[9u64][..]));
    }
}

/// The history derived from a live result kept as fields is the one derived from its line read
/// back from a log (spec I3).
#[test]
fn i3_a_result_kept_as_fields_derives_the_message_its_line_holds() {
    let content: dsh_core::Content = Arc::from([
        ContentBlock::text("line \"one\"\nline two"),
        ContentBlock::Other(Json::from_shallow(json!({"type": "x", "deep": [[1]]}))),
    ]);
    let info = ErrorInfo {
        name: Arc::from("Error"),
        code: Arc::from("E"),
    };
    let e = Event::tool_result(1, 2, Arc::from("c1"), 0, content, true, Some(&info), None);
    let live = dsh_session::derive_messages_from([(1, &e)]);
    let read = Event::from_json_line(&e.to_json_line()).expect("reads back");
    let from_line = dsh_session::derive_messages_from([(1, &read)]);
    assert_eq!(live.len(), 1);
    assert_eq!(
        live.iter().map(|m| m.value().clone()).collect::<Vec<_>>(),
        from_line
            .iter()
            .map(|m| m.value().clone())
            .collect::<Vec<_>>()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `tool/code-dispatch*` records keep their fields and write exactly the tree, key order
    /// and line of their values, at the depth a session checks.
    #[test]
    fn dispatch_records_kept_as_fields_match_the_tree(
        ids in (any::<String>(), any::<String>(), any::<String>(), any::<String>()),
        args in json_value(), other in json_value(), text in any::<String>(),
        is_error in any::<bool>(),
    ) {
        let (root, parent, sub, name) = ids;
        let args = Json::new(args).expect("shallow");
        let head = |more: Vec<(&str, Value)>| {
            let mut entries = vec![
                ("rootCallId", json!(root)),
                ("parentCallId", json!(parent)),
                ("subCallId", json!(sub)),
                ("name", json!(name)),
                ("arguments", args.value().clone()),
            ];
            entries.extend(more);
            obj(entries)
        };
        let start = Event::code_dispatch_start(
            Arc::from(&*root), Arc::from(&*parent), Arc::from(&*sub), Arc::from(&*name), args.clone(),
        );
        let expected = head(vec![]);
        assert_same(&start, &expected);
        prop_assert_eq!(start.data().depth(), Json::new(expected).expect("shallow").depth());
        let content = [ContentBlock::text(text), ContentBlock::Other(Json::new(other).expect("shallow"))];
        for blocks in [&content[..], &content[..1], &[]] {
            let settle = Event::code_dispatch(
                root.as_str(), parent.as_str(), sub.as_str(), name.as_str(),
                args.clone(), is_error, blocks,
            );
            let expected = head(vec![("isError", json!(is_error)), ("content", content_value(blocks))]);
            assert_same(&settle, &expected);
            prop_assert_eq!(settle.data().depth(), Json::new(expected).expect("shallow").depth());
        }
    }
}

/// A shared `tool/code-dispatch-start` nested past the limit is refused on append like the
/// copying one: its depth is known from its shape, without writing its text.
#[tokio::test]
async fn a_shared_dispatch_record_past_the_limit_is_refused() {
    let deep = Json::parse(&format!(
        "{}{}",
        "[".repeat(MAX_DEPTH),
        "]".repeat(MAX_DEPTH)
    ))
    .expect("at the limit");
    let ids = || {
        (
            Arc::from("r"),
            Arc::from("p"),
            Arc::from("p:code:1"),
            Arc::from("t"),
        )
    };
    let (r, p, sub, t) = ids();
    let e = Event::code_dispatch_start(r, p, sub, t, deep.clone());
    let session = Session::in_memory("s");
    let err = session.append(e.clone()).await.expect_err("too deep");
    assert!(matches!(err, SessionError::InvalidEvent(m) if m.contains("deeper")));
    let copying = Event::code_dispatch_start("r", "p", "p:code:1", "t", deep.clone());
    assert!(session.append(copying).await.is_err());
    assert_eq!(e.data().depth(), MAX_DEPTH + 1);
}
