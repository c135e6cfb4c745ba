//! The reserved `run_code` tool (spec CM1, CM6): its definition for a language flavor, its
//! output `{logs, result?}` and how that reads (capped as `bash` output is), and its body: validate, run the program against
//! the bindings, end the run (quiescence), defer the sub-calls' contexts, report.

use std::path::PathBuf;
use std::sync::{Arc, Weak};

use dsh_core::RUN_CODE;
use dsh_core::codes::{self, messages};
use dsh_core::{ContentBlock, Failure, Json, ToolContext, ToolDefinition, ToolOutput};
use serde_json::{Value, json};

use crate::bindings::Bindings;
use crate::error::CodeModeError;
use crate::flavor::Flavor;
use crate::outcome::{CodeErrorKind, CodeOutcome, CodeRun};
use crate::presentation::Inner;
use crate::render::{failure_head, render_failure, render_output};
use crate::shown::{place, shown_failure, shown_success};
use crate::subcall::{RunContext, SubCalls};

/// The message of a run without a mounted interpreter (CODE-53).
pub const NO_RUNTIME: &str = "run_code requires a code runtime, and none is mounted";

/// The output schema: `{logs: string[], result?: any, outputFile?: string,
/// outputFileError?: string}` (the last two when the text was longer than the model is shown).
fn output_schema() -> Json {
    Json::from_shallow(json!({
        "type": "object",
        "properties": {
            "logs": {"type": "array", "items": {"type": "string"}},
            "result": {},
            "outputFile": {"type": "string"},
            "outputFileError": {"type": "string"},
        },
        "required": ["logs"],
    }))
}

