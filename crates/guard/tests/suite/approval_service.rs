//! APR-09..40: the approval service's outcomes, audit pair, routing and policy, through a fake
//! in-memory audit sink.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dsh_core::{AbortController, Json};
use dsh_guard::{
    ASK_POLICY_TEXT, AnswerNext, Answerer, ApprovalConfig, ApprovalOutcome, ApprovalPolicy,
    ApprovalRequest, ApprovalService, AuditSession, GuardError, NEVER_POLICY_TEXT, PolicyPrompt,
    Scope, answer_fn, effective_approval_policy,
};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::support::{Capture, FakeSink, agent};

/// A service with one global session on `sink`.
fn service(sink: &Arc<FakeSink>, policy: ApprovalPolicy) -> ApprovalService {
    let s = ApprovalService::new(ApprovalConfig { policy });
    s.attach_session(Scope::Global, AuditSession::new(sink.clone()))
        .keep();
    s
}

fn req(a: &str) -> ApprovalRequest {
    ApprovalRequest::new(agent(a), "echo")
}

fn fixed(outcome: ApprovalOutcome) -> impl Answerer {
    answer_fn(move |_| async move { Ok(Some(outcome)) })
}

/// Counts calls, then answers `outcome` (or delegates on `None`).
fn counted(count: &Arc<AtomicUsize>, outcome: Option<ApprovalOutcome>) -> impl Answerer {
    let count = count.clone();
    answer_fn(move |_| {
        count.fetch_add(1, Ordering::SeqCst);
        async move { Ok(outcome) }
    })
}

fn assert_pair(sink: &FakeSink, outcome: &str) -> Value {
    let audit = sink.audit();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert_eq!(audit[0].0, "approval/asked");
    assert_eq!(audit[1].0, "approval/decided");
    assert_eq!(audit[0].1["id"], audit[1].1["id"]);
    assert_eq!(audit[1].1["outcome"], outcome);
    audit[0].1.clone()
}

#[tokio::test]
async fn apr_09_no_turn_ever_opened_fails_and_appends_nothing() {
    let sink = FakeSink::new();
    let s = service(&sink, ApprovalPolicy::Ask);
    let err = s.request(req("a")).await.unwrap_err();
    assert_eq!(err, GuardError::OutsideOpenTurn);
    assert!(err.to_string().contains("outside an open turn"));
    assert!(sink.events().is_empty());
}

#[tokio::test]
async fn apr_10_between_turns_fails_and_appends_nothing() {
    let sink = FakeSink::new();
    sink.start_turn();
    sink.end_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    let err = s.request(req("a")).await.unwrap_err();
    assert!(err.to_string().contains("outside an open turn"));
    assert_eq!(sink.events().len(), 2);
    assert!(sink.audit().is_empty());
}

#[tokio::test]
async fn apr_11_no_answerer_is_unavailable_with_a_complete_pair() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    let out = s
        .request(req("a").with_call_id("call-1").with_reason("hook says ask"))
        .await
        .unwrap();
    assert_eq!(out, ApprovalOutcome::Unavailable);
    let asked = assert_pair(&sink, "unavailable");
    assert_eq!(asked["toolName"], "echo");
    assert_eq!(asked["callId"], "call-1");
    assert_eq!(asked["reason"], "hook says ask");
}

#[tokio::test]
async fn apr_12_absent_optionals_are_omitted_from_asked() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    s.request(req("a")).await.unwrap();
    let asked = assert_pair(&sink, "unavailable");
    let mut keys: Vec<&String> = asked.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["id", "toolName"]);
}

