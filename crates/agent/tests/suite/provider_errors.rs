//! Provider failures met by a turn over real HTTP: a connection closed before the answer started
//! is retried and the turn goes on; a server that answers JSON instead of an event stream ends
//! the turn with one clear failure.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use dsh_scheduler::TurnEnd;
use dsh_test_support::mock_provider::Reply;
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn a_connection_closed_before_the_answer_is_retried_and_the_turn_completes() {
    let rig = rig().await;
    rig.server
        .push_all([Reply::Close, echo_call("call_1"), Reply::Close, say("done")]);
    let outcome = rig.agent.prompt("use echo").await.unwrap().unwrap();
    assert_eq!(outcome.end, TurnEnd::Completed);
    assert_eq!(outcome.text, "done");
    assert_eq!(rig.runs(), 1);
    assert_eq!(rig.server.requests().len(), 4);
    assert_eq!(rig.count("assistant/message"), 2);
    let problems = dsh_session::check_events(rig.session.events().pairs());
    assert!(problems.is_empty(), "{problems:?}");
}

#[tokio::test]
async fn a_json_completion_instead_of_a_stream_fails_the_turn_with_a_clear_message() {
    let rig = rig().await;
    rig.server.push(Reply::Status {
        status: 200,
        headers: vec![],
        body: json!({"object": "chat.completion", "choices": [{"index": 0,
            "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}]})
        .to_string(),
    });
    let outcome = rig.agent.prompt("hi").await.unwrap().unwrap();
    let TurnEnd::Failed(failure) = &outcome.end else {
        panic!("{:?}", outcome.end)
    };
    let failure = failure.value();
    assert_eq!(failure["code"], "NOT_THE_API");
    let message = failure["message"].as_str().unwrap();
    assert!(
        message.contains("a JSON body (application/json) instead of an event stream"),
        "{message}"
    );
    assert_eq!(rig.server.requests().len(), 1);
    assert_eq!(rig.reasons()[0]["error"]["code"], "NOT_THE_API");
    let problems = dsh_session::check_events(rig.session.events().pairs());
    assert!(problems.is_empty(), "{problems:?}");
}
