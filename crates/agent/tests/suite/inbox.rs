//! The inbox, cancel and dispose (LOOP-01..16, 28..32, 58).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use dsh_agent::{AgentError, Cancel, Status};
use dsh_core::CancelCause;

use super::support::*;

#[tokio::test]
async fn loop_01_a_cancel_while_idle_leaves_no_marker_for_the_next_prompt() {
    let rig = rig().await;
    rig.agent.cancel(Cancel::user());
    rig.server.push(say("hi"));
    rig.agent.prompt("first").await.unwrap();
    assert_eq!(rig.user_texts(), ["first"]);
    assert_eq!(rig.count("turn/end"), 1);
    assert_eq!(rig.reasons(), vec![completed()]);
}

#[tokio::test]
async fn loop_02_a_cancel_keeping_the_inbox_right_after_a_send_ends_its_turn_unlogged() {
    let rig = rig().await;
    rig.agent.send("follow-up").await.unwrap();
    rig.agent.cancel(Cancel::keeping_inbox());
    rig.agent.idle().await;
    assert!(rig.agent.next_turn_inbox().is_empty());
    assert!(rig.user_texts().is_empty());
    assert_eq!(rig.bodies().len(), 0);
    assert_eq!(rig.reasons(), vec![aborted("user")]);
    rig.server.push(say("ok"));
    rig.agent.prompt("later").await.unwrap();
    assert_eq!(rig.bodies().len(), 1);
}

#[tokio::test]
async fn loop_03_a_kept_inbox_waits_for_the_next_send_and_then_runs_in_order() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.agent.send("active").await.unwrap();
    rig.requested(1).await;
    rig.agent.send("preserved").await.unwrap();
    rig.agent.cancel(Cancel::keeping_inbox());
    rig.agent.idle().await;
    assert_eq!(rig.user_texts(), ["active"]);
    assert_eq!(rig.agent.next_turn_inbox().len(), 1);
    assert_eq!(rig.bodies().len(), 1);
    rig.server.push_all([say("a"), say("b")]);
    rig.agent.send("new").await.unwrap();
    rig.agent.idle().await;
    assert_eq!(rig.user_texts(), ["active", "preserved", "new"]);
    assert_eq!(rig.bodies().len(), 3);
}

#[tokio::test]
async fn loop_04_a_send_after_a_cancel_while_the_turn_winds_down_is_latched_and_runs() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.server.push(say("b"));
    rig.agent.send("active").await.unwrap();
    rig.requested(1).await;
    rig.agent.cancel(Cancel::keeping_inbox());
    rig.agent.send("B").await.unwrap();
    rig.agent.idle().await;
    assert_eq!(rig.user_texts(), ["active", "B"]);
    assert_eq!(rig.bodies().len(), 2);
    assert_eq!(rig.reasons(), vec![aborted("user"), completed()]);
}

#[tokio::test]
async fn loop_05_a_second_cancel_clears_the_latch_too() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.agent.send("active").await.unwrap();
    rig.requested(1).await;
    rig.agent.cancel(Cancel::keeping_inbox());
    rig.agent.send("B").await.unwrap();
    rig.agent.cancel(Cancel::user());
    rig.agent.idle().await;
    assert_eq!(rig.user_texts(), ["active"]);
    assert_eq!(rig.bodies().len(), 1);
    rig.server.push(say("c"));
    rig.agent.prompt("C").await.unwrap();
    assert_eq!(rig.user_texts(), ["active", "C"]);
}

#[tokio::test]
async fn loop_08_a_send_after_dispose_is_refused_and_nothing_runs() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.agent.send("active").await.unwrap();
    rig.requested(1).await;
    rig.agent.dispose();
    let refused = rig.agent.send("late").await;
    assert!(matches!(refused, Err(AgentError::Disposed)));
    rig.agent.idle().await;
    assert_eq!(rig.bodies().len(), 1);
    assert_eq!(rig.user_texts(), ["active"]);
    assert_eq!(rig.reasons(), vec![aborted("disposed")]);
}