#[tokio::test]
async fn apr_13_scoped_answerer_receives_the_request_routed_to_its_agent() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    let seen: Arc<Mutex<Vec<ApprovalRequest>>> = Arc::default();
    let seen2 = seen.clone();
    s.add_answerer(
        Scope::Agent(agent("a")),
        answer_fn(move |r| {
            seen2.lock().push(r);
            async { Ok(Some(ApprovalOutcome::AllowedOnce)) }
        }),
    )
    .keep();
    let ctl = AbortController::new();
    let request = req("a")
        .with_call_id("c9")
        .with_reason("why")
        .with_signal(ctl.signal());
    let out = s.request(request.clone()).await.unwrap();
    assert_eq!(out, ApprovalOutcome::AllowedOnce);
    let seen = seen.lock();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].agent, request.agent);
    assert_eq!(&*seen[0].tool_name, "echo");
    assert_eq!(seen[0].call_id.as_deref(), Some("c9"));
    assert_eq!(seen[0].reason.as_deref(), Some("why"));
    assert!(dsh_core::Signal::same(&seen[0].signal, &request.signal));
    let asked = assert_pair(&sink, "allowed-once");
    assert_eq!(asked["callId"], "c9");
    assert_eq!(asked["reason"], "why");
}

#[tokio::test]
async fn apr_14_observer_failure_on_asked_is_contained_and_warned() {
    let cap = Capture::default();
    let _g = tracing::subscriber::set_default(cap.clone());
    let sink = FakeSink::in_turn();
    sink.throw_on_observe("approval/asked");
    let s = service(&sink, ApprovalPolicy::Ask);
    s.add_answerer(Scope::Global, fixed(ApprovalOutcome::AllowedOnce))
        .keep();
    let out = s.request(req("a")).await.unwrap();
    assert_eq!(out, ApprovalOutcome::AllowedOnce);
    assert_pair(&sink, "allowed-once");
    assert!(cap.warnings().iter().any(|w| w.contains("observer")));
}

#[tokio::test]
async fn apr_15_observer_failure_on_decided_is_contained_and_warned() {
    let cap = Capture::default();
    let _g = tracing::subscriber::set_default(cap.clone());
    let sink = FakeSink::in_turn();
    sink.throw_on_observe("approval/decided");
    let s = service(&sink, ApprovalPolicy::Ask);
    s.add_answerer(Scope::Global, fixed(ApprovalOutcome::Rejected))
        .keep();
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::Rejected
    );
    assert_pair(&sink, "rejected");
    assert!(cap.warnings().iter().any(|w| w.contains("observer")));
}

#[tokio::test]
async fn apr_16_append_failure_fails_the_request_with_that_error() {
    let sink = FakeSink::in_turn();
    sink.fail_appends(Some("disk full"));
    let s = service(&sink, ApprovalPolicy::Ask);
    let count = Arc::new(AtomicUsize::new(0));
    s.add_answerer(
        Scope::Global,
        counted(&count, Some(ApprovalOutcome::AllowedOnce)),
    )
    .keep();
    let err = s.request(req("a")).await.unwrap_err();
    assert_eq!(err, GuardError::audit("disk full"));
    assert!(sink.audit().is_empty());
    assert_eq!(
        count.load(Ordering::SeqCst),
        0,
        "nothing decided without an asked event"
    );
}

#[tokio::test]
async fn apr_16b_a_decision_that_cannot_be_logged_is_not_returned() {
    let sink = FakeSink::in_turn();
    sink.fail_on("approval/decided");
    let s = service(&sink, ApprovalPolicy::Ask);
    s.add_answerer(Scope::Global, fixed(ApprovalOutcome::AllowedOnce))
        .keep();
    let err = s.request(req("a")).await.unwrap_err();
    assert!(
        matches!(err, GuardError::Audit { message, .. } if message.contains("approval/decided"))
    );
}

#[tokio::test]
async fn apr_17_first_answer_wins_and_the_second_never_runs() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    let second = Arc::new(AtomicUsize::new(0));
    s.add_answerer(Scope::Global, fixed(ApprovalOutcome::AllowedOnce))
        .keep();
    s.add_answerer(
        Scope::Global,
        counted(&second, Some(ApprovalOutcome::Rejected)),
    )
    .keep();
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::AllowedOnce
    );
    assert_eq!(second.load(Ordering::SeqCst), 0);
    assert_pair(&sink, "allowed-once");
}

#[tokio::test]
async fn apr_18_a_delegating_answerer_reaches_unavailable() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    let count = Arc::new(AtomicUsize::new(0));
    s.add_answerer(Scope::Global, counted(&count, None)).keep();
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::Unavailable
    );
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

