//! APR-01..08: how the registry routes a pre-execute `ask` ([`resolve_ask`]): exact denial
//! messages, fail-closed, and the request the answerer receives.

use std::sync::Arc;

use dsh_core::{AbortController, Failure, ToolResult};
use dsh_guard::{
    ApprovalConfig, ApprovalOutcome, ApprovalRequest, ApprovalService, AuditSession, Scope,
    answer_fn, gate_outcome, gate_wire_outcome, resolve_ask,
};
use parking_lot::Mutex;
use serde_json::json;

use super::support::{FakeSink, exec, exec_with};

fn content_text(f: Failure) -> String {
    ToolResult::failure(f).first_text().unwrap().to_owned()
}

/// A service with an open-turn session and an answerer that records its requests and answers
/// `outcome`.
fn answering(outcome: ApprovalOutcome) -> (ApprovalService, Arc<Mutex<Vec<ApprovalRequest>>>) {
    let s = ApprovalService::new(ApprovalConfig::default());
    s.attach_session(Scope::Global, AuditSession::new(FakeSink::in_turn()))
        .keep();
    let seen: Arc<Mutex<Vec<ApprovalRequest>>> = Arc::default();
    let seen2 = seen.clone();
    s.add_answerer(
        Scope::Global,
        answer_fn(move |r| {
            seen2.lock().push(r);
            async move { Ok(Some(outcome)) }
        }),
    )
    .keep();
    (s, seen)
}

#[tokio::test]
async fn apr_01_no_service_denies_with_the_asks_reason() {
    let e = exec("echo", Some("a"));
    let f = resolve_ask(None, &e, Some("needs approval"))
        .await
        .unwrap_err();
    assert_eq!(f.message(), "needs approval");
    assert!(f.info().is_none());
    assert_eq!(content_text(f), "Error: needs approval");
}

#[tokio::test]
async fn apr_02_no_service_and_no_reason() {
    let e = exec("echo", Some("a"));
    let f = resolve_ask(None, &e, None).await.unwrap_err();
    assert_eq!(
        content_text(f),
        "Error: tool \"echo\" requires approval (not yet supported)"
    );
}

#[tokio::test]
async fn apr_03_a_grant_lets_the_call_run_and_the_answerer_sees_the_callers_signal() {
    let (s, seen) = answering(ApprovalOutcome::AllowedOnce);
    let ctl = AbortController::new();
    let e = exec_with("c1", "echo", json!({"text": "hi"}), Some("a"), ctl.signal());
    resolve_ask(Some(&s), &e, Some("hook wants a human"))
        .await
        .unwrap();
    let seen = seen.lock();
    assert_eq!(seen.len(), 1);
    let r = &seen[0];
    assert_eq!(r.agent.as_str(), "a");
    assert_eq!(&*r.tool_name, "echo");
    assert_eq!(r.call_id.as_deref(), Some("c1"));
    assert_eq!(r.reason.as_deref(), Some("hook wants a human"));
    assert!(dsh_core::Signal::same(&r.signal, e.signal()));
}

#[tokio::test]
async fn apr_04_rejected() {
    let (s, _) = answering(ApprovalOutcome::Rejected);
    let f = resolve_ask(Some(&s), &exec("echo", Some("a")), None)
        .await
        .unwrap_err();
    assert!(f.info().is_none());
    assert_eq!(content_text(f), "Error: the user rejected tool \"echo\"");
}

#[tokio::test]
async fn apr_05_cancelled_by_the_answerer() {
    let (s, _) = answering(ApprovalOutcome::Cancelled);
    let e = exec("echo", Some("a"));
    let f = resolve_ask(Some(&s), &e, None).await.unwrap_err();
    assert!(!e.signal().is_aborted());
    assert_eq!(
        content_text(f),
        "Error: approval for tool \"echo\" was cancelled"
    );
}

#[tokio::test]
async fn apr_06_no_answerer_is_unavailable() {
    let s = ApprovalService::new(ApprovalConfig::default());
    s.attach_session(Scope::Global, AuditSession::new(FakeSink::in_turn()))
        .keep();
    let f = resolve_ask(Some(&s), &exec("echo", Some("a")), None)
        .await
        .unwrap_err();
    assert_eq!(
        content_text(f),
        "Error: tool \"echo\" requires approval, but no approval channel is available"
    );
}

#[tokio::test]
async fn apr_07_no_agent_never_reaches_the_answerer() {
    let (s, seen) = answering(ApprovalOutcome::AllowedOnce);
    let f = resolve_ask(Some(&s), &exec("echo", None), Some("why"))
        .await
        .unwrap_err();
    assert!(seen.lock().is_empty());
    assert_eq!(
        content_text(f),
        "Error: tool \"echo\" requires approval, but the call has no agent to route it through"
    );
}

#[tokio::test]
async fn apr_08_an_outcome_decoded_from_outside_the_contract_is_an_unreachable_denial() {
    let f = gate_wire_outcome("echo", "yolo").unwrap_err();
    assert!(f.message().contains("unreachable"), "{}", f.message());
    assert!(f.info().is_none());
    assert!(gate_wire_outcome("echo", "allowed-once").is_ok());
    assert_eq!(
        gate_wire_outcome("echo", "rejected").unwrap_err().message(),
        "the user rejected tool \"echo\""
    );
    // Only the grant passes the gate.
    for o in ApprovalOutcome::ALL {
        assert_eq!(gate_outcome("echo", o).is_ok(), o.is_grant());
    }
}

#[tokio::test]
async fn a_service_error_is_a_failure_not_an_allow() {
    // The session has no open turn: the request fails, and so does the call.
    let s = ApprovalService::new(ApprovalConfig::default());
    s.attach_session(Scope::Global, AuditSession::new(FakeSink::new()))
        .keep();
    let f = resolve_ask(Some(&s), &exec("echo", Some("a")), None)
        .await
        .unwrap_err();
    assert!(f.message().contains("outside an open turn"));
}

/// An answerer that leaves `words` with its `outcome`.
fn saying(outcome: ApprovalOutcome, words: &'static str) -> ApprovalService {
    let s = ApprovalService::new(ApprovalConfig::default());
    s.attach_session(Scope::Global, AuditSession::new(FakeSink::in_turn()))
        .keep();
    s.add_answerer(
        Scope::Global,
        answer_fn(move |r: ApprovalRequest| {
            r.feedback.give(words);
            async move { Ok(Some(outcome)) }
        }),
    )
    .keep();
    s
}

#[tokio::test]
async fn a_refusals_words_follow_the_refusal_and_other_outcomes_ignore_them() {
    let e = exec("echo", Some("a"));
    let f = resolve_ask(
        Some(&saying(ApprovalOutcome::Rejected, " not now ")),
        &e,
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(
        f.message(),
        "the user rejected tool \"echo\"; the user said: not now"
    );
    // Words left with a grant change nothing; with a cancel, the cancel's own text stands.
    assert!(
        resolve_ask(Some(&saying(ApprovalOutcome::AllowedOnce, "ok")), &e, None)
            .await
            .is_ok()
    );
    let f = resolve_ask(Some(&saying(ApprovalOutcome::Cancelled, "x")), &e, None)
        .await
        .unwrap_err();
    assert_eq!(f.message(), "approval for tool \"echo\" was cancelled");
}
