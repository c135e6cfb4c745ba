//! Every call the model made is answered in the history sent back to it, whatever the crash
//! instant, and the exports are histories the providers' APIs accept (issue: no orphan, ever).

use std::collections::HashMap;

use dsh_core::ContextMessage;
use dsh_session::provider_ids::{anthropic_original, openai_original};
use dsh_session::{
    Event, Header, NOT_STARTED_TEXT, check_bytes, derive_messages_from, read_log, repair_bytes,
    to_anthropic, to_openai,
};
use dsh_test_support::api_history::{anthropic_accepts, openai_accepts};
use serde_json::json;

use super::support::{completed, j, text};

const WIDE: usize = 30;
/// How many calls run at once in the generated step (the scheduler's rolling window).
const WINDOW: usize = 8;

fn id(i: usize) -> String {
    match i {
        // Ids a provider refuses as they are: mapped in its export.
        3 => "call.3/x".to_owned(),
        4 => format!("call_{}", "z".repeat(48)),
        _ => format!("c{i}"),
    }
}

fn log_bytes(events: &[Event]) -> Vec<u8> {
    let mut out = Header::new("wide", "/w")
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

/// A turn whose one step makes 30 calls, run as the scheduler runs them: a rolling window of
/// started calls (`tool/call` when each starts), results committed in order, then a closing step.
fn wide_log() -> Vec<u8> {
    let mut events = Vec::new();
    let mut seq = 0u64;
    let mut push = |events: &mut Vec<Event>, e: Event| -> u64 {
        let at = seq;
        seq += e.seq_span();
        events.push(e);
        at
    };
    push(&mut events, Event::turn_start(1));
    push(&mut events, Event::step_start(1, 1));
    push(
        &mut events,
        Event::user_message(&ContextMessage::plugin_text("user", "look at everything")),
    );
    let mut blocks = vec![json!({"type": "reasoning", "text": "thirty reads",
        "providerMetadata": {"anthropic": {"signature": "sig-1"}}})];
    blocks.extend((0..WIDE).map(|i| {
        json!({"type": "tool-call", "id": id(i), "name": "read", "arguments": format!("{{\"n\":{i}}}")})
    }));
    push(
        &mut events,
        Event::assistant_message(1, 1, j(json!({"role": "assistant", "content": blocks}))),
    );
    let mut call_seqs = HashMap::new();
    let mut started = 0;
    for done in 0..WIDE {
        while started < WIDE && started < done + WINDOW {
            let s = push(
                &mut events,
                Event::tool_call(
                    1,
                    1,
                    id(started).as_str(),
                    "read",
                    format!("{{\"n\":{started}}}").as_str(),
                ),
            );
            call_seqs.insert(started, s);
            started += 1;
        }
        push(
            &mut events,
            Event::tool_result(
                1,
                1,
                id(done).as_str(),
                call_seqs[&done],
                text("ok"),
                false,
                None,
                None,
            ),
        );
    }
    push(&mut events, Event::step_end(1, 1));
    push(&mut events, Event::step_start(1, 2));
    push(
        &mut events,
        Event::assistant_message(
            1,
            2,
            j(json!({"role": "assistant", "content": [{"type": "text", "text": "done"}]})),
        ),
    );
    push(&mut events, Event::step_end(1, 2));
    push(&mut events, Event::turn_end(1, completed()));
    let bytes = log_bytes(&events);
    assert_eq!(check_bytes(&bytes), vec![], "the generated log is valid");
    bytes
}

/// Every tool-call block of the history has exactly one tool-result block.
fn answered_once(messages: &[dsh_core::Json]) -> Result<(), String> {
    let mut calls: HashMap<String, usize> = HashMap::new();
    for m in messages.iter().map(|m| m.value()) {
        for b in m["content"].as_array().into_iter().flatten() {
            match b["type"].as_str() {
                Some("tool-call") => {
                    calls
                        .entry(b["id"].as_str().unwrap_or("").to_owned())
                        .or_insert(0);
                }
                Some("tool-result") => {
                    let id = b["toolCallId"].as_str().unwrap_or("");
                    *calls
                        .get_mut(id)
                        .ok_or(format!("result for unknown call {id}"))? += 1;
                }
                _ => {}
            }
        }
    }
    match calls.iter().find(|(_, n)| **n != 1) {
        Some((id, n)) => Err(format!("call {id} has {n} results")),
        None => Ok(()),
    }
}

fn history(bytes: &[u8]) -> Vec<dsh_core::Json> {
    let log = read_log(bytes).expect("reads");
    derive_messages_from(log.events.iter().map(|(s, e)| (*s, e)))
}

#[test]
fn i4_l5_a_wide_step_cut_at_every_byte_answers_every_call_in_histories_both_apis_accept() {
    let bytes = wide_log();
    let mut never_started_seen = 0;
    // The last line end and what its repair closed: a cut inside the next line must repair the
    // same way (the synthetic results' message ids aside).
    let mut line_start = 0;
    let mut closed_there = Vec::new();
    for k in 0..=bytes.len() {
        let (repaired, report) =
            repair_bytes(&bytes[..k]).unwrap_or_else(|e| panic!("offset {k}: {e}"));
        if report.interrupted_calls.iter().any(|c| !c.may_have_started) {
            never_started_seen += 1;
        }
        let line_end = k == 0 || bytes[k - 1] == b'\n';
        if report.torn_tail.is_some() {
            // A torn line is cut: the result is the repair of the cut at the line's start.
            assert!(repaired.starts_with(&bytes[..line_start]), "offset {k}");
            assert!(report.interrupted_calls == closed_there, "offset {k}");
            continue;
        }
        let problems = check_bytes(&repaired);
        assert!(problems.is_empty(), "offset {k}: {problems:?}");
        let messages = history(&repaired);
        answered_once(&messages).unwrap_or_else(|e| panic!("offset {k}: {e}"));
        openai_accepts(to_openai(&messages).value())
            .unwrap_or_else(|e| panic!("offset {k}: OpenAI would refuse: {e}"));
        anthropic_accepts(to_anthropic(&messages).value())
            .unwrap_or_else(|e| panic!("offset {k}: Anthropic would refuse: {e}"));
        if line_end {
            line_start = k;
            closed_there = report.interrupted_calls;
        }
    }
    assert!(
        never_started_seen > 0,
        "some cuts fall after the message and before its calls were recorded"
    );
}

#[test]
fn i4_calls_never_recorded_get_a_call_and_a_result_saying_they_never_ran() {
    let bytes = wide_log();
    // Cut right after the assistant message: none of the 30 calls was recorded.
    let text_log = String::from_utf8(bytes.clone()).expect("utf8");
    let end = text_log.find("\"type\":\"tool/call\"").expect("a call") - 1;
    let (repaired, report) = repair_bytes(&bytes[..end]).expect("repairs");
    assert_eq!(report.interrupted_calls.len(), WIDE);
    assert!(report.interrupted_calls.iter().all(|c| !c.may_have_started));
    let log = read_log(&repaired).expect("reads");
    let calls: Vec<_> = log
        .events
        .iter()
        .filter_map(|(_, e)| {
            e.as_tool_call()
                .map(|c| (c.call_id.to_owned(), c.arguments.to_owned()))
        })
        .collect();
    assert_eq!(calls.len(), WIDE);
    assert_eq!(
        calls[7],
        ("c7".to_owned(), "{\"n\":7}".to_owned()),
        "copied from the message"
    );
    let texts: Vec<String> = history(&repaired)
        .iter()
        .flat_map(|m| m.value()["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool-result")
        .map(|b| b["content"][0]["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(texts.len(), WIDE);
    assert!(texts.iter().all(|t| t == NOT_STARTED_TEXT), "{texts:?}");
}

#[test]
fn i1_the_checker_reports_a_call_the_model_made_without_a_result() {
    let bytes = wide_log();
    let text_log = String::from_utf8(bytes.clone()).expect("utf8");
    let end = text_log.find("\"type\":\"tool/call\"").expect("a call") - 1;
    let problems = check_bytes(&bytes[..end]);
    assert_eq!(problems.len(), WIDE, "{problems:?}");
    assert!(problems.iter().all(|p| p.in_flight
        && p.line == 5
        && p.message.contains("has no tool/call and no tool/result")));

    // A closed step missing a call is a settled problem, not an in-flight one.
    let mut lines: Vec<&str> = text_log.lines().collect();
    let victim = lines
        .iter()
        .position(|l| l.contains("\"tool/call\"") && l.contains("\"c9\""))
        .expect("c9");
    lines.remove(victim);
    let result = lines
        .iter()
        .position(|l| l.contains("\"tool/result\"") && l.contains("\"c9\""))
        .expect("c9 result");
    lines.remove(result);
    let broken = lines.join("\n") + "\n";
    let problems = check_bytes(broken.as_bytes());
    assert!(
        problems.iter().any(|p| !p.in_flight
            && p.message.contains("\"c9\"")
            && p.message.contains("its step ended")),
        "{problems:?}"
    );
}

#[test]
fn l4_a_reused_call_id_is_reported_with_both_lines() {
    let msg = |id: &str| {
        j(
            json!({"role": "assistant", "content": [{"type": "tool-call", "id": id, "name": "read", "arguments": "{}"}]}),
        )
    };
    let events = vec![
        Event::turn_start(1),
        Event::step_start(1, 1),
        Event::assistant_message(1, 1, msg("same")),
        Event::tool_call(1, 1, "same", "read", "{}"),
        Event::tool_result(1, 1, "same", 3, text("a"), false, None, None),
        Event::step_end(1, 1),
        Event::step_start(1, 2),
        Event::assistant_message(1, 2, msg("same")),
        Event::tool_call(1, 2, "same", "read", "{}"),
        Event::tool_result(1, 2, "same", 8, text("b"), false, None, None),
        Event::step_end(1, 2),
        Event::turn_end(1, completed()),
    ];
    let problems = check_bytes(&log_bytes(&events));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].line, 9);
    assert!(
        problems[0]
            .message
            .contains("already used by the assistant message on line 4")
    );
}

#[test]
fn l5_ids_outside_a_providers_rules_are_mapped_in_its_export_and_map_back() {
    let messages = history(&wide_log());
    let openai = to_openai(&messages);
    let anthropic = to_anthropic(&messages);
    openai_accepts(openai.value()).expect("OpenAI accepts");
    anthropic_accepts(anthropic.value()).expect("Anthropic accepts");
    let logged: Vec<String> = (0..WIDE).map(id).collect();
    let sent_openai: Vec<&str> = openai
        .value()
        .as_array()
        .expect("array")
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .map(|c| c["id"].as_str().unwrap_or("").to_owned())
        .map(|s| openai_original(&s, logged.iter().map(String::as_str)).expect("maps back"))
        .collect();
    assert_eq!(
        sent_openai,
        logged.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let sent_anthropic: Vec<String> = anthropic
        .value()
        .as_array()
        .expect("array")
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_use")
        .map(|b| anthropic_original(b["id"].as_str().unwrap_or("")).expect("decodes"))
        .collect();
    assert_eq!(sent_anthropic, logged);
}

#[test]
fn l5_thinking_is_kept_with_its_signature_and_sent_back_to_anthropic_first() {
    let messages = history(&wide_log());
    let anthropic = to_anthropic(&messages);
    let assistant = anthropic
        .value()
        .as_array()
        .expect("array")
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("assistant")
        .clone();
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "thirty reads", "signature": "sig-1"})
    );
    // Redacted thinking goes back as it came; reasoning with no signature is left out.
    let m = j(json!({"role": "assistant", "content": [
        {"type": "reasoning", "text": "", "providerMetadata": {"anthropic": {"redactedData": "opaque"}}},
        {"type": "reasoning", "text": "unsigned"},
        {"type": "text", "text": "hi"}]}));
    let out = to_anthropic(std::slice::from_ref(&m));
    assert_eq!(
        out.value()[0]["content"],
        json!([{"type": "redacted_thinking", "data": "opaque"}, {"type": "text", "text": "hi"}])
    );
    let openai = to_openai(&[m]);
    assert_eq!(
        openai.value()[0],
        json!({"role": "assistant", "content": "hi"})
    );
}