struct Recorder {
    label: &'static str,
    log: Arc<Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl Answerer for Recorder {
    async fn answer(
        &self,
        req: &ApprovalRequest,
        next: AnswerNext<'_>,
    ) -> Result<ApprovalOutcome, GuardError> {
        self.log
            .lock()
            .push(format!("{}:{}", self.label, req.agent));
        next.run(req).await
    }
}

#[tokio::test]
async fn apr_19_global_then_scoped_and_never_a_foreign_scope() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let rec = |label| Recorder {
        label,
        log: log.clone(),
    };
    s.add_answerer(Scope::Global, rec("global")).keep();
    s.add_answerer(Scope::Agent(agent("A")), rec("scoped-A"))
        .keep();
    s.add_answerer(Scope::Agent(agent("B")), rec("scoped-B"))
        .keep();
    assert_eq!(
        s.request(req("A")).await.unwrap(),
        ApprovalOutcome::Unavailable
    );
    assert_eq!(*log.lock(), ["global:A", "scoped-A:A"]);
    log.lock().clear();
    assert_eq!(
        s.request(req("B")).await.unwrap(),
        ApprovalOutcome::Unavailable
    );
    assert_eq!(*log.lock(), ["global:B", "scoped-B:B"]);
}

#[tokio::test]
async fn apr_20_a_scoped_answerer_sees_exactly_the_requests_agent() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    let keys: Arc<Mutex<Vec<String>>> = Arc::default();
    let k2 = keys.clone();
    s.add_answerer(
        Scope::Agent(agent("A")),
        answer_fn(move |r| {
            k2.lock().push(r.agent.to_string());
            async { Ok(None) }
        }),
    )
    .keep();
    s.request(req("A")).await.unwrap();
    s.request(req("Z")).await.unwrap();
    assert_eq!(*keys.lock(), ["A"]);
}

#[tokio::test]
async fn apr_21_an_answerer_error_is_unavailable() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    s.add_answerer(
        Scope::Global,
        answer_fn(|_| async { Err(GuardError::answerer("transport died")) }),
    )
    .keep();
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::Unavailable
    );
    assert_pair(&sink, "unavailable");
}

#[tokio::test]
async fn apr_22_an_outcome_outside_the_vocabulary_normalizes_to_unavailable() {
    assert_eq!(
        ApprovalOutcome::normalize("yolo"),
        ApprovalOutcome::Unavailable
    );
    assert_eq!(
        ApprovalOutcome::normalize("allowed-once"),
        ApprovalOutcome::AllowedOnce
    );
    assert!(serde_json::from_value::<ApprovalOutcome>(json!("yolo")).is_err());
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    // An answerer bridging a UI that sends raw strings.
    s.add_answerer(
        Scope::Global,
        answer_fn(|_| async { Ok(Some(ApprovalOutcome::normalize("yolo"))) }),
    )
    .keep();
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::Unavailable
    );
    assert_pair(&sink, "unavailable");
}

#[tokio::test]
async fn apr_23_an_aborted_signal_is_cancelled_without_asking() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    let count = Arc::new(AtomicUsize::new(0));
    s.add_answerer(
        Scope::Global,
        counted(&count, Some(ApprovalOutcome::AllowedOnce)),
    )
    .keep();
    let ctl = AbortController::new();
    ctl.cancel();
    let out = s.request(req("a").with_signal(ctl.signal())).await.unwrap();
    assert_eq!(out, ApprovalOutcome::Cancelled);
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert_pair(&sink, "cancelled");
}

/// An answerer that waits for `release`, then answers `late` (or fails, or panics).
fn pending(
    release: Arc<tokio::sync::Notify>,
    late: Result<ApprovalOutcome, &'static str>,
) -> impl Answerer {
    answer_fn(move |_| {
        let release = release.clone();
        async move {
            release.notified().await;
            match late {
                Ok(o) => Ok(Some(o)),
                Err("panic") => panic!("late panic"),
                Err(m) => Err(GuardError::answerer(m)),
            }
        }
    })
}

