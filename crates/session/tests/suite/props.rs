//! Property tests: round trips (any event sequence written then read is identical), validity is
//! kept by appends, pairing and history invariants, and crash repair on generated logs.

use std::collections::HashSet;

use dsh_core::{ContextMessage, Json};
use dsh_session::{
    Event, Header, OpenOptions, Session, SurfaceOp, check_bytes, derive_messages,
    derive_messages_from, read_log, repair_bytes, to_anthropic, to_openai,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::support::{completed, j, tempdir, text};

fn json_value() -> impl Strategy<Value = Value> {
    super::support::json_value(48, 6)
}

fn ident() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_:.-]{1,12}"
}

/// Any event the API can build, including unknown types and chunk runs.
fn any_event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (
            any::<u32>(),
            any::<u32>(),
            ident(),
            ident(),
            any::<String>()
        )
            .prop_map(|(t, s, id, n, args)| Event::tool_call(
                t,
                s,
                id.as_str(),
                n.as_str(),
                args.as_str()
            )),
        (
            any::<u32>(),
            any::<u32>(),
            ident(),
            any::<u64>(),
            any::<String>(),
            any::<bool>(),
            proptest::option::of(json_value())
        )
            .prop_map(|(t, s, id, seq, body, err, meta)| {
                let meta = meta.map(j);
                Event::tool_result(
                    t,
                    s,
                    id.as_str(),
                    seq,
                    text(&body),
                    err,
                    None,
                    meta.as_ref(),
                )
            }),
        (ident(), any::<String>())
            .prop_map(|(p, t)| Event::user_message(&ContextMessage::plugin_text(&p, t))),
        any::<u32>().prop_map(Event::turn_start),
        (any::<u32>(), json_value()).prop_map(|(t, r)| Event::turn_end(t, j(r))),
        (any::<u32>(), any::<u32>()).prop_map(|(t, s)| Event::step_start(t, s)),
        (any::<u32>(), any::<u32>()).prop_map(|(t, s)| Event::step_end(t, s)),
        (ident(), ident(), json_value()).prop_map(|(r, n, a)| Event::code_dispatch_start(
            r.as_str(),
            r.as_str(),
            format!("{r}:code:1").as_str(),
            n.as_str(),
            j(a).clone()
        )),
        (
            "[a-z]{1,8}/[a-z-]{1,10}",
            json_value(),
            proptest::option::of(prop::collection::vec(any::<u64>(), 0..4)),
            any::<bool>()
        )
            .prop_map(|(ty, data, seqs, append)| {
                let mut e = Event::other(&ty, j(data));
                if let Some(seqs) = seqs {
                    e = e.with_source_event_seqs(seqs);
                }
                if append {
                    e = e.with_surface_op(SurfaceOp::Append);
                }
                e
            }),
        prop::collection::vec(any::<String>(), 1..6).prop_map(|texts| {
            let dt: Vec<u64> = vec![1; texts.len() - 1];
            Event::other(
                "reasoning-chunks",
                j(json!({"turn": 1, "step": 1, "index": 0, "dt": dt, "texts": texts})),
            )
        }),
    ]
}

fn to_bytes(events: &[Event]) -> Vec<u8> {
    let mut out = Header::new("p", "/").json().to_json_string().into_bytes();
    out.push(b'\n');
    for e in events {
        out.extend_from_slice(e.to_json_line().as_bytes());
        out.push(b'\n');
    }
    out
}

/// A plan for one step: call ids, the order results come in, chunk texts, contexts after.
#[derive(Clone, Debug)]
struct StepPlan {
    calls: usize,
    order: Vec<usize>,
    chunks: Vec<String>,
    contexts: usize,
    dispatch: bool,
}

fn step_plan() -> impl Strategy<Value = StepPlan> {
    (
        // Narrow steps, and wide ones as a model makes them (30 parallel calls).
        prop_oneof![3 => 0usize..5, 1 => 25usize..31],
        prop::collection::vec("[a-z ]{1,6}", 0..4),
        0usize..3,
        any::<bool>(),
    )
        .prop_flat_map(|(calls, chunks, contexts, dispatch)| {
            (
                Just((0..calls).collect::<Vec<_>>()).prop_shuffle(),
                Just(chunks),
                Just(contexts),
                Just(dispatch),
            )
                .prop_map(move |(order, chunks, contexts, dispatch)| StepPlan {
                    calls,
                    order,
                    chunks,
                    contexts,
                    dispatch,
                })
        })
}