#[tokio::test]
async fn loop_09_two_sends_then_a_cancel_log_one_empty_aborted_turn() {
    let rig = rig().await;
    rig.agent.send("one").await.unwrap();
    rig.agent.send("two").await.unwrap();
    rig.agent.cancel(Cancel::user());
    rig.agent.idle().await;
    assert!(rig.user_texts().is_empty());
    assert_eq!(rig.count("turn/start"), 1);
    assert_eq!(rig.count("step/start"), 0);
    assert_eq!(rig.reasons(), vec![aborted("user")]);
    assert_eq!(rig.agent.status(), Status::Idle);
}

#[tokio::test]
async fn loop_14_a_cancel_mid_step_drops_the_queued_tail() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.agent.send("go").await.unwrap();
    rig.agent.send("tail").await.unwrap();
    rig.requested(1).await;
    rig.agent.cancel(Cancel::user());
    rig.agent.idle().await;
    assert_eq!(rig.reasons(), vec![aborted("user")]);
    assert_eq!(rig.user_texts(), ["go"]);
    assert_eq!(rig.count("turn/start"), 1);
    assert_eq!(rig.bodies().len(), 1);
    assert!(rig.agent.next_turn_inbox().is_empty());
}

#[tokio::test]
async fn loop_16_a_prompt_after_a_cancelled_turn_settled_runs_to_completion() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.agent.send("first").await.unwrap();
    rig.requested(1).await;
    rig.agent.cancel(Cancel::user());
    rig.agent.idle().await;
    rig.server.push(say("ok"));
    rig.agent.prompt("second").await.unwrap();
    assert_eq!(rig.count("turn/end"), 2);
    assert_eq!(rig.reasons(), vec![aborted("user"), completed()]);
}

#[tokio::test]
async fn loop_28_send_cancel_send_runs_only_the_second() {
    let rig = rig().await;
    rig.server.push(say("b"));
    rig.agent.send("A").await.unwrap();
    rig.agent.cancel(Cancel::user());
    rig.agent.send("B").await.unwrap();
    rig.agent.idle().await;
    assert_eq!(rig.user_texts(), ["B"]);
    assert_eq!(rig.bodies().len(), 1);
    rig.server.push(say("c"));
    rig.agent.prompt("C").await.unwrap();
    assert_eq!(rig.count("turn/end"), 3);
}

#[tokio::test]
async fn loop_29_steering_then_a_cancel_never_reaches_the_log() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.agent.send("go").await.unwrap();
    rig.requested(1).await;
    rig.agent
        .steer(dsh_core::ContextMessage::plugin_text("steer", "turn left"))
        .await
        .unwrap();
    rig.agent.cancel(Cancel::user());
    rig.agent.idle().await;
    let logged = rig.data("user/message");
    assert!(
        logged
            .iter()
            .all(|d| d["content"][0]["text"] != "turn left")
    );
    assert_eq!(rig.count("turn/start"), 1);
    assert!(rig.agent.next_step_inbox().is_empty());
    assert_eq!(rig.agent.status(), Status::Idle);
}

#[tokio::test]
async fn loop_31_the_first_cause_wins() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.agent.send("go").await.unwrap();
    rig.requested(1).await;
    rig.agent.cancel(Cancel {
        keep_inbox: false,
        cause: CancelCause::Parent,
    });
    rig.agent.cancel(Cancel::user());
    rig.agent.idle().await;
    assert_eq!(rig.reasons(), vec![aborted("parent")]);
}

#[tokio::test]
async fn loop_32_a_user_cancel_then_dispose_ends_as_the_user_cancelled() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.agent.send("go").await.unwrap();
    rig.requested(1).await;
    rig.agent.cancel(Cancel::user());
    rig.agent.dispose();
    rig.agent.idle().await;
    assert_eq!(rig.reasons(), vec![aborted("user")]);
}