#[tokio::test(start_paused = true)]
async fn apr_24_abort_while_pending_cancels_at_once_and_drops_the_late_answer() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    let release = Arc::new(tokio::sync::Notify::new());
    s.add_answerer(
        Scope::Global,
        pending(release.clone(), Ok(ApprovalOutcome::AllowedOnce)),
    )
    .keep();
    let ctl = AbortController::new();
    let task = tokio::spawn({
        let s = s.clone();
        let r = req("a").with_signal(ctl.signal());
        async move { s.request(r).await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    ctl.cancel();
    let out = tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .expect("resolves without the answer")
        .unwrap()
        .unwrap();
    assert_eq!(out, ApprovalOutcome::Cancelled);
    release.notify_waiters();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_pair(&sink, "cancelled");
}

#[tokio::test(start_paused = true)]
async fn apr_25_a_late_failure_after_abort_is_dropped() {
    for late in [Err("transport died"), Err("panic")] {
        let sink = FakeSink::in_turn();
        let s = service(&sink, ApprovalPolicy::Ask);
        let release = Arc::new(tokio::sync::Notify::new());
        s.add_answerer(Scope::Global, pending(release.clone(), late))
            .keep();
        let ctl = AbortController::new();
        let fut = s.request(req("a").with_signal(ctl.signal()));
        let abort = async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            ctl.cancel();
            release.notify_waiters();
        };
        let (out, ()) = tokio::join!(fut, abort);
        assert_eq!(out.unwrap(), ApprovalOutcome::Cancelled);
        assert_pair(&sink, "cancelled");
    }
}

#[tokio::test]
async fn apr_26_a_live_signal_and_a_rejection_is_rejected() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    s.add_answerer(Scope::Global, fixed(ApprovalOutcome::Rejected))
        .keep();
    let ctl = AbortController::new();
    assert_eq!(
        s.request(req("a").with_signal(ctl.signal())).await.unwrap(),
        ApprovalOutcome::Rejected
    );
}

#[tokio::test]
async fn apr_27_two_requests_have_distinct_ids() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    s.request(req("a")).await.unwrap();
    s.request(req("a")).await.unwrap();
    let asked: Vec<Value> = sink
        .audit()
        .into_iter()
        .filter(|(t, _)| t == "approval/asked")
        .map(|(_, d)| d["id"].clone())
        .collect();
    assert_eq!(asked.len(), 2);
    assert_ne!(asked[0], asked[1]);
}

#[tokio::test]
async fn apr_28_unloading_the_answerer_makes_the_question_unavailable() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    let h = s.add_answerer(Scope::Global, fixed(ApprovalOutcome::AllowedOnce));
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::AllowedOnce
    );
    h.dispose();
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::Unavailable
    );
}

#[tokio::test]
async fn apr_29_the_policy_folds_from_the_sessions_events() {
    assert_eq!(effective_approval_policy(std::iter::empty()), None);
    let sink = FakeSink::new();
    let session = AuditSession::new(sink.clone());
    assert_eq!(session.override_policy(), None);
    session.write_policy(ApprovalPolicy::Never).await.unwrap();
    session.write_policy(ApprovalPolicy::Ask).await.unwrap();
    let events = sink.events();
    let folded = effective_approval_policy(events.iter().map(|(t, d)| (t.as_str(), d)));
    assert_eq!(folded, Some(ApprovalPolicy::Ask));
    let (ty, data) = events.last().unwrap();
    assert_eq!(ty, "approval/policy");
    assert_eq!(data.value(), &json!({"policy": "ask"}));
    assert_eq!(session.override_policy(), Some(ApprovalPolicy::Ask));
    // A resumed session starts from the fold.
    let resumed = AuditSession::resumed(sink.clone(), folded);
    assert_eq!(resumed.override_policy(), Some(ApprovalPolicy::Ask));
    // An invalid policy value in a log is not an override.
    let bad = Json::from_shallow(json!({"policy": "always"}));
    let never = Json::from_shallow(json!({"policy": "never"}));
    assert_eq!(
        effective_approval_policy([("approval/policy", &never), ("approval/policy", &bad)]),
        Some(ApprovalPolicy::Never)
    );
}

