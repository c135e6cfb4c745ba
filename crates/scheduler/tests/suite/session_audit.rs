//! The approval service over the real session log (`dsh_session::Session` as the audit sink).

use dsh_core::Json;
use dsh_guard::{
    ApprovalConfig, ApprovalOutcome, ApprovalPolicy, ApprovalRequest, ApprovalService, GuardError,
    Scope, answer_fn,
};
use dsh_session::{Event, Session};
use serde_json::json;

use dsh_core::AgentId;

fn agent(name: &str) -> AgentId {
    AgentId::new(name)
}

fn audit_events(session: &Session) -> Vec<(String, serde_json::Value)> {
    session
        .events()
        .iter()
        .filter(|(_, e)| e.event_type().starts_with("approval/"))
        .map(|(_, e)| (e.event_type().to_owned(), e.data().value().clone()))
        .collect()
}

#[tokio::test]
async fn the_audit_pair_lands_in_the_session_inside_its_turn() {
    let session = Session::in_memory("s1");
    let s = ApprovalService::new(ApprovalConfig::default());
    s.attach_session(Scope::Global, dsh_scheduler::audit_session(session.clone()))
        .keep();
    s.add_answerer(
        Scope::Global,
        answer_fn(|_| async { Ok(Some(ApprovalOutcome::AllowedOnce)) }),
    )
    .keep();
    let req = ApprovalRequest::new(agent("a"), "echo").with_call_id("c1");
    // No turn yet: refused, nothing appended.
    assert_eq!(
        s.request(req.clone()).await,
        Err(GuardError::OutsideOpenTurn)
    );
    assert!(audit_events(&session).is_empty());
    session.append(Event::turn_start(0)).await.unwrap();
    assert_eq!(s.request(req).await.unwrap(), ApprovalOutcome::AllowedOnce);
    let audit = audit_events(&session);
    assert_eq!(audit.len(), 2);
    assert_eq!(audit[0].0, "approval/asked");
    assert_eq!(audit[0].1["toolName"], "echo");
    assert_eq!(audit[0].1["callId"], "c1");
    assert_eq!(audit[1].0, "approval/decided");
    assert_eq!(audit[1].1["outcome"], "allowed-once");
    assert_eq!(audit[0].1["id"], audit[1].1["id"]);
}

#[tokio::test]
async fn a_resumed_session_keeps_its_policy_override() {
    let session = Session::in_memory("s2");
    for p in ["never", "ask", "never"] {
        session
            .append(Event::other(
                "approval/policy",
                Json::from_shallow(json!({ "policy": p })),
            ))
            .await
            .unwrap();
    }
    let audit = dsh_scheduler::audit_session(session.clone());
    assert_eq!(audit.override_policy(), Some(ApprovalPolicy::Never));
    let fresh = dsh_scheduler::audit_session(Session::in_memory("s3"));
    assert_eq!(fresh.override_policy(), None);
    // A switch through the service is written to the session log.
    let s = ApprovalService::new(ApprovalConfig::default());
    s.attach_session(Scope::Global, audit).keep();
    s.set_policy(&agent("a"), ApprovalPolicy::Ask)
        .await
        .unwrap();
    let last = session.events().last().cloned().unwrap();
    assert_eq!(last.1.event_type(), "approval/policy");
    assert_eq!(last.1.data().value(), &json!({"policy": "ask"}));
}

#[tokio::test]
async fn a_refused_audit_append_keeps_the_session_error_as_its_source() {
    use dsh_guard::AuditSink;
    let sink = dsh_scheduler::SessionAudit(Session::in_memory("s4"));
    // A chunk run with no entries is an event the session refuses.
    let err = sink
        .append(
            "text-chunks",
            Json::from_shallow(json!({"dt": [], "texts": []})),
        )
        .await
        .expect_err("refused by the session");
    let source = std::error::Error::source(&err).map(ToString::to_string);
    assert!(
        matches!(err, GuardError::Audit { cause: Some(_), .. }),
        "{err:?}"
    );
    assert!(source.is_some_and(|s| s.contains("chunk")), "{err}");
}
