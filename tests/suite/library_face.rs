//! The library face of the facade: what a team wiring the pipeline in code relies on (tools,
//! hooks and rules on the builder, observers that see every call, registrations that stay,
//! approval requests with the call's arguments and subject, the typed tool's errors).

use std::sync::{Arc, Mutex};

use dsh::core::{
    Json, PreToolDecision, Signal, ToolDefinition, ToolExecution, ToolOutput, ToolRegistry,
    pre_execute_fn,
};
use dsh::guard::PermissionRules;
use dsh::guard::{ApprovalOutcome, answer_fn};
use dsh::{Approvals, Harness, Policy};
use serde_json::json;

fn tool(name: &str) -> ToolDefinition {
    ToolDefinition::builder(name, "test tool")
        .output(ToolOutput::string())
        .permission_subject(|a| a["target"].as_str().map(str::to_owned))
        .execute(|_ctx| async { Ok(Json::string("done")) })
        .build()
        .unwrap()
}

fn message(calls: &[(&str, &str, serde_json::Value)]) -> Json {
    let content: Vec<_> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({"type": "tool-call", "id": id, "name": name, "arguments": args.to_string()})
        })
        .collect();
    Json::new(json!({"role": "assistant", "content": content})).unwrap()
}

async fn texts(harness: &Harness, m: Json) -> Vec<String> {
    let report = harness
        .driver()
        .run_turn([m], Signal::never())
        .await
        .unwrap();
    report.steps[0]
        .results
        .iter()
        .map(|r| r.first_text().unwrap_or_default().to_owned())
        .collect()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn builder_registers_tools_rules_and_listeners_in_the_documented_order() {
    rt().block_on(async {
        let order = Arc::new(Mutex::new(Vec::new()));
        let (o1, o2, o3) = (order.clone(), order.clone(), order.clone());
        let rules = PermissionRules::new(ToolRegistry::new()).deny("b").unwrap();
        let harness = Harness::builder(dsh::session::Session::in_memory("s"))
            .tools([tool("a"), tool("b")])
            .permissions(rules)
            .pre_execute(pre_execute_fn(move |e| {
                o1.lock().unwrap().push(format!("first:{}", e.call_id()));
                None
            }))
            .pre_execute(pre_execute_fn(move |e| {
                o2.lock().unwrap().push(format!("second:{}", e.call_id()));
                (e.call_id() == "c3").then(|| PreToolDecision::deny("second says no"))
            }))
            .observe_pre_execute(move |e: &ToolExecution| {
                o3.lock().unwrap().push(format!("observed:{}", e.call_id()))
            })
            .build()
            .await
            .unwrap();
        let out = texts(
            &harness,
            message(&[
                ("c1", "a", json!({})),
                ("c2", "b", json!({})),
                ("c3", "a", json!({})),
            ]),
        )
        .await;
        assert_eq!(out[0], "done");
        assert!(out[1].contains("denied by permission rule"), "{}", out[1]);
        assert_eq!(out[2], "Error: second says no");
        // The observer saw c2, which the rule decided; the listeners after the rule did not.
        assert_eq!(
            *order.lock().unwrap(),
            [
                "observed:c1",
                "first:c1",
                "second:c1",
                "observed:c2",
                "observed:c3",
                "first:c3",
                "second:c3"
            ]
        );
    });
}

#[test]
fn permissions_in_code_and_in_the_policy_file_are_refused_together() {
    rt().block_on(async {
        let policy = Policy::parse("[permissions]\nallow = [\"a\"]\n").unwrap();
        let err = Harness::builder(dsh::session::Session::in_memory("s"))
            .tool(tool("a"))
            .policy(policy)
            .permissions(PermissionRules::new(ToolRegistry::new()))
            .build()
            .await
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("HarnessBuilder::permissions"),
            "{err}"
        );
    });
}

#[test]
fn permission_rules_in_code_naming_no_tool_are_refused() {
    rt().block_on(async {
        let rules = PermissionRules::new(ToolRegistry::new())
            .deny("raed")
            .unwrap();
        let err = Harness::builder(dsh::session::Session::in_memory("s"))
            .tool(tool("read"))
            .permissions(rules)
            .build()
            .await
            .err()
            .unwrap();
        assert!(err.to_string().contains("raed"), "{err}");
    });
}

#[test]
fn approval_request_carries_arguments_and_subject_and_unknown_tools_are_not_asked() {
    rt().block_on(async {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let approver = answer_fn(move |req| {
            let args = req
                .arguments
                .as_ref()
                .and_then(|a| a.json())
                .map(|j| j.value().to_string());
            let subject = req.subject.as_ref().map(|s| s.shown());
            log.lock()
                .unwrap()
                .push((req.tool_name.to_string(), args, subject));
            async { Ok(Some(ApprovalOutcome::AllowedOnce)) }
        });
        let harness = Harness::builder(dsh::session::Session::in_memory("s"))
            .tool(tool("deploy"))
            .pre_execute(pre_execute_fn(|_| Some(PreToolDecision::ask("check"))))
            .approvals(Approvals::Answerer(Arc::new(approver)))
            .build()
            .await
            .unwrap();
        let out = texts(
            &harness,
            message(&[
                ("c1", "deploy", json!({"target": "staging"})),
                ("c2", "nosuch", json!({"target": "x"})),
            ]),
        )
        .await;
        assert_eq!(out, ["done", "Error: unknown tool \"nosuch\""]);
        let asked = asked.lock().unwrap().clone();
        assert_eq!(
            asked.len(),
            1,
            "only the existing tool is asked about: {asked:?}"
        );
        assert_eq!(asked[0].0, "deploy");
        assert!(asked[0].1.as_deref().unwrap().contains("staging"));
        assert_eq!(asked[0].2.as_deref(), Some("staging"));
    });
}

#[test]
fn registry_add_is_permanent_and_a_dropped_registration_unregisters() {
    let registry = ToolRegistry::new();
    registry.add(tool("kept")).unwrap();
    let _ = registry.register(tool("dropped")).unwrap();
    assert!(registry.get("kept", None).is_some());
    assert!(registry.get("dropped", None).is_none());
}

#[test]
fn execute_typed_without_output_names_the_method_to_call() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct In {}
    let err = ToolDefinition::builder("t", "no output")
        .execute_typed(|_i: In, _ctx| async { Ok("x") })
        .build()
        .err()
        .unwrap();
    let message = err.to_string();
    assert!(message.contains("must declare output { schema, render, presentationMeta? }"));
    assert!(
        message.contains(".output(ToolOutput::string())"),
        "{message}"
    );
}

#[test]
fn check_events_takes_what_session_events_returns() {
    rt().block_on(async {
        let session = dsh::session::Session::in_memory("s");
        session
            .append(dsh::session::Event::turn_start(1))
            .await
            .unwrap();
        let events = session.events();
        assert_eq!(
            dsh::session::check_events(&events),
            dsh::session::check_events(events.pairs())
        );
    });
}

#[test]
fn facade_reexports_what_a_tool_definition_needs() {
    #[derive(dsh::serde::Deserialize, dsh::schemars::JsonSchema)]
    #[serde(crate = "dsh::serde")]
    #[schemars(crate = "dsh::schemars")]
    struct In {
        #[allow(dead_code)]
        city: String,
    }
    let schema = dsh::core::typed::schema_for::<In>();
    assert_eq!(schema.value()["required"], json!(["city"]));
    let _: serde_json::Value = dsh::serde_json::json!({});
}