#[tokio::test]
async fn apr_30_a_policy_outside_the_vocabulary_fails_before_appending() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    let err = s.set_policy_str(&agent("a"), "always").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "approval policy must be one of \"ask\" or \"never\""
    );
    assert_eq!(
        err.to_string(),
        dsh_core::codes::messages::APPROVAL_POLICY_VALUES
    );
    assert!(sink.audit().is_empty());
    assert!("always".parse::<ApprovalPolicy>().is_err());
}

#[tokio::test]
async fn apr_31_a_service_built_without_config_asks() {
    let sink = FakeSink::in_turn();
    let s = ApprovalService::new(ApprovalConfig::default());
    s.attach_session(Scope::Global, AuditSession::new(sink.clone()))
        .keep();
    s.add_answerer(Scope::Global, fixed(ApprovalOutcome::AllowedOnce))
        .keep();
    assert_eq!(s.default_policy(), ApprovalPolicy::Ask);
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::AllowedOnce
    );
}

struct PanicsAtOnce;

#[async_trait::async_trait]
impl Answerer for PanicsAtOnce {
    async fn answer(
        &self,
        _: &ApprovalRequest,
        _: AnswerNext<'_>,
    ) -> Result<ApprovalOutcome, GuardError> {
        panic!("answerer threw synchronously")
    }
}

#[tokio::test]
async fn apr_32_a_panicking_answerer_is_unavailable() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    s.add_answerer(Scope::Global, PanicsAtOnce).keep();
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::Unavailable
    );
    assert_pair(&sink, "unavailable");
}

#[tokio::test]
async fn apr_33_configured_never_rejects_without_consulting_and_audits() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Never);
    let count = Arc::new(AtomicUsize::new(0));
    s.add_answerer(
        Scope::Global,
        counted(&count, Some(ApprovalOutcome::AllowedOnce)),
    )
    .keep();
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::Rejected
    );
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert_pair(&sink, "rejected");
}

#[tokio::test]
async fn apr_34_an_answerer_registered_before_never_is_still_rejected() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    let count = Arc::new(AtomicUsize::new(0));
    s.add_answerer(
        Scope::Global,
        counted(&count, Some(ApprovalOutcome::AllowedOnce)),
    )
    .keep();
    s.set_default_policy(ApprovalPolicy::Never);
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::Rejected
    );
    assert_eq!(count.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn apr_35_a_prepended_answerer_cannot_bypass_never() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Never);
    let count = Arc::new(AtomicUsize::new(0));
    s.prepend_answerer(
        Scope::Global,
        counted(&count, Some(ApprovalOutcome::AllowedOnce)),
    )
    .keep();
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::Rejected
    );
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert_pair(&sink, "rejected");
}

#[tokio::test]
async fn apr_36_the_session_override_outranks_the_configured_default() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Never);
    s.add_answerer(Scope::Global, fixed(ApprovalOutcome::AllowedOnce))
        .keep();
    let a = agent("a");
    assert_eq!(s.override_of(&a), None);
    assert_eq!(s.policy_for(&a), ApprovalPolicy::Never);
    s.set_policy(&a, ApprovalPolicy::Ask).await.unwrap();
    assert_eq!(s.override_of(&a), Some(ApprovalPolicy::Ask));
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::AllowedOnce
    );
    s.set_policy(&a, ApprovalPolicy::Never).await.unwrap();
    assert_eq!(
        s.request(req("a")).await.unwrap(),
        ApprovalOutcome::Rejected
    );
}

