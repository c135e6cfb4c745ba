//! Cancels that reach the tools: a call the model made is paired even when the turn is
//! cancelled before it runs (LOOP-15), and a body's signal is the turn's (LOOP-33, tool row).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use dsh_agent::Cancel;
use dsh_core::{Json, ToolDefinition, ToolOutput};

use super::support::*;

#[tokio::test]
async fn loop_15_a_cancel_from_the_assistant_message_observer_pairs_the_call_unrun() {
    let rig = rig().await;
    let agent = rig.agent.clone();
    let _sub = rig.session.subscribe(move |_, e| {
        if e.event_type() == "assistant/message" {
            agent.cancel(Cancel::user());
        }
    });
    rig.server.push(echo_call("c1"));
    rig.agent.prompt("go").await.unwrap();
    assert_eq!(rig.runs(), 0);
    assert_eq!(rig.reasons(), vec![aborted("user")]);
    let results = rig.data("tool/result");
    assert_eq!(results.len(), 1);
    let message = &results[0]["message"];
    assert_eq!(message["source"]["callId"], "c1");
    assert_eq!(message["content"][0]["toolCallId"], "c1");
    assert_eq!(message["content"][0]["isError"], true);
    assert_eq!(rig.count("tool/call"), 1);
}

#[tokio::test]
async fn loop_33_a_tool_body_waiting_on_its_signal_settles_when_the_agent_is_cancelled() {
    let rig = rig_custom(
        |c| c,
        &[],
        |registry, _| {
            registry
                .add(
                    ToolDefinition::builder("wait", "Waits until cancelled.")
                        .output(ToolOutput::string())
                        .execute(|tcx| async move {
                            tcx.signal().aborted().await;
                            Ok(Json::string("stopped"))
                        })
                        .build()
                        .unwrap(),
                )
                .unwrap();
        },
    )
    .await;
    let mut frames = vec![oa::role()];
    frames.extend(oa::tool_call(0, "w1", "wait", &["{}"]));
    frames.extend(oa::finish("tool_calls", 10, 2));
    rig.server
        .push(dsh_test_support::mock_provider::Reply::Stream(frames));
    rig.agent.send("go").await.unwrap();
    wait_until("the call is logged", || rig.count("tool/call") == 1).await;
    rig.agent.cancel(Cancel::user());
    rig.agent.idle().await;
    assert_eq!(rig.reasons(), vec![aborted("user")]);
    assert_eq!(rig.count("tool/result"), 1);
    assert_eq!(rig.bodies().len(), 1);
}
