//! Tracing a user can turn on: one span per stage of every call, per step and per turn, with the
//! call id, the tool and the outcome as fields.

use std::sync::Arc;

use dsh_core::{PreToolDecision, Signal, ToolRegistry};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::TurnDriver;
use dsh_session::Session;
use dsh_test_support::PreFn;
use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

use super::support::{assistant, runtime, text_reply};

/// Every span opened, as `name field=value ...`, with fields recorded later appended.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<(u64, String)>>>);

/// A span's id and its parent's.
type Edge = (u64, Option<u64>);

/// Each span's parent.
#[derive(Clone, Default)]
struct Parents(Arc<Mutex<Vec<Edge>>>);

impl<S: tracing::Subscriber> Layer<S> for Parents
where
    S: for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent = match attrs.parent() {
            Some(p) => Some(p.into_u64()),
            None if attrs.is_contextual() => ctx.current_span().id().map(Id::into_u64),
            None => None,
        };
        self.0.lock().push((id.into_u64(), parent));
    }
}

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={:?}", field.name(), value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push_str(&format!(" {}={value}", field.name()));
    }
}

impl<S: tracing::Subscriber> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        let mut f = Fields(attrs.metadata().name().to_owned());
        attrs.record(&mut f);
        self.0.lock().push((id.into_u64(), f.0));
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut f = Fields(String::new());
        values.record(&mut f);
        if let Some((_, line)) = self
            .0
            .lock()
            .iter_mut()
            .rev()
            .find(|(i, _)| *i == id.into_u64())
        {
            line.push_str(&f.0);
        }
    }
}

#[test]
fn every_stage_of_every_call_step_and_turn_has_a_span_with_its_call_tool_and_outcome() {
    let spans = Spans::default();
    let parents = Parents::default();
    let subscriber = tracing_subscriber::registry()
        .with(spans.clone())
        .with(parents.clone());
    let runtime_ = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tracing::subscriber::with_default(subscriber, || {
        runtime_.block_on(async {
            let registry = ToolRegistry::new();
            registry
                .register(dsh_test_support::echo_tool())
                .unwrap()
                .keep();
            let hooks = Hooks::new();
            hooks
                .on_pre_execute(
                    Scope::Global,
                    PreFn(|exec: &dsh_core::ToolExecution| {
                        if exec.call_id() == "c2" {
                            Ok(Some(PreToolDecision::deny("not this one")))
                        } else {
                            Ok(None)
                        }
                    }),
                )
                .keep();
            let session = Session::in_memory("trace");
            let mut driver = TurnDriver::new(runtime(&registry, &hooks), session, None);
            driver
                .run_turn(
                    [
                        assistant(&[("c1", "echo", "{}"), ("c2", "echo", "{}")]),
                        text_reply("done"),
                    ],
                    Signal::never(),
                )
                .await
                .unwrap();
        })
    });
    let recorded = spans.0.lock().clone();
    let lines: Vec<String> = recorded.iter().map(|(_, l)| l.clone()).collect();
    let parent_of = |id: u64| {
        parents
            .0
            .lock()
            .iter()
            .find(|(i, _)| *i == id)
            .and_then(|(_, p)| *p)
    };
    let id_of = |prefix: &str| {
        recorded
            .iter()
            .find(|(_, l)| l.starts_with(prefix))
            .map(|(i, _)| *i)
            .unwrap_or_else(|| panic!("no span {prefix}: {lines:#?}"))
    };
    // Each call is an OpenTelemetry GenAI `execute_tool` span inside its step, inside its turn;
    // every stage of the call is inside the call's span.
    let step = id_of("step turn=1 step=1");
    assert_eq!(parent_of(step), Some(id_of("turn turn=1")));
    for call in ["c1", "c2"] {
        let exec = id_of(&format!(
            "execute_tool otel.name=execute_tool echo gen_ai.operation.name=execute_tool \
             gen_ai.tool.name=echo gen_ai.tool.call.id={call} gen_ai.tool.type=function"
        ));
        assert_eq!(parent_of(exec), Some(step), "{call}: {lines:#?}");
        for stage in ["prepare", "finalize"] {
            let span = id_of(&format!("{stage} call_id={call} "));
            assert_eq!(parent_of(span), Some(exec), "{stage} {call}: {lines:#?}");
        }
    }
    let failed = recorded
        .iter()
        .find(|(_, l)| l.contains("gen_ai.tool.call.id=c2"))
        .map(|(_, l)| l.clone())
        .unwrap_or_default();
    assert!(
        failed.contains("error.type=") && failed.ends_with("otel.status_code=ERROR"),
        "a failed call's span carries its error type: {failed}"
    );
    let ok = recorded
        .iter()
        .find(|(_, l)| l.contains("gen_ai.tool.call.id=c1"))
        .map(|(_, l)| l.clone())
        .unwrap_or_default();
    assert!(!ok.contains("error.type"), "{ok}");
    let has = |want: &str| lines.iter().any(|l| l.starts_with(want));
    assert!(has("turn turn=1"), "{lines:#?}");
    assert!(has("step turn=1 step=1 calls=2"), "{lines:#?}");
    assert!(has("guards call_id=c1 tool=echo"), "{lines:#?}");
    assert!(has("post_execute call_id=c2 tool=echo"), "{lines:#?}");
    for stage in ["prepare", "finalize"] {
        for call in ["c1", "c2"] {
            assert!(
                has(&format!("{stage} call_id={call} tool=echo")),
                "{stage} {call}: {lines:#?}"
            );
        }
    }
    assert!(has("dispatch call_id=c1 tool=echo"), "{lines:#?}");
    assert!(
        !has("dispatch call_id=c2"),
        "a denied call never dispatches: {lines:#?}"
    );
    let finalize = |call: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("finalize call_id={call}")))
            .cloned()
            .unwrap_or_default()
    };
    assert!(finalize("c1").ends_with("outcome=ok"), "{lines:#?}");
    assert!(
        !finalize("c2").ends_with("outcome=ok") && finalize("c2").contains("outcome="),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("turn") && l.contains("end=Completed")),
        "{lines:#?}"
    );
}
