//! Append-time invariant checks: the approval audit (APR-41..46) and Code Mode dispatch records
//! (LOG-21..27). A rejected event is never appended and never indexed.

use dsh_session::{Event, InvariantChecker, OpenOptions, Session, SessionError};
use serde_json::{Value, json};

use super::support::{completed, j, put, tempdir};

fn asked(id: &str, tool: &str) -> Event {
    Event::other("approval/asked", j(json!({"id": id, "toolName": tool})))
}

fn decided(id: &str, outcome: &str) -> Event {
    Event::other("approval/decided", j(json!({"id": id, "outcome": outcome})))
}

fn policy(p: &str) -> Event {
    Event::other("approval/policy", j(json!({"policy": p})))
}

fn start(root: &str, parent: &str, sub: &str) -> Event {
    Event::code_dispatch_start(root, parent, sub, "echo", j(json!({})))
}

fn checked() -> Session {
    let s = Session::in_memory("inv");
    s.enable_invariants().expect("enables on an empty session");
    s
}

async fn rejected(session: &Session, event: Event) -> String {
    let before = session.next_seq();
    let err = session.append(event).await.expect_err("rejected");
    assert!(matches!(err, SessionError::Invariant(_)), "{err}");
    assert_eq!(
        session.next_seq(),
        before,
        "a rejected event is not appended"
    );
    err.to_string()
}

fn types(session: &Session) -> Vec<String> {
    session
        .events()
        .iter()
        .map(|(_, e)| e.event_type().to_owned())
        .collect()
}

#[tokio::test]
async fn apr_41_audit_pair_and_policy_inside_a_turn_are_accepted() {
    let s = checked();
    put(&s, Event::turn_start(1)).await;
    put(&s, asked("a1", "bash")).await;
    put(&s, decided("a1", "allowed-once")).await;
    put(&s, policy("never")).await;
    assert_eq!(
        types(&s),
        [
            "turn/start",
            "approval/asked",
            "approval/decided",
            "approval/policy"
        ]
    );
}

#[tokio::test]
async fn apr_42_an_open_question_is_rebuilt_when_the_checker_registers_late() {
    let s = Session::in_memory("late");
    put(&s, Event::turn_start(1)).await;
    put(&s, asked("resumed", "pwsh")).await;
    s.enable_invariants().expect("existing events are valid");
    put(&s, decided("resumed", "cancelled")).await;
    put(&s, Event::turn_end(1, completed())).await;
}

#[test]
fn apr_43_events_of_a_session_no_store_knows_are_checked_as_published() {
    let mut checker = InvariantChecker::new();
    checker.observe(&Event::turn_start(1)).expect("turn");
    checker.observe(&asked("0", "pwsh")).expect("asked");
    checker.observe(&decided("0", "rejected")).expect("decided");
    let err = checker
        .observe(&decided("0", "rejected"))
        .expect_err("already decided");
    assert!(err.to_string().contains("no matching approval/asked"));
}

#[tokio::test]
async fn apr_44_asked_or_decided_with_no_open_turn_is_rejected() {
    let s = checked();
    let m = rejected(&s, asked("ask", "pwsh")).await;
    assert!(m.contains("outside any open turn"), "{m}");
    let m = rejected(&s, decided("ask", "rejected")).await;
    assert!(m.contains("outside any open turn"), "{m}");
    put(&s, Event::turn_start(1)).await;
    put(&s, Event::turn_end(1, completed())).await;
    let m = rejected(&s, asked("ask", "pwsh")).await;
    assert!(
        m.contains("approval/asked appended outside any open turn"),
        "{m}"
    );
}

#[tokio::test]
async fn apr_45_a_late_checker_refuses_a_log_with_an_ask_after_turn_end() {
    let s = Session::in_memory("late");
    put(&s, Event::turn_start(1)).await;
    put(&s, Event::turn_end(1, completed())).await;
    put(&s, asked("stray", "pwsh")).await;
    let err = s.enable_invariants().expect_err("registration fails");
    assert!(err.to_string().contains("outside any open turn"), "{err}");
    // Not enabled: the session still takes appends unchecked.
    put(&s, asked("stray-2", "")).await;

    let dir = tempdir();
    let path = dir.path().join("stray.jsonl");
    let (file, _) = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect("opens");
    put(&file, asked("stray", "pwsh")).await;
    file.close().await.expect("closes");
    let before = std::fs::read(&path).expect("read");
    let err = Session::open_jsonl(&path, OpenOptions::new().invariants(true))
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("outside any open turn"), "{err}");
    assert_eq!(std::fs::read(&path).expect("read"), before);
}

