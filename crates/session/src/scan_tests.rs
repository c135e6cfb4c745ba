//! Tests of the canonical scan (a child module of `scan.rs`, kept apart for its length): which
//! lines it accepts, the property tests holding a lazily read event equal to the eagerly parsed
//! one and the skimmed call ids equal to the tree views, and deep lines.

use proptest::prelude::*;
use serde_json::Value;

use dsh_core::{ContentBlock, Json};

use super::*;
use crate::deep;
use crate::event::{Event, SurfaceOp};

fn accepts(line: &str) -> bool {
    scan_line(line, &mut Scratch::default()).is_some()
}

#[test]
fn canonical_lines_are_accepted_with_their_facts() {
    let line = r#"{"type":"tool/call","data":{"turn":1,"step":2,"callId":"c1","name":"read","arguments":"{\"a\":1}"},"sourceEventSeqs":[0,7],"surfaceOp":"append"}"#;
    let mut scratch = Scratch::default();
    let Some(s) = scan_line(line, &mut scratch) else {
        panic!("accepted");
    };
    assert_eq!(s.event_type, "tool/call");
    assert_eq!(s.data_depth, 1);
    assert_eq!((s.facts.turn, s.facts.step), (Some(1), Some(2)));
    let at = |f: crate::payload::PackedStr| match f.get() {
        StrFact::At(a, b) => &s.data[a as usize..b as usize],
        _ => "?",
    };
    assert_eq!((at(s.facts.call_id), at(s.facts.name)), ("c1", "read"));
    assert_eq!(s.facts.arguments.get(), StrFact::Parse);
    assert_eq!(s.source_event_seqs, Some(vec![0, 7]));
    assert_eq!(s.surface_op, Some("\"append\""));
    let message =
        r#"{"type":"assistant/message","data":{"turn":1,"message":{"content":[[]],"x":{}}}}"#;
    let Some(s) = scan_line(message, &mut scratch) else {
        panic!("accepted");
    };
    let m = s
        .facts
        .message
        .map(|m| (&s.data[m.start as usize..m.end as usize], m.depth));
    assert_eq!(m, Some((r#"{"content":[[]],"x":{}}"#, 3)));
    assert_eq!(s.data_depth, 4);
}

#[test]
fn anything_not_canonical_is_left_to_the_eager_reader() {
    for line in [
        r#"{"type":"x","data":{} }"#,
        r#"{"type":"x", "data":{}}"#,
        r#"{"type":"x","data":{"a":1,"a":2}}"#,
        r#"{"type":"x","data":{"a":"\/"}}"#,
        r#"{"type":"x","data":{"a":"\u0041"}}"#,
        r#"{"type":"x","data":{"a":"\u000a"}}"#,
        r#"{"type":"x","data":{"a":"\u001F"}}"#,
        r#"{"type":"x","data":[1.50]}"#,
        r#"{"type":"x","data":[1e5]}"#,
        r#"{"type":"x","data":[1e300]}"#,
        r#"{"type":"x","data":[-0]}"#,
        r#"{"type":"x","data":[01]}"#,
        r#"{"type":"x","data":[18446744073709551616]}"#,
        r#"{"type":"x","data":[1,]}"#,
        r#"{"type":"x","data":[,1]}"#,
        r#"{"type":"x","data":{,}}"#,
        r#"{"type":"x","data":{"a"}}"#,
        r#"{"type":"x","data":[tru]}"#,
        r#"{"type":"x","data":"unterminated}"#,
        r#"{"type":"x","data":{}}x"#,
        r#"{"type":"x","data":{},"sourceEventSeqs":[-1]}"#,
        r#"{"type":"x","data":{},"surfaceOp":"append","sourceEventSeqs":[1]}"#,
        r#"{"type":"x","data":{},"other":1}"#,
        r#"{"data":{},"type":"x"}"#,
        r#"{"type":"text-chunks","data":{"texts":["a"]}}"#,
        r#"{"type":"t\"x","data":{}}"#,
        "{\"type\":\"x\",\"data\":\"\t\"}",
    ] {
        assert!(!accepts(line), "{line}");
    }
    for line in [
        r#"{"type":"x","data":[1.5]}"#,
        r#"{"type":"x","data":[-2,0]}"#,
        r#"{"type":"x","data":[-0.0]}"#,
        r#"{"type":"x","data":[1e+300]}"#,
        r#"{"type":"x","data":[18446744073709551615]}"#,
        r#"{"type":"x","data":["\u001f\n"]}"#,
        r#"{"type":"x","data":[1.5,-2,0,-0.0,1e+300,18446744073709551615,"\u001f\n"]}"#,
        r#"{"type":"x","data":{"a":{"a":{"a":1}},"b":[{"a":1,"b":2}]}}"#,
        r#"{"type":"x","data":null,"sourceEventSeqs":[]}"#,
    ] {
        assert!(accepts(line), "{line}");
    }
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (0u64..1 << 32).prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        prop::collection::vec(
            prop::sample::select(vec!['a', '"', '\\', '\u{1}', '\u{1f}', '\n', '\u{7f}', 'é']),
            0..6
        )
        .prop_map(|c| Value::from(c.into_iter().collect::<String>())),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Keys the scan keeps facts of, and others.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "turn",
            "step",
            "callId",
            "name",
            "arguments",
            "message",
            "content",
            "role"
        ])
        .prop_map(str::to_owned),
        any::<String>(),
    ]
}