/// Renders a `{logs, result?}` value as the one text block the model sees.
pub fn render_value(value: &Json) -> String {
    let v = value.value();
    let logs: Vec<String> = v
        .get("logs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|l| l.as_str().map_or_else(|| l.to_string(), str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    render_output(&logs, v.get("result"))
}

/// Renders a `{logs, result?, outputFile?}` value as the model is shown it: at most
/// `max_shown` bytes of its tail, after a note naming the file that holds all of it.
pub fn render_value_shown(value: &Json, max_shown: usize) -> String {
    let text = render_value(value);
    if text.len() <= max_shown {
        return text;
    }
    let v = value.value();
    let field = |k: &str| v.get(k).and_then(Value::as_str);
    let place = match (field("outputFile"), field("outputFileError")) {
        (Some(path), _) => path.to_owned(),
        (None, Some(why)) => format!("unavailable ({why})"),
        (None, None) => "unavailable".to_owned(),
    };
    shown_success(&text, max_shown, &place)
}

/// The `CODE_RUN_FAILED` failure of a failed run, with its captured output.
pub fn code_run_failed(outcome: &CodeOutcome) -> Option<Failure> {
    let error = outcome.error.as_ref()?;
    Some(Failure::typed(
        codes::CODE_RUN_FAILED_ERROR,
        codes::CODE_RUN_FAILED,
        render_failure(error, &outcome.logs),
    ))
}

/// The `{logs, result?}` value of a successful run, built as text so a result of any depth
/// never meets a recursive copy.
fn output_value(
    outcome: &CodeOutcome,
    saved: Option<&Result<PathBuf, String>>,
) -> Result<Json, Failure> {
    let logs = serde_json::to_string(&outcome.logs).map_err(|e| Failure::new(e.to_string()))?;
    let file = match saved {
        None => String::new(),
        Some(Ok(path)) => format!(
            ",\"outputFile\":{}",
            Value::String(path.display().to_string())
        ),
        Some(Err(why)) => format!(",\"outputFileError\":{}", Value::String(why.clone())),
    };
    let text = match &outcome.value {
        Some(v) => format!(
            "{{\"logs\":{logs},\"result\":{}{file}}}",
            v.to_json_string()
        ),
        None => format!("{{\"logs\":{logs}{file}}}"),
    };
    Json::parse(&text).map_err(|e| {
        Failure::typed(
            codes::CODE_RUN_FAILED_ERROR,
            codes::CODE_RUN_FAILED,
            format!("code run failed (invalid-output): {e}"),
        )
    })
}

/// Builds the `run_code` definition for a flavor; its body reaches the mount through `inner`.
pub(crate) fn definition(
    flavor: &Flavor,
    inner: Weak<Inner>,
    max_shown: usize,
) -> Result<ToolDefinition, CodeModeError> {
    let output = ToolOutput::new(output_schema(), move |v| {
        Ok(Arc::from(vec![ContentBlock::text(render_value_shown(
            v, max_shown,
        ))]))
    });
    let def = ToolDefinition::builder(RUN_CODE, &flavor.description)
        .validated_parameters(flavor.parameters.clone())
        .output(output)
        .execute(move |ctx| {
            let inner = inner.clone();
            async move { run(inner, ctx).await }
        })
        .build()?;
    Ok(def)
}

/// The `run_code` body.
async fn run(inner: Weak<Inner>, ctx: ToolContext) -> Result<Json, Failure> {
    let Some(inner) = inner.upgrade() else {
        return Err(Failure::new("run_code is no longer mounted"));
    };
    let args = ctx.arguments().json().map(|j| j.value().clone());
    let field = |k: &str| {
        args.as_ref()
            .and_then(|a| a.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let Some(code) = field("code") else {
        return Err(Failure::invalid_args(&[
            "\"code\" must be a string".to_owned()
        ]));
    };
    let description = field("description").unwrap_or_default();
    if description.trim().is_empty() {
        return Err(Failure::new(
            "invalid description: say in a short sentence what the program does",
        ));
    }
    let Some(code_runtime) = inner.code_runtime() else {
        return Err(Failure::new(NO_RUNTIME));
    };
    let Some(runtime) = inner.runtime() else {
        return Err(Failure::new(
            "run_code is not bound to a pipeline runtime (CodeMode::bind)",
        ));
    };
    let exec = ctx.exec().clone();
    let _live = inner.enter_run(exec.token());
    let session = inner.session_for(&exec);
    let sub = SubCalls::start(RunContext {
        runtime,
        outer: exec.clone(),
        outer_signal: ctx.signal().clone(),
        max_parallel: inner.max_parallel_sub_calls(),
        session,
        log: inner.dispatch_log(),
    });
    let bindings =
        Bindings::new(inner.binding_names(exec.agent()), sub.host()).with_drive(sub.drive());
    let run = CodeRun {
        program: code,
        bindings,
        signal: ctx.signal().clone(),
        limits: inner.limits(),
    };
    let outcome = dsh_core::contained::future(std::pin::pin!(code_runtime.run(run)))
        .await
        .unwrap_or_else(|p| {
            let f = Failure::from_panic("the code runtime", &*p);
            CodeOutcome::failure(CodeErrorKind::Exception, f.message(), Vec::new())
        });
    let effects = sub.close().await;
    for c in effects.contexts {
        ctx.defer_context(c);
    }
    if effects.concludes_turn {
        ctx.conclude_turn();
    }
    let call_id = exec.call_id().to_owned();
    if let Some(error) = &outcome.error {
        let head = failure_head(error);
        let logs = outcome.logs.join("\n");
        let whole = render_failure(error, &outcome.logs);
        let max = inner.overflow().max_bytes();
        let message = if whole.len() <= max {
            whole
        } else {
            let saved = save(&inner, whole, call_id).await;
            shown_failure(&head, &logs, max, &place(&saved))
        };
        return Err(Failure::typed(
            codes::CODE_RUN_FAILED_ERROR,
            codes::CODE_RUN_FAILED,
            message,
        ));
    }
    let text = render_output(&outcome.logs, outcome.value.as_ref().map(Json::value));
    let saved = if text.len() > inner.overflow().max_bytes() {
        Some(save(&inner, text, call_id).await)
    } else {
        None
    };
    output_value(&outcome, saved.as_ref())
}

/// Saves a run's whole output text off the async threads.
async fn save(inner: &Arc<Inner>, text: String, call_id: String) -> Result<PathBuf, String> {
    let inner = inner.clone();
    tokio::task::spawn_blocking(move || inner.overflow().save_blocking(&text, &call_id))
        .await
        .unwrap_or_else(|e| Err(format!("the save did not finish: {e}")))
}

/// `(run_code completed with no output)`, re-exported for hosts that render outcomes.
pub const NO_OUTPUT: &str = messages::RUN_CODE_NO_OUTPUT;

/// How a `run_code` call is shown in a UI (CODE-54): a generic card titled by the call's
/// description, of kind `execute`, whose raw input is the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallCard {
    /// The description argument.
    pub title: String,
    /// Always `execute`.
    pub kind: &'static str,
    /// The program.
    pub raw_input: String,
}

/// The card for a `run_code` call's arguments.
pub fn present_call(arguments: &Value) -> CallCard {
    let field = |k: &str| {
        arguments
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    CallCard {
        title: field("description"),
        kind: "execute",
        raw_input: field("code"),
    }
}
