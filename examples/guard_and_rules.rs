//! Permission rules written in code, a custom guard, an approver that sees the call's
//! arguments, and an observer that sees every call whatever the rules decide.
//!
//! Run: `cargo run --example guard_and_rules`

use std::sync::{Arc, Mutex};

use dsh::core::{Json, Signal, ToolDefinition, ToolExecution, ToolOutput};
use dsh::guard::{PermissionAction, PermissionRules};
use dsh::serde_json::json;
use dsh::{ApprovalOutcome, answer_fn};
use dsh::{Approvals, Harness};

fn tool(name: &str) -> Result<ToolDefinition, dsh::core::CoreError> {
    ToolDefinition::builder(name, "A demo tool.")
        .output(ToolOutput::string())
        // The permission subject: what a rule's glob is matched against (`deploy(prod*)`).
        .permission_subject(|args| args["target"].as_str().map(str::to_owned))
        .execute(|_ctx| async { Ok(Json::string("done")) })
        .build()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // deny > ask > allow; calls no rule matches get the default.
    let rules = PermissionRules::new(dsh::core::ToolRegistry::new())
        .allow("status")?
        .ask("deploy")?
        .deny("deploy(prod*)")?
        .with_default(PermissionAction::Deny);

    // The approver is shown the tool, its arguments and its subject.
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    let approver = answer_fn(move |req| {
        let subject = req.subject.as_ref().map(|s| s.shown());
        if let Ok(mut l) = log.lock() {
            l.push(format!(
                "{} {}?",
                req.tool_name,
                subject.unwrap_or_default()
            ));
        }
        async { Ok(Some(ApprovalOutcome::AllowedOnce)) }
    });

    // Sees every call, including those the rules deny: an observer cannot decide.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_by_observer = seen.clone();

    let session = dsh::session::Session::in_memory("rules");
    let harness = Harness::builder(session)
        .agent(dsh::core::AgentId::new("main")) // approval routes by agent
        .tools([tool("status")?, tool("deploy")?, tool("reboot")?])
        .permissions(rules)
        .observe_pre_execute(move |exec: &ToolExecution| {
            if let Ok(mut s) = seen_by_observer.lock() {
                s.push(exec.call_id().to_owned());
            }
        })
        // A guard runs after approval and can only deny.
        .guard(|exec: &ToolExecution| {
            let friday = exec.arguments().json()?.value().get("friday")?.as_bool()?;
            friday.then(|| "no deploys on Friday".to_owned())
        })
        .approvals(Approvals::Answerer(Arc::new(approver)))
        .build()
        .await?;

    let call = |id: &str, name: &str, args: dsh::serde_json::Value| json!({"type": "tool-call", "id": id, "name": name, "arguments": args.to_string()});
    let message = Json::new(json!({"role": "assistant", "content": [
        call("c1", "status", json!({})),
        call("c2", "deploy", json!({"target": "staging"})),
        call("c3", "deploy", json!({"target": "prod-eu"})),
        call("c4", "deploy", json!({"target": "staging", "friday": true})),
        call("c5", "reboot", json!({})),
    ]}))?;
    let report = harness
        .driver()
        .run_turn([message], Signal::never())
        .await?;
    for r in &report.steps[0].results {
        println!("{}", r.first_text().unwrap_or_default());
    }
    let texts: Vec<_> = report.steps[0]
        .results
        .iter()
        .map(|r| r.first_text())
        .collect();
    assert_eq!(texts[0], Some("done")); // allowed by a rule
    assert_eq!(texts[1], Some("done")); // asked, approved
    assert!(texts[2].is_some_and(|t| t.contains("deploy(prod*)"))); // denied by a rule
    assert!(texts[3].is_some_and(|t| t.contains("no deploys on Friday"))); // approved, then guarded
    assert!(texts[4].is_some_and(|t| t.contains("denied"))); // the default
    assert_eq!(
        *seen.lock().map_err(|e| e.to_string())?,
        ["c1", "c2", "c3", "c4", "c5"]
    );
    let asked = asked.lock().map_err(|e| e.to_string())?.clone();
    assert_eq!(asked, ["deploy staging?", "deploy staging?"]);
    Ok(())
}

#[test]
fn example_runs() -> Result<(), Box<dyn std::error::Error>> {
    main()
}
