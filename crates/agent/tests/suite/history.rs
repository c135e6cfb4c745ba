//! The log replays what the model saw: the history derived from the log equals, request by
//! request, what the server received; steering and contexts land where the reference puts them
//! (LOG-06, 08, 11).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;

use dsh_agent::{AgentConfig, provider_messages, to_provider_messages};
use dsh_core::{ContextMessage, Json, ToolDefinition, ToolOutput};
use dsh_model::{Message, Provider, Request};
use serde_json::{Value, json};

use super::support::*;

/// Rebuilds each request from the log alone: the header logged before it and the history of
/// every event before its `assistant/message`.
fn requests_from_log(rig: &Rig, config: &AgentConfig, provider: &dyn Provider) -> Vec<Value> {
    let events = rig.session.events();
    let pairs: Vec<(u64, &dsh_session::Event)> = events.iter().map(|(s, e)| (*s, e)).collect();
    let tools = config
        .order_tools(rig.runtime.registry().schemas(None))
        .unwrap();
    let mut out = Vec::new();
    for (at, (_, event)) in pairs.iter().enumerate() {
        if event.event_type() != "assistant/message" {
            continue;
        }
        let history = dsh_session::derive_messages_from(pairs[..at].iter().copied());
        let mut messages = Vec::new();
        if let Some(system) = &config.system {
            messages.push(Message::system(system.as_str()));
        }
        messages.extend(to_provider_messages(&history));
        let request = Request::new(config.model.clone(), messages)
            .with_tools(tools.clone())
            .with_options(config.options.clone());
        let body = provider.body(&request).unwrap().unwrap();
        out.push(serde_json::from_slice(&body).unwrap());
    }
    out
}

#[tokio::test]
async fn the_history_derived_from_the_log_equals_every_request_the_server_received() {
    let rig = rig_with(|c| c.with_system("You are terse."), &["alpha"]).await;
    rig.server.push_all([
        echo_call("call_1"),
        say("first answer"),
        echo_call("call_2"),
        say("second answer"),
    ]);
    rig.agent.prompt("turn one").await.unwrap();
    rig.agent
        .inject("notes", "a context between turns")
        .await
        .unwrap();
    rig.agent.prompt("turn two").await.unwrap();
    let provider = openai_provider(&rig.server);
    let config = AgentConfig::new(provider.clone(), "deepseek-chat").with_system("You are terse.");
    let rebuilt = requests_from_log(&rig, &config, provider.as_ref());
    let received = rig.bodies();
    assert_eq!(received.len(), 4);
    assert_eq!(rebuilt, received);
    // The logged header names what every request carried.
    let header = &rig.data("request/header")[0]["header"];
    assert_eq!(header["system"], "You are terse.");
    assert_eq!(rig.count("request/header"), 1);
}

/// A tool whose body steers the agent (source plugin `goal`), and optionally concludes.
fn steering_tool(
    name: &'static str,
    conclude: bool,
) -> impl FnOnce(&dsh_core::ToolRegistry, Arc<std::sync::OnceLock<dsh_agent::Agent>>) {
    move |registry, cell| {
        registry
            .add(
                ToolDefinition::builder(name, "Steers.")
                    .output(ToolOutput::string())
                    .execute(move |tcx| {
                        let cell = cell.clone();
                        async move {
                            let agent = cell.get().unwrap().clone();
                            agent
                                .steer(ContextMessage::from_plugin(
                                    "goal",
                                    dsh_core::text_content("stay on the goal"),
                                ))
                                .await
                                .unwrap();
                            if conclude {
                                tcx.conclude_turn();
                            }
                            Ok(Json::string("steered"))
                        }
                    })
                    .build()
                    .unwrap(),
            )
            .unwrap();
    }
}