/// Builds a valid log (turns of steps with paired calls) starting at `seq`, turn numbers from
/// `first_turn`.
fn valid_events(turns: &[Vec<StepPlan>], first_turn: u32, mut seq: u64) -> Vec<Event> {
    let mut out = Vec::new();
    let mut push = |out: &mut Vec<Event>, e: Event| -> u64 {
        let at = seq;
        seq += e.seq_span();
        out.push(e);
        at
    };
    for (ti, steps) in turns.iter().enumerate() {
        let turn = first_turn + ti as u32;
        push(&mut out, Event::turn_start(turn));
        for (si, plan) in steps.iter().enumerate() {
            let step = si as u32 + 1;
            push(&mut out, Event::step_start(turn, step));
            push(
                &mut out,
                Event::user_message(&ContextMessage::plugin_text(
                    "user",
                    format!("prompt {turn}.{step}"),
                )),
            );
            let mut chunk_seqs = Vec::new();
            if !plan.chunks.is_empty() {
                let dt: Vec<u64> = vec![0; plan.chunks.len() - 1];
                let first = push(
                    &mut out,
                    Event::other(
                        "text-chunks",
                        j(
                            json!({"turn": turn, "step": step, "index": 0, "dt": dt, "texts": plan.chunks}),
                        ),
                    ),
                );
                chunk_seqs.extend(first..first + plan.chunks.len() as u64);
            }
            let ids: Vec<String> = (0..plan.calls)
                .map(|i| format!("t{turn}s{step}c{i}"))
                .collect();
            let mut blocks: Vec<Value> =
                vec![json!({"type": "text", "text": plan.chunks.concat()})];
            blocks.extend(ids.iter().map(
                |id| json!({"type": "tool-call", "id": id, "name": "echo", "arguments": "{}"}),
            ));
            push(
                &mut out,
                Event::assistant_message(
                    turn,
                    step,
                    j(json!({"role": "assistant", "content": blocks})),
                )
                .with_source_event_seqs(chunk_seqs),
            );
            let call_seqs: Vec<u64> = ids
                .iter()
                .map(|id| {
                    push(
                        &mut out,
                        Event::tool_call(turn, step, id.as_str(), "echo", "{}"),
                    )
                })
                .collect();
            if plan.dispatch && !ids.is_empty() {
                let root = &ids[0];
                push(
                    &mut out,
                    Event::code_dispatch_start(
                        root.as_str(),
                        root.as_str(),
                        format!("{root}:code:1").as_str(),
                        "echo",
                        j(json!({})).clone(),
                    ),
                );
                push(
                    &mut out,
                    Event::code_dispatch(
                        root.as_str(),
                        root.as_str(),
                        format!("{root}:code:1").as_str(),
                        "echo",
                        j(json!({})).clone(),
                        false,
                        text("x"),
                    ),
                );
            }
            for &i in &plan.order {
                push(
                    &mut out,
                    Event::tool_result(
                        turn,
                        step,
                        ids[i].as_str(),
                        call_seqs[i],
                        text(&format!("r{i}")),
                        i % 2 == 1,
                        None,
                        None,
                    ),
                );
            }
            for c in 0..plan.contexts {
                push(
                    &mut out,
                    Event::user_message(&ContextMessage::plugin_text(
                        "ctx",
                        format!("context {c}"),
                    )),
                );
            }
            push(&mut out, Event::step_end(turn, step));
        }
        push(&mut out, Event::turn_end(turn, completed()));
    }
    out
}

fn turns() -> impl Strategy<Value = Vec<Vec<StepPlan>>> {
    prop::collection::vec(prop::collection::vec(step_plan(), 1..4), 1..3)
}

