//! Calls the model streams without an id (OpenAI-compatible servers that leave `id` out, or send
//! `""` or `null`): the loop gives each a fresh unique id, runs it once, answers it, and the
//! history sent back names it by that id (never an empty `tool_call_id`).

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use dsh_scheduler::TurnEnd;
use dsh_test_support::mock_provider::Reply;
use serde_json::{Value, json};

use super::support::*;

/// A reply calling `echo` once, its first delta's `id` member as given (`None`: left out).
fn echo_call_with_id(id: Option<Value>) -> Reply {
    let mut first = json!({"index": 0, "type": "function",
        "function": {"name": "echo", "arguments": ""}});
    if let Some(id) = id {
        first["id"] = id;
    }
    let mut frames = vec![oa::role()];
    frames.push(oa::data(&oa::chunk(json!({"tool_calls": [first]}), None)));
    for piece in ["{\"te", "xt\":", " \"hi\"}"] {
        frames.push(oa::data(&oa::chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            None,
        )));
    }
    frames.extend(oa::finish("tool_calls", 20, 5));
    Reply::Stream(frames)
}

/// Runs one turn whose model calls `echo` with `id`, then answers; checks the call ran once
/// under a fresh id, the log checks clean, and the next request answers the call by that id.
async fn a_call_without_an_id_runs_under_a_fresh_one(id: Option<Value>) {
    let rig = rig().await;
    rig.server.push_all([echo_call_with_id(id), say("done")]);
    let outcome = rig.agent.prompt("use echo").await.unwrap().unwrap();
    assert_eq!(outcome.end, TurnEnd::Completed);
    assert_eq!(outcome.text, "done");
    assert_eq!(rig.runs(), 1);

    let calls = rig.data("tool/call");
    assert_eq!(calls.len(), 1);
    let fresh = calls[0]["callId"].as_str().unwrap().to_owned();
    assert_eq!(fresh, "dsh-call-1");
    let assistant = &rig.data("assistant/message")[0];
    let block = &assistant["message"]["content"][0];
    assert_eq!(block["id"], fresh.as_str(), "{assistant}");
    assert_eq!(block["originalId"], "", "{assistant}");
    let results = rig.data("tool/result");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["message"]["source"]["callId"], fresh.as_str());

    let problems = dsh_session::check_events(rig.session.events().pairs());
    assert!(problems.is_empty(), "{problems:?}");

    // The mock server checks the history as the real API does (every call answered by its id).
    let requests = rig.server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.refused.is_none()));
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages[1]["tool_calls"][0]["id"], fresh.as_str());
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[2]["tool_call_id"], fresh.as_str());
}

#[tokio::test]
async fn a_streamed_call_with_no_id_runs_under_a_fresh_id_sent_back_to_the_model() {
    a_call_without_an_id_runs_under_a_fresh_one(None).await;
}

#[tokio::test]
async fn a_streamed_call_with_an_empty_id_runs_under_a_fresh_id_sent_back_to_the_model() {
    a_call_without_an_id_runs_under_a_fresh_one(Some(json!(""))).await;
}

#[tokio::test]
async fn a_streamed_call_with_a_null_id_runs_under_a_fresh_id_sent_back_to_the_model() {
    a_call_without_an_id_runs_under_a_fresh_one(Some(Value::Null)).await;
}

/// Two id-less calls in one message, then one in a later step: every fresh id is distinct.
#[tokio::test]
async fn calls_without_ids_in_one_message_and_in_later_steps_get_distinct_ids() {
    let rig = rig().await;
    let mut frames = vec![oa::role()];
    for index in 0..2 {
        frames.push(oa::data(&oa::chunk(
            json!({"tool_calls": [{"index": index, "type": "function",
                "function": {"name": "echo", "arguments": "{}"}}]}),
            None,
        )));
    }
    frames.extend(oa::finish("tool_calls", 20, 5));
    rig.server
        .push_all([Reply::Stream(frames), echo_call_with_id(None), say("done")]);
    let outcome = rig.agent.prompt("use echo").await.unwrap().unwrap();
    assert_eq!(outcome.end, TurnEnd::Completed);
    assert_eq!(rig.runs(), 3);
    let ids: Vec<Value> = rig
        .data("tool/call")
        .into_iter()
        .map(|c| c["callId"].clone())
        .collect();
    assert_eq!(
        ids,
        [
            json!("dsh-call-1"),
            json!("dsh-call-2"),
            json!("dsh-call-3")
        ]
    );
    let problems = dsh_session::check_events(rig.session.events().pairs());
    assert!(problems.is_empty(), "{problems:?}");
    let requests = rig.server.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests.iter().all(|r| r.refused.is_none()));
}