fn call(id: &str, name: &str) -> dsh_test_support::mock_provider::Reply {
    let mut frames = vec![oa::role()];
    frames.extend(oa::tool_call(0, id, name, &["{}"]));
    frames.extend(oa::finish("tool_calls", 10, 2));
    dsh_test_support::mock_provider::Reply::Stream(frames)
}

#[tokio::test]
async fn log_06_inbox_splices_record_the_prompt_then_the_steering_with_their_sources() {
    let rig = rig_custom(|c| c, &[], steering_tool("steer", false)).await;
    rig.server.push_all([call("c1", "steer"), say("done")]);
    rig.agent.prompt("go").await.unwrap();
    let inserted: Vec<(Value, Value, Vec<String>)> = rig
        .data("agent/inbox/spliced")
        .into_iter()
        .filter(|d| d["inserted"].as_array().is_some_and(|a| !a.is_empty()))
        .map(|d| {
            let m = &d["inserted"][0];
            (d["target"].clone(), m["source"].clone(), user_data_keys(m))
        })
        .collect();
    let keys = ["content", "id", "role", "source"];
    assert_eq!(
        inserted,
        vec![
            (
                json!("next-turn"),
                json!({"kind": "user"}),
                keys.iter().map(|s| s.to_string()).collect()
            ),
            (
                json!("next-step"),
                json!({"kind": "plugin", "plugin": "goal"}),
                keys.iter().map(|s| s.to_string()).collect()
            ),
        ]
    );
    let steering: Vec<Value> = rig
        .data("user/message")
        .into_iter()
        .filter(|d| d["source"]["plugin"] == "goal")
        .collect();
    assert_eq!(steering.len(), 1);
}

#[tokio::test]
async fn log_11_pending_steering_outweighs_a_call_that_concludes_the_turn() {
    let rig = rig_custom(|c| c, &[], steering_tool("steer", true)).await;
    rig.server.push_all([call("c1", "steer"), say("done")]);
    rig.agent.prompt("go").await.unwrap();
    assert_eq!(rig.bodies().len(), 2);
    assert!(rig.request_holds(1, "stay on the goal"));
    assert_eq!(rig.count("turn/start"), 1);
}

#[tokio::test]
async fn log_08_contexts_a_body_defers_come_after_its_result_in_the_next_request() {
    let rig = rig_custom(
        |c| c,
        &[],
        |registry, _| {
            registry
                .add(
                    ToolDefinition::builder("notify", "Defers two notices.")
                        .output(ToolOutput::string())
                        .execute(|tcx| async move {
                            let first = ContextMessage::plugin_text("p", "mid-turn notice");
                            tcx.defer_context(first);
                            tcx.defer_context(ContextMessage::plugin_text("p", "second notice"));
                            Ok(Json::string("noted"))
                        })
                        .build()
                        .unwrap(),
                )
                .unwrap();
        },
    )
    .await;
    rig.server.push_all([call("c1", "notify"), say("done")]);
    rig.agent.prompt("go").await.unwrap();
    let events = rig.session.events();
    let result_seq = events
        .iter()
        .find(|(_, e)| e.event_type() == "tool/result")
        .map(|(s, _)| *s)
        .unwrap();
    let notices: Vec<u64> = events
        .iter()
        .filter(|(_, e)| {
            e.event_type() == "user/message" && e.data().value()["source"]["plugin"] == "p"
        })
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(notices.len(), 2);
    assert!(notices.iter().all(|s| *s > result_seq));
    assert_eq!(rig.count("turn/start"), 1);
    let messages = rig.bodies()[1]["messages"].as_array().unwrap().clone();
    let tool_at = messages.iter().position(|m| m["role"] == "tool").unwrap();
    let notice_at = messages
        .iter()
        .position(|m| m.to_string().contains("mid-turn notice"))
        .unwrap();
    assert!(notice_at > tool_at);
}