#[tokio::test]
async fn apr_37_a_live_switch_injects_one_notice_and_a_repeat_none() {
    let sink = FakeSink::in_turn();
    let s = service(&sink, ApprovalPolicy::Ask);
    let a = agent("a");
    let first = s.set_policy(&a, ApprovalPolicy::Never).await.unwrap();
    let second = s.set_policy(&a, ApprovalPolicy::Never).await.unwrap();
    assert_eq!(s.policy_for(&a), ApprovalPolicy::Never);
    assert!(second.is_none());
    let notice = first.expect("one notice");
    let text = notice.first_text().unwrap();
    assert!(text.contains("from \"ask\" to \"never\""), "{text}");
    assert!(text.contains("changed by the user"), "{text}");
    assert_eq!(
        notice.source.value(),
        &json!({"kind": "plugin", "plugin": "user-approval"})
    );
    let policies = sink
        .audit()
        .into_iter()
        .filter(|(t, _)| t == "approval/policy")
        .count();
    assert_eq!(policies, 1);
}

#[tokio::test]
async fn apr_38_the_prompt_context_states_each_policy() {
    let s = ApprovalService::new(ApprovalConfig::default());
    let ask_sink = FakeSink::new();
    let never_sink = FakeSink::new();
    s.attach_session(Scope::Agent(agent("asker")), AuditSession::new(ask_sink))
        .keep();
    s.attach_session(
        Scope::Agent(agent("refuser")),
        AuditSession::resumed(never_sink, Some(ApprovalPolicy::Never)),
    )
    .keep();
    assert_eq!(s.policy_context(Some(&agent("asker"))), ASK_POLICY_TEXT);
    assert_eq!(s.policy_context(Some(&agent("refuser"))), NEVER_POLICY_TEXT);
    assert_eq!(s.policy_context(None), "");
    assert!(ASK_POLICY_TEXT.contains("fails closed"));
    assert!(NEVER_POLICY_TEXT.contains("rejected automatically"));
    assert!(NEVER_POLICY_TEXT.contains("sandbox escalation"));
    assert_eq!(PolicyPrompt::NAME, "approval:policy");
}

#[tokio::test]
async fn apr_39_the_prompt_follows_the_latest_policy_byte_for_byte() {
    let sink = FakeSink::new();
    let s = service(&sink, ApprovalPolicy::Ask);
    let a = agent("a");
    let prompt = s.prompt_context();
    let t1 = prompt.text(Some(&a)).unwrap();
    assert_eq!(t1, prompt.text(Some(&a)).unwrap());
    s.set_policy(&a, ApprovalPolicy::Never).await.unwrap();
    let t2 = prompt.text(Some(&a)).unwrap();
    assert_ne!(t1, t2);
    assert_eq!(t2, NEVER_POLICY_TEXT);
    assert_eq!(t2, prompt.text(Some(&a)).unwrap());
    s.set_policy(&a, ApprovalPolicy::Ask).await.unwrap();
    assert_eq!(prompt.text(Some(&a)).unwrap(), t1);
}

#[tokio::test]
async fn apr_40_unloading_the_service_removes_the_prompt_context() {
    let sink = FakeSink::new();
    let s = service(&sink, ApprovalPolicy::Ask);
    let prompt = s.prompt_context();
    assert!(prompt.text(Some(&agent("a"))).is_some());
    drop(s);
    assert_eq!(prompt.text(Some(&agent("a"))), None);
}

#[tokio::test]
async fn nested_scopes_route_to_a_parent_scopes_answerer_and_session_with_a_registry() {
    let registry = dsh_core::ToolRegistry::new();
    registry.declare_scope(&agent("parent"), None).keep();
    registry
        .declare_scope(&agent("child"), Some(&agent("parent")))
        .keep();
    let s = ApprovalService::with_registry(ApprovalConfig::default(), registry);
    let sink = FakeSink::in_turn();
    s.attach_session(
        Scope::Agent(agent("parent")),
        AuditSession::new(sink.clone()),
    )
    .keep();
    s.add_answerer(
        Scope::Agent(agent("parent")),
        fixed(ApprovalOutcome::AllowedOnce),
    )
    .keep();
    assert_eq!(
        s.request(req("child")).await.unwrap(),
        ApprovalOutcome::AllowedOnce
    );
    assert_pair(&sink, "allowed-once");
    // An agent outside the tree has no session.
    assert!(matches!(
        s.request(req("stranger")).await,
        Err(GuardError::NoSession(_))
    ));
}