fn next_seq(events: &[Event]) -> u64 {
    events.iter().map(Event::seq_span).sum()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn any_event_sequence_written_then_read_is_identical(events in prop::collection::vec(any_event(), 0..24)) {
        let bytes = to_bytes(&events);
        let log = read_log(&bytes).expect("reads");
        prop_assert_eq!(log.events.len(), events.len());
        let mut seq = 0;
        for ((got_seq, got), want) in log.events.iter().zip(&events) {
            prop_assert_eq!(*got_seq, seq);
            prop_assert_eq!(got, want);
            seq += want.seq_span();
        }
    }

    #[test]
    fn generated_valid_logs_check_clean_and_pair_every_call_in_the_history(plan in turns()) {
        let events = valid_events(&plan, 1, 0);
        let bytes = to_bytes(&events);
        prop_assert_eq!(check_bytes(&bytes), vec![]);
        let (repaired, report) = repair_bytes(&bytes).expect("repairs");
        prop_assert!(report.is_clean());
        prop_assert_eq!(repaired, bytes.clone());

        let log = read_log(&bytes).expect("reads");
        let messages = derive_messages_from(log.events.iter().map(|(s, e)| (*s, e)));
        let calls = events.iter().filter(|e| e.event_type() == "tool/call").count();
        let mut offered = HashSet::new();
        let mut answered = 0;
        for m in messages.iter().map(Json::value) {
            for b in m["content"].as_array().into_iter().flatten() {
                match b["type"].as_str() {
                    Some("tool-call") => { offered.insert(b["id"].as_str().unwrap_or("").to_owned()); }
                    Some("tool-result") => {
                        prop_assert!(offered.contains(b["toolCallId"].as_str().unwrap_or("")));
                        answered += 1;
                    }
                    _ => {}
                }
            }
        }
        prop_assert_eq!(answered, calls);
        let tool_messages = to_openai(&messages).value().as_array().map(|a| a.iter().filter(|m| m["role"] == "tool").count());
        prop_assert_eq!(tool_messages, Some(calls));
        let tool_results = to_anthropic(&messages).value().as_array().map(|a| {
            a.iter().flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .filter(|b| b["type"] == "tool_result").count()
        });
        prop_assert_eq!(tool_results, Some(calls));
    }

    #[test]
    fn removing_or_duplicating_a_result_is_always_caught_on_its_line(plan in turns(), pick in any::<prop::sample::Index>(), dup in any::<bool>()) {
        let events = valid_events(&plan, 1, 0);
        let results: Vec<usize> = events.iter().enumerate().filter(|(_, e)| e.event_type() == "tool/result").map(|(i, _)| i).collect();
        prop_assume!(!results.is_empty());
        let victim = results[pick.index(results.len())];
        let mut changed = events.clone();
        let call_seq = events[victim].as_tool_result().and_then(|r| r.call_seq).expect("seq");
        let call_line = {
            let mut seq = 0;
            let mut line = 0;
            for (i, e) in events.iter().enumerate() {
                if seq == call_seq { line = i + 2; }
                seq += e.seq_span();
            }
            line
        };
        let problems = if dup {
            changed.insert(victim + 1, events[victim].clone());
            let problems = check_bytes(&to_bytes(&changed));
            prop_assert!(problems.iter().any(|p| p.line == victim + 3 && p.message.contains("duplicate tool/result")), "{:?}", problems);
            problems
        } else {
            changed.remove(victim);
            let problems = check_bytes(&to_bytes(&changed));
            prop_assert!(problems.iter().any(|p| p.line == call_line && p.message.contains("has no tool/result")), "{:?}", problems);
            problems
        };
        prop_assert!(!problems.is_empty());
    }

    #[test]
    fn a_generated_log_cut_anywhere_repairs_clean_and_keeps_its_complete_lines(plan in turns(), cut in any::<prop::sample::Index>()) {
        let bytes = to_bytes(&valid_events(&plan, 1, 0));
        let k = cut.index(bytes.len() + 1);
        let (repaired, _) = repair_bytes(&bytes[..k]).expect("repairs");
        let complete = bytes[..k].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        prop_assert!(repaired.starts_with(&bytes[..complete]));
        prop_assert_eq!(check_bytes(&repaired), vec![]);
        // Every call the model made is answered in the history, which both APIs would accept.
        let log = read_log(&repaired).expect("reads");
        let messages = derive_messages_from(log.events.iter().map(|(s, e)| (*s, e)));
        let mut offered = HashSet::new();
        let mut answered = HashSet::new();
        for m in messages.iter().map(Json::value) {
            for b in m["content"].as_array().into_iter().flatten() {
                match b["type"].as_str() {
                    Some("tool-call") => { offered.insert(b["id"].as_str().unwrap_or("").to_owned()); }
                    Some("tool-result") => { prop_assert!(answered.insert(b["toolCallId"].as_str().unwrap_or("").to_owned())); }
                    _ => {}
                }
            }
        }
        prop_assert_eq!(offered, answered);
        let openai = dsh_test_support::api_history::openai_accepts(to_openai(&messages).value());
        prop_assert!(openai.is_ok(), "{:?}", openai);
        let anthropic = dsh_test_support::api_history::anthropic_accepts(to_anthropic(&messages).value());
        prop_assert!(anthropic.is_ok(), "{:?}", anthropic);
    }
}

proptest! {
    // File-backed cases sync to disk: fewer of them.
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn a_valid_log_stays_valid_after_appends_and_the_history_is_rebuilt_from_the_file(first in turns(), more in turns()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let dir = tempdir();
            let path = dir.path().join("prop.jsonl");
            let existing = valid_events(&first, 1, 0);
            std::fs::write(&path, to_bytes(&existing)).expect("write");
            let (session, report) = Session::open_jsonl(&path, OpenOptions::new().invariants(true)).await.expect("opens");
            assert!(report.is_clean());
            let start = next_seq(&existing);
            assert_eq!(session.next_seq(), start);
            let added = valid_events(&more, first.len() as u32 + 1, start);
            let futures: Vec<_> = added.iter().cloned().map(|e| session.append(e)).collect();
            for f in futures {
                f.await.expect("append");
            }
            let live = derive_messages(&session.events());
            session.close().await.expect("closes");
            let bytes = std::fs::read(&path).expect("read");
            assert_eq!(check_bytes(&bytes), vec![]);
            let log = read_log(&bytes).expect("reads");
            assert_eq!(log.events.len(), existing.len() + added.len());
            let rebuilt = derive_messages_from(log.events.iter().map(|(s, e)| (*s, e)));
            assert_eq!(rebuilt, live, "model-visible history is reconstructible from the file");
        });
    }
}
