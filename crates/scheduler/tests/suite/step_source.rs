//! The turn driver over a [`StepSource`]: the seam the agent loop plugs a model into. A source
//! logs what it streamed, and the driver logs its message with those events as its
//! `sourceEventSeqs` and its usage; a source's failure ends the turn with reason `error`.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use async_trait::async_trait;
use dsh_core::{Json, Signal};
use dsh_guard::Hooks;
use dsh_scheduler::{Next, SchedulerError, SourceContext, Sourced, StepSource, TurnEnd};
use dsh_session::{Event, SessionError};
use serde_json::json;

use super::support::*;

/// A model stand-in: logs one stream event per step, then answers from its list; fails when
/// the list holds `None`.
struct Streaming {
    replies: Vec<Option<Json>>,
    asked: Vec<(u32, u32)>,
}

#[async_trait]
impl StepSource for Streaming {
    async fn next_message(&mut self, cx: &SourceContext<'_>) -> Result<Next, SchedulerError> {
        self.asked.push((cx.turn, cx.step));
        if self.replies.is_empty() {
            return Ok(Next::Stop);
        }
        let Some(message) = self.replies.remove(0) else {
            return Err(SessionError::Closed.into());
        };
        let chunk = Event::other(
            "text-chunks",
            Json::from_shallow(
                json!({"turn": cx.turn, "step": cx.step, "index": 0, "texts": ["a", "b"]}),
            ),
        );
        let seq = cx.session.append(chunk).await?;
        Ok(Next::Message(Sourced {
            message,
            usage: Some(Json::from_shallow(
                json!({"inputTokens": 7, "outputTokens": 4}),
            )),
            source_event_seqs: vec![seq, seq + 1],
            end: None,
        }))
    }
}

#[tokio::test]
async fn a_source_streams_each_step_and_its_message_points_at_what_it_streamed() {
    let registry = dsh_core::ToolRegistry::new();
    registry
        .register(counted("echo", "hi", &Default::default()))
        .unwrap()
        .keep();
    let rt = runtime(&registry, &Hooks::new());
    let mut d = driver(&rt, 4);
    let session = d.session().clone();
    let mut source = Streaming {
        replies: vec![Some(calls_to("echo", 2)), Some(text_reply("done"))],
        asked: Vec::new(),
    };
    let report = d.run_turn_from(&mut source, Signal::never()).await.unwrap();
    assert_eq!(report.end, TurnEnd::Completed);
    assert_eq!(
        source.asked,
        [(1, 1), (1, 2)],
        "asked once per step, in order"
    );
    let messages: Vec<_> = log(&session)
        .into_iter()
        .filter(|(_, e)| e.event_type() == "assistant/message")
        .collect();
    assert_eq!(messages.len(), 2);
    for (_, m) in &messages {
        let seqs = m.source_event_seqs().expect("points at its chunks");
        let (chunk_seq, chunk) = log(&session)
            .into_iter()
            .find(|(s, _)| *s == seqs[0])
            .unwrap();
        assert_eq!(chunk.event_type(), "text-chunks");
        assert_eq!(
            seqs,
            [chunk_seq, chunk_seq + 1],
            "a run of two chunks spans two seqs"
        );
        assert_eq!(m.data().value()["usage"]["outputTokens"], json!(4));
    }
    assert_eq!(result_ids(&session), ["c1", "c2"]);
    assert_paired(&session);
}

#[tokio::test]
async fn a_failing_source_ends_the_turn_with_an_error_reason() {
    let rt = runtime(&dsh_core::ToolRegistry::new(), &Hooks::new());
    let mut d = driver(&rt, 4);
    let session = d.session().clone();
    let mut source = Streaming {
        replies: vec![None],
        asked: Vec::new(),
    };
    let err = d
        .run_turn_from(&mut source, Signal::never())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
    let end = log(&session)
        .into_iter()
        .rfind(|(_, e)| e.event_type() == "turn/end")
        .unwrap()
        .1;
    assert_eq!(end.data().value()["reason"]["kind"], json!("error"));
    assert_eq!(
        types(&session),
        ["turn/start", "step/start", "step/end", "turn/end"]
    );
}

/// A source cancelled mid-stream returns what it has; the turn logs it and ends aborted, in
/// LOOP-17's order (message, step/end, turn/end).
struct CutShort(dsh_core::AbortController);

#[async_trait]
impl StepSource for CutShort {
    async fn next_message(&mut self, _cx: &SourceContext<'_>) -> Result<Next, SchedulerError> {
        self.0.abort(dsh_core::AbortReason::Cancelled(
            dsh_core::CancelCause::User,
        ));
        Ok(Next::Message(Sourced {
            message: Json::from_shallow(json!({
                "role": "assistant",
                "content": [{"type": "text", "text": "partial"}],
                "interrupted": true,
            })),
            usage: None,
            source_event_seqs: Vec::new(),
            end: None,
        }))
    }
}

#[tokio::test]
async fn a_message_cut_short_by_a_cancel_ends_the_turn_aborted() {
    let rt = runtime(&dsh_core::ToolRegistry::new(), &Hooks::new());
    let mut d = driver(&rt, 4);
    let session = d.session().clone();
    let controller = dsh_core::AbortController::new();
    let signal = controller.signal();
    let report = d
        .run_turn_from(&mut CutShort(controller), signal)
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Aborted(dsh_core::CancelCause::User));
    assert_eq!(
        types(&session),
        [
            "turn/start",
            "step/start",
            "assistant/message",
            "step/end",
            "turn/end"
        ]
    );
}