/// Data: any value, or an object holding some of the fact fields with any values.
fn data() -> impl Strategy<Value = Value> {
    prop_oneof![
        json_value(),
        prop::collection::vec((key(), json_value()), 0..7)
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
    ]
}

fn any_event() -> impl Strategy<Value = Event> {
    let ty = prop::sample::select(vec![
        types::TOOL_CALL,
        types::TOOL_RESULT,
        types::USER_MESSAGE,
        types::ASSISTANT_MESSAGE,
        types::TURN_START,
        types::STEP_END,
        "hook/x",
        "text-chunks",
    ]);
    let typed = (
        any::<u32>(),
        any::<u32>(),
        any::<String>(),
        any::<String>(),
        json_value(),
    )
        .prop_map(|(t, s, id, text, v)| {
            let content = [ContentBlock::text(text)];
            let meta = Json::new(v.clone()).ok();
            match t % 3 {
                0 => Event::tool_call(t, s, id.as_str(), id.as_str(), id.as_str()),
                1 => Event::tool_result(
                    t,
                    s,
                    id.as_str(),
                    3,
                    &content[..],
                    s % 2 == 0,
                    None,
                    meta.as_ref(),
                ),
                _ => Event::assistant_message(
                    t,
                    s,
                    Json::from_shallow(serde_json::json!({"role": "assistant", "content": v})),
                ),
            }
        });
    let other = (
        ty,
        data(),
        prop::option::of(prop::collection::vec(any::<u64>(), 0..3)),
        prop::option::of(json_value()),
    )
        .prop_map(|(ty, data, seqs, op)| {
            let mut e = Event::other(ty, Json::from_shallow(data));
            if let Some(seqs) = seqs {
                e = e.with_source_event_seqs(seqs);
            }
            if let Some(op) = op {
                e = e.with_surface_op(match op {
                    Value::Bool(true) => SurfaceOp::Append,
                    other => SurfaceOp::Other(Json::from_shallow(other)),
                });
            }
            e
        });
    prop_oneof![typed, other]
}

/// Text edits that keep the line JSON (or break it) but not canonical.
fn perturb(line: &str, how: u8, at: usize) -> String {
    let at = (0..=at.min(line.len()))
        .rev()
        .find(|&i| line.is_char_boundary(i))
        .unwrap_or(0);
    let (a, b) = line.split_at(at);
    match how % 5 {
        0 => format!("{a} {b}"),
        1 => format!("{a}x{b}"),
        2 => line.replacen(":1", ":1.0", 1),
        3 => line
            .replacen("\\n", "\\u000a", 1)
            .replacen("a", "\\u0061", 1),
        _ => b.to_owned(),
    }
}

/// What a reader can observe of an event without comparing trees.
fn views(e: &Event) -> String {
    let strings = ["callId", "name", "arguments"].map(|k| e.data_is_str(k));
    format!(
        "{strings:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
        e.kind(),
        e.as_tool_call(),
        e.as_tool_result(),
        e.data_u64("turn"),
        e.data_u64("step"),
        e.data_str("callId"),
        e.data_str("name"),
        e.data_str("arguments"),
        e.data_depth(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A lazily read event equals the eagerly parsed one: same type, data, seqs, surface
    /// operation, views and facts, same `data.message`, and the same line written back; a
    /// line this crate wrote is read lazily.
    #[test]
    fn a_lazily_read_event_equals_the_eagerly_parsed_one(
        e in any_event(), how in any::<u8>(), at in any::<usize>(),
    ) {
        let line = e.to_json_line();
        let mut scratch = Scratch::default();
        for (text, canonical) in [(line.clone(), true), (perturb(&line, how, at), false)] {
            let eager = deep::parse_with(&text, Event::from_value);
            let lazy = Event::read_line(&text, &mut scratch);
            let (eager, lazy) = match (eager, lazy) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(a), Err(b)) => { prop_assert_eq!(a, b); continue; }
                (a, b) => { prop_assert!(false, "{text}: {a:?} vs {b:?}"); unreachable!() }
            };
            let was_lazy = lazy.keeps_text();
            if canonical && !e.is_chunk_run() {
                prop_assert!(was_lazy, "{text} was read eagerly");
            }
            let message = lazy.message_from_text();
            prop_assert_eq!(views(&lazy), views(&eager));
            prop_assert_eq!(lazy.to_json_line(), eager.to_json_line());
            prop_assert_eq!(&lazy, &eager);
            prop_assert_eq!(lazy.data().depth(), eager.data().depth());
            if let Some(m) = message {
                prop_assert_eq!(Some(m.value()), eager.data().value().get("message"));
                prop_assert_eq!(m.depth(), eager.data().value().get("message").map_or(0, dsh_core::json::depth_of));
            }
        }
    }
}