#[tokio::test]
async fn loop_58_dispose_while_running_drops_the_queued_tail() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.agent.send("go").await.unwrap();
    rig.agent.send("tail").await.unwrap();
    rig.requested(1).await;
    rig.agent.dispose();
    rig.agent.idle().await;
    assert_eq!(rig.reasons(), vec![aborted("disposed")]);
    assert_eq!(rig.count("turn/start"), 1);
    assert_eq!(rig.user_texts(), ["go"]);
    assert_eq!(rig.bodies().len(), 1);
}

#[tokio::test]
async fn loop_06_steering_withdrawn_before_it_is_used_is_never_replayed() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.agent.send("go").await.unwrap();
    rig.requested(1).await;
    let steering = dsh_core::ContextMessage::plugin_text("steer", "withdrawn");
    let id = steering.id.to_string();
    rig.agent.steer(steering).await.unwrap();
    assert!(rig.agent.withdraw(&id).await.unwrap());
    assert!(!rig.agent.withdraw(&id).await.unwrap());
    rig.agent.cancel(Cancel::keeping_inbox());
    rig.agent.idle().await;
    assert_eq!(rig.count("turn/start"), 1);
    assert_eq!(rig.bodies().len(), 1);
    assert!(rig.agent.next_step_inbox().is_empty());
    assert_eq!(rig.agent.status(), Status::Idle);
    let removals = rig
        .data("agent/inbox/spliced")
        .into_iter()
        .filter(|d| d["target"] == "next-step" && d["removedCount"] == 1)
        .count();
    assert_eq!(removals, 1);
}

#[tokio::test]
async fn loop_07_a_send_right_after_a_cancel_is_latched_and_runs() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.server.push(say("b"));
    rig.agent.send("A").await.unwrap();
    rig.requested(1).await;
    rig.agent.cancel(Cancel::user());
    rig.agent.send("B").await.unwrap();
    rig.agent.idle().await;
    assert_eq!(rig.user_texts(), ["A", "B"]);
    assert_eq!(rig.bodies().len(), 2);
}

#[tokio::test]
async fn loop_12_an_idle_listener_that_sends_waits_and_cancels_converges_idle() {
    let rig = rig().await;
    let once = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = std::sync::Arc::new(tokio::sync::Notify::new());
    let signal_done = done.clone();
    rig.agent.on_status(move |agent, status| {
        if status == Status::Idle && !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let agent = agent.clone();
            let done = signal_done.clone();
            tokio::spawn(async move {
                agent.send("new work").await.unwrap();
                let waiter = tokio::spawn({
                    let agent = agent.clone();
                    async move { agent.idle().await }
                });
                agent.cancel(Cancel::user());
                waiter.await.unwrap();
                done.notify_one();
            });
        }
    });
    rig.server.push(say("first"));
    rig.agent.send("first").await.unwrap();
    done.notified().await;
    assert_eq!(rig.agent.status(), Status::Idle);
    assert_eq!(rig.bodies().len(), 1);
    assert_eq!(rig.count("turn/start"), 2);
    rig.server.push(say("later"));
    rig.agent.prompt("later").await.unwrap();
    assert_eq!(rig.bodies().len(), 2);
}

#[tokio::test]
async fn loop_13_an_idle_listener_that_sends_cancels_and_sends_again_runs_the_survivor() {
    let rig = rig().await;
    let once = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    rig.agent.on_status(move |agent, status| {
        if status == Status::Idle && !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let agent = agent.clone();
            tokio::spawn(async move {
                agent.send("doomed").await.unwrap();
                agent.cancel(Cancel::user());
                agent.send("surviving replacement").await.unwrap();
            });
        }
    });
    rig.server.push_all([say("first"), say("survivor")]);
    rig.agent.send("first").await.unwrap();
    wait_until("the survivor ran", || {
        rig.bodies().len() == 2 && rig.count("turn/end") == 3
    })
    .await;
    rig.agent.idle().await;
    assert_eq!(rig.user_texts(), ["first", "surviving replacement"]);
    assert!(rig.agent.next_turn_inbox().is_empty());
}
