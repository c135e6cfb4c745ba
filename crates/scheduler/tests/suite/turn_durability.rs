//! The turn driver's framing is queued, not each event synced on its own (issue: a tool step of
//! one call in a log on disk synced five times). What must still be durable, checked where the
//! one who relies on it looks, a sink that keeps every write standing for the disk:
//! - the messages the model is sent, when the source is asked for the step's message (the log
//!   replays exactly what the model saw);
//! - the step's assistant message and the call's `tool/call`, when the body runs (spec S4);
//! - everything, the last message included, when the turn-stopping hook runs (it may read
//!   the log) and when the turn returns.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{ContextMessage, Json, Signal, ToolDefinition, ToolOutput};
use dsh_guard::Hooks;
use dsh_scheduler::{
    Next, SchedulerError, SourceContext, Sourced, StepSource, TurnDriver, TurnEnd,
};
use dsh_session::{Header, Session};
use parking_lot::Mutex;

use super::support::*;

/// The sink stands for the disk: these read what it holds.
impl Writes {
    /// Whether a line of `kind` holding `needle` is on disk.
    fn has(&self, kind: &str, needle: &str) -> bool {
        let kind = format!(r#"{{"type":"{kind}","#);
        self.0
            .lock()
            .iter()
            .flat_map(|w| w.lines())
            .any(|l| l.starts_with(&kind) && l.contains(needle))
    }
    fn holds(&self, needle: &str) -> bool {
        self.0.lock().iter().any(|w| w.contains(needle))
    }
    fn lines(&self) -> usize {
        self.0.lock().iter().map(|w| w.lines().count()).sum()
    }
}

/// A tool whose body notes, for each run, whether its step's assistant message and its own
/// `tool/call` were on disk.
fn probe(disk: &Writes, late: &Arc<Mutex<Vec<String>>>) -> ToolDefinition {
    let (disk, late) = (disk.clone(), late.clone());
    ToolDefinition::builder("probe", "checks what is on disk when it runs")
        .output(ToolOutput::string())
        .execute(move |ctx| {
            let id = ctx.exec().call_id().to_owned();
            if !disk.has("tool/call", &format!(r#""callId":"{id}""#)) {
                late.lock().push(format!("{id}: its tool/call"));
            }
            if !disk.has("assistant/message", &format!(r#""id":"{id}""#)) {
                late.lock()
                    .push(format!("{id}: its step's assistant message"));
            }
            async { Ok(Json::string("ok")) }
        })
        .build()
        .unwrap()
}

/// A model stand-in: calls `probe` (`c1`, `c2`, ...) once a step for `calls` steps, then
/// answers with text. When asked for a step's message it notes which of the messages that
/// request must carry (the prompt, the last call's context, the steering) is missing from the
/// history the request is built from or from the disk; the stopping hook notes whether the
/// last message is on disk, and sends `steer` once.
struct Model {
    disk: Writes,
    calls: u32,
    missing: Vec<String>,
    steer: Option<&'static str>,
    steered: Option<&'static str>,
}

impl Model {
    fn expect_sent(&mut self, cx: &SourceContext<'_>, text: &str) {
        let in_history = cx.session.events().iter().any(|(_, e)| {
            e.event_type() == "user/message" && e.data().value().to_string().contains(text)
        });
        if !in_history || !self.disk.has("user/message", text) {
            self.missing.push(format!(
                "step {}: {text:?} (in the history: {in_history})",
                cx.step
            ));
        }
    }
}

#[async_trait]
impl StepSource for Model {
    async fn next_message(&mut self, cx: &SourceContext<'_>) -> Result<Next, SchedulerError> {
        if cx.step == 1 {
            self.expect_sent(cx, "prompt text");
        } else if cx.step <= self.calls + 1 {
            self.expect_sent(cx, &format!("ctx-c{}", cx.step - 1));
        }
        if let Some(steer) = self.steered.take() {
            self.expect_sent(cx, steer);
        }
        let message = if cx.step <= self.calls {
            let id = format!("c{}", cx.step);
            assistant(&[(id.as_str(), "probe", "{}")])
        } else {
            text_reply(&format!("done at step {}", cx.step))
        };
        Ok(Next::Message(Sourced {
            message,
            usage: None,
            source_event_seqs: Vec::new(),
            end: None,
        }))
    }

    async fn stopping(
        &mut self,
        cx: &SourceContext<'_>,
    ) -> Result<Option<TurnEnd>, SchedulerError> {
        if !self
            .disk
            .has("assistant/message", &format!("done at step {}", cx.step))
        {
            self.missing.push(format!(
                "step {}: the last message, at the stopping hook",
                cx.step
            ));
        }
        if let Some(steer) = self.steer.take() {
            cx.inbox.push(ContextMessage::plugin_text("steer", steer));
            self.steered = Some(steer);
        }
        Ok(None)
    }
}

async fn run(calls: u32, steer: Option<&'static str>) -> (Writes, Session, Model, Vec<String>) {
    let disk = Writes::default();
    let late: Arc<Mutex<Vec<String>>> = Arc::default();
    let hooks = Hooks::new();
    post_ctx_per_call(&hooks);
    let registry = dsh_core::ToolRegistry::new();
    registry.register(probe(&disk, &late)).unwrap().keep();
    let rt = runtime(&registry, &hooks);
    let session = Session::with_sink(Header::new("framing", "/tmp"), disk.clone()).unwrap();
    let mut driver = TurnDriver::new(rt, session.clone(), None);
    let mut model = Model {
        disk: disk.clone(),
        calls,
        missing: Vec::new(),
        steer,
        steered: None,
    };
    let prompt = vec![ContextMessage::plugin_text("user", "prompt text")];
    let report = driver
        .run_prompted(prompt, &mut model, Signal::never())
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Completed);
    let late = late.lock().clone();
    (disk, session, model, late)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_l3_queued_framing_is_durable_wherever_someone_relies_on_it() {
    let (disk, session, model, late) = run(3, None).await;
    assert!(late.is_empty(), "bodies ran before: {late:?}");
    assert!(model.missing.is_empty(), "{:?}", model.missing);
    // The turn returns with every event on disk: the header and each event, one line each.
    assert_eq!(disk.lines(), 1 + session.events().len());
    assert_paired(&session);
    // The steps' contexts reached the next request: they were asked about above.
    assert!(disk.holds("ctx-c3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_56_steering_from_the_stopping_hook_is_durable_before_the_next_request() {
    let (disk, session, model, late) = run(1, Some("steering text")).await;
    assert!(late.is_empty(), "bodies ran before: {late:?}");
    assert!(model.missing.is_empty(), "{:?}", model.missing);
    assert_eq!(disk.lines(), 1 + session.events().len());
    assert!(disk.holds("steering text"));
    assert_paired(&session);
}