/// A log's history read two ways: through the trees `derive_messages` gives, and straight
/// from the logged text (`provider_messages`, what a request is built from).
fn both_ways(bytes: &[u8]) -> (Vec<Message>, Vec<Message>) {
    let log = dsh_session::read_log(bytes).unwrap();
    let pairs = || log.events.iter().map(|(s, e)| (*s, e));
    let trees = to_provider_messages(&dsh_session::derive_messages_from(pairs()));
    (trees, provider_messages(pairs()))
}

#[test]
fn l5_the_history_read_from_logged_text_equals_the_one_read_from_trees_for_every_reference_log() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../session/tests/fixtures/reference-sessions");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let (trees, text) = both_ways(&std::fs::read(&path).unwrap());
        assert_eq!(text, trees, "{}", path.display());
        seen += usize::from(!trees.is_empty());
    }
    assert!(
        seen > 5,
        "only {seen} fixtures with a history in {}",
        dir.display()
    );
}

mod shapes {
    use super::*;
    use dsh_session::{Event, Header};
    use proptest::prelude::*;

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            "[a-z\"\\\\\n é]{0,6}".prop_map(Value::from),
        ]
    }

    fn member() -> impl Strategy<Value = Option<Value>> {
        prop::option::of(prop_oneof![
            4 => leaf(),
            1 => prop::collection::vec(leaf(), 0..3).prop_map(Value::Array),
            1 => Just(json!({"k": [1, {"a": null}]})),
        ])
    }

    fn block() -> impl Strategy<Value = Value> {
        let kind = prop_oneof![
            4 => prop::sample::select(vec![
                "text", "image", "tool-result", "tool-call", "reasoning", "other"
            ])
            .prop_map(Value::from),
            1 => leaf(),
        ];
        let members = (
            prop::option::of(kind),
            [member(), member(), member(), member(), member(), member()],
            [member(), member(), member(), member()],
        );
        let shaped = members.prop_map(|(kind, a, b)| {
            let keys = [
                "text",
                "data",
                "mimeType",
                "toolCallId",
                "content",
                "isError",
            ];
            let more = ["id", "name", "arguments", "signature"];
            let mut m = serde_json::Map::new();
            if let Some(kind) = kind {
                m.insert("type".into(), kind);
            }
            for (k, v) in keys.iter().zip(a).chain(more.iter().zip(b)) {
                if let Some(v) = v {
                    m.insert((*k).into(), v);
                }
            }
            Value::Object(m)
        });
        prop_oneof![5 => shaped, 1 => leaf()]
    }

    fn message() -> impl Strategy<Value = Value> {
        let role = prop_oneof![
            Just(Some(Value::from("user"))),
            Just(Some(Value::from("assistant"))),
            Just(None),
            leaf().prop_map(Some),
        ];
        let content = prop::option::of(prop_oneof![
            4 => prop::collection::vec(block(), 0..4).prop_map(Value::Array),
            1 => leaf(),
        ]);
        (role, content).prop_map(|(role, content)| {
            let mut m = serde_json::Map::new();
            if let Some(role) = role {
                m.insert("role".into(), role);
            }
            if let Some(content) = content {
                m.insert("content".into(), content);
            }
            Value::Object(m)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever shape a logged message has, the provider messages read from its text are
        /// the ones read from its tree.
        #[test]
        fn l5_messages_of_any_shape_read_from_text_equal_those_read_from_trees(
            messages in prop::collection::vec((message(), any::<bool>()), 1..6),
        ) {
            let mut log = Header::new("s", "/w").json().to_json_string();
            log.push('\n');
            for (message, assistant) in messages {
                let ty = if assistant { "assistant/message" } else { "tool/result" };
                let data = json!({"turn": 1, "step": 1, "message": message});
                log.push_str(&Event::other(ty, Json::from_shallow(data)).to_json_line());
                log.push('\n');
            }
            let (trees, text) = both_ways(log.as_bytes());
            prop_assert_eq!(text, trees, "{}", log);
        }
    }
}