/// A block of a message's `content`: objects shaped like the blocks the views read (any
/// member may be missing or of another type), or any other value.
fn block() -> impl Strategy<Value = Value> {
    let kind = prop_oneof![
        3 => prop::sample::select(vec!["tool-result", "tool-call", "text"]).prop_map(Value::from),
        1 => leaf(),
    ];
    let member = || prop::option::of(prop_oneof![3 => leaf(), 1 => json_value()]);
    let shaped = (
        prop::option::of(kind),
        member(),
        member(),
        member(),
        member(),
        member(),
    )
        .prop_map(|(kind, tool_call_id, id, name, arguments, is_error)| {
            let mut m = serde_json::Map::new();
            for (k, v) in [
                ("type", kind),
                ("toolCallId", tool_call_id),
                ("id", id),
                ("name", name),
                ("arguments", arguments),
                ("isError", is_error),
            ] {
                if let Some(v) = v {
                    m.insert(k.to_owned(), v);
                }
            }
            Value::Object(m)
        });
    prop_oneof![4 => shaped, 1 => json_value()]
}

/// A message as `tool/result` and `assistant/message` events hold it, with every member
/// the views read sometimes missing, of another type, or the message not an object.
fn message() -> impl Strategy<Value = Value> {
    let source = prop_oneof![
        prop::option::of(leaf()).prop_map(|id| match id {
            Some(id) => serde_json::json!({"kind": "tool", "callId": id}),
            None => serde_json::json!({"kind": "tool"}),
        }),
        leaf(),
    ];
    let content = prop_oneof![
        4 => prop::collection::vec(block(), 0..4).prop_map(Value::Array),
        1 => leaf(),
    ];
    let shaped =
        (prop::option::of(source), prop::option::of(content)).prop_map(|(source, content)| {
            let mut m = serde_json::Map::new();
            m.insert("role".into(), Value::from("user"));
            if let Some(source) = source {
                m.insert("source".into(), source);
            }
            if let Some(content) = content {
                m.insert("content".into(), content);
            }
            Value::Object(m)
        });
    prop_oneof![6 => shaped, 1 => json_value()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Reading a result's call and a message's calls from the text (`skim.rs`) gives what
    /// the tree-based views give for the same line.
    #[test]
    fn l4_l5_the_skimmed_call_ids_equal_the_tree_views(
        message in message(),
        flat in prop::option::of(json_value()),
        assistant in any::<bool>(),
    ) {
        let ty = if assistant { types::ASSISTANT_MESSAGE } else { types::TOOL_RESULT };
        let mut data = serde_json::Map::new();
        data.insert("turn".into(), Value::from(1));
        data.insert("step".into(), Value::from(2));
        data.insert("message".into(), message);
        if let Some(flat) = flat {
            data.insert("content".into(), flat);
        }
        let line = Event::other(ty, Json::from_shallow(Value::Object(data))).to_json_line();
        let mut scratch = Scratch::default();
        let lazy = Event::read_line(&line, &mut scratch).expect("a line it wrote");
        let eager = deep::parse_with(&line, Event::from_value).expect("a line it wrote");
        prop_assert!(lazy.keeps_text(), "{line} was read eagerly");
        let skimmed_calls = crate::visible::calls_of(1, &lazy);
        let skimmed_id = lazy.result_call_id().map(|id| id.into_owned());
        prop_assert_eq!(
            skimmed_id,
            eager.as_tool_result().map(|r| r.call_id.to_owned()),
            "{}", line
        );
        prop_assert_eq!(skimmed_calls, crate::visible::calls_of(1, &eager), "{}", line);
    }
}

#[test]
fn deep_lines_scan_without_recursion_and_past_the_limit_are_refused() {
    let handle = std::thread::Builder::new()
        .stack_size(128 * 1024)
        .spawn(|| {
            let nested = |n: usize| {
                format!(
                    "{{\"type\":\"x\",\"data\":{}{}}}",
                    "[".repeat(n),
                    "]".repeat(n)
                )
            };
            let mut scratch = Scratch::default();
            let at_limit = scan_line(&nested(MAX_DEPTH - 1), &mut scratch).map(|s| s.data_depth);
            let past = scan_line(&nested(MAX_DEPTH), &mut scratch).is_some();
            (at_limit, past)
        });
    let joined = handle.map(|h| h.join());
    assert!(
        matches!(joined, Ok(Ok((Some(d), false))) if d == MAX_DEPTH - 1),
        "{joined:?}"
    );
}