#[tokio::test]
async fn apr_46_invalid_audit_events_are_rejected_with_their_reasons() {
    let s = checked();
    put(&s, Event::turn_start(1)).await;
    assert!(
        rejected(&s, asked("ask-1", ""))
            .await
            .contains("toolName must be non-empty")
    );
    put(&s, asked("ask-1", "bash")).await;
    assert!(
        rejected(&s, asked("ask-1", "bash"))
            .await
            .contains(r#"repeated open id "ask-1""#)
    );
    assert!(
        rejected(&s, decided("missing", "rejected"))
            .await
            .contains("no matching approval/asked")
    );
    assert!(
        rejected(&s, decided("ask-1", "maybe"))
            .await
            .contains(r#"unknown outcome "maybe""#)
    );
    assert!(
        rejected(&s, policy("always"))
            .await
            .contains(r#"unknown policy "always""#)
    );
    // Every rejection left the trace alone: ask-1 is still open and can be decided.
    put(&s, decided("ask-1", "allowed-once")).await;
    assert_eq!(
        types(&s),
        ["turn/start", "approval/asked", "approval/decided"]
    );
}

#[tokio::test]
async fn log_21_a_dispatch_record_outside_any_turn_is_rejected_then_accepted_inside_one() {
    let s = checked();
    let m = rejected(&s, start("root", "root", "child")).await;
    assert!(
        m.contains("tool/code-dispatch-start appended outside any open turn"),
        "{m}"
    );
    put(&s, Event::turn_start(1)).await;
    put(&s, start("root", "root", "child")).await;
}

#[tokio::test]
async fn log_22_a_rejected_record_is_never_indexed() {
    let s = checked();
    rejected(&s, start("root", "root", "child")).await;
    put(&s, Event::turn_start(1)).await;
    put(&s, start("other-root", "other-root", "child")).await;
}

#[tokio::test]
async fn log_23_a_parent_must_belong_to_the_root_and_the_check_runs_before_the_append() {
    let s = checked();
    put(&s, Event::turn_start(1)).await;
    put(
        &s,
        Event::code_dispatch_start("root", "root", "child", "run_code", j(json!({}))),
    )
    .await;
    put(&s, start("root", "child", "grandchild")).await;
    let m = rejected(&s, start("another-root", "child", "invalid-grandchild")).await;
    assert!(
        m.contains("parentCallId child does not belong to rootCallId another-root"),
        "{m}"
    );
    let subs: Vec<Value> = s
        .events()
        .iter()
        .map(|(_, e)| {
            e.data()
                .value()
                .get("subCallId")
                .cloned()
                .unwrap_or(Value::Null)
        })
        .collect();
    assert!(!subs.contains(&json!("invalid-grandchild")));
}

#[tokio::test]
async fn log_24_dispatch_ids_are_non_empty_and_a_sub_call_keeps_its_root() {
    let s = checked();
    put(&s, Event::turn_start(1)).await;
    let m = rejected(&s, start("", "root", "child")).await;
    assert!(m.contains("must carry non-empty rootCallId"), "{m}");
    put(&s, start("root", "root", "child")).await;
    let m = rejected(&s, start("other-root", "other-root", "child")).await;
    assert!(m.contains("changed rootCallId for subCallId child"), "{m}");
    let settled = Event::code_dispatch(
        "root",
        "root",
        "child",
        "echo",
        j(json!({})),
        false,
        &([])[..],
    );
    put(&s, settled).await;
}

#[test]
fn log_25_a_record_of_a_session_no_store_knows_is_indexed_without_violation() {
    let mut checker = InvariantChecker::new();
    checker.observe(&Event::turn_start(1)).expect("turn");
    checker
        .observe(&start("root", "root", "child"))
        .expect("no violation");
    let err = checker
        .observe(&start("else", "else", "child"))
        .expect_err("indexed");
    assert!(err.to_string().contains("changed rootCallId"));
}

#[tokio::test]
async fn log_26_a_late_checker_replays_a_valid_enclosed_record() {
    let s = Session::in_memory("late");
    put(&s, Event::turn_start(1)).await;
    let done = Event::code_dispatch(
        "root",
        "root",
        "child",
        "echo",
        j(json!({})),
        false,
        &([])[..],
    );
    put(&s, done).await;
    put(&s, Event::turn_end(1, completed())).await;
    s.enable_invariants().expect("replayed records are valid");
}

#[tokio::test]
async fn log_27_a_late_checker_refuses_an_unenclosed_record() {
    let s = Session::in_memory("late");
    put(&s, start("root", "root", "child")).await;
    let err = s.enable_invariants().expect_err("registration fails");
    assert!(err.to_string().contains("outside any open turn"), "{err}");
}
