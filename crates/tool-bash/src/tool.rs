//! The `bash` tool: `{command, description?, timeout?, timeoutMs?, workdir?}` (plus
//! `sandbox_permissions` and `justification` to ask for a wider sandbox); `timeout` is Claude
//! Code's name for the budget in milliseconds, `timeoutMs` ours, and either may be given. A fresh `bash -c` per call in the workspace
//! or `workdir` (confined to the roots), under the mode its sandbox policy chose.
//!
//! Results: a non-zero exit is a result, not a failure (`[exit code: N]`); a contained run's
//! blocked operations are named (`[sandbox: file access denied under <mode> mode]`); long output
//! keeps its tail and names the file holding all of it. Failures: `SANDBOX_UNAVAILABLE` (the
//! kernel cannot contain the command; nothing ran), `BASH_TIMEOUT` (its own budget), `ABORTED`
//! or `TOOL_TIMEOUT` (cancelled): each with the output captured before the group was killed.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dsh_core::{
    AbortReason, ContentBlock, CoreError, Failure, Json, ToolContext, ToolDefinition, ToolOutput,
    clamp_timeout,
};
use dsh_process::Ended;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config::BashConfig;
use crate::helper::Probe;
use crate::mode::SandboxMode;
use crate::policy::{CallSandbox, ForgetDecision, SandboxPolicy, SandboxSettings, Shared};
use crate::render::{self, Stream};
use crate::runner::{self, RunSpec, Stop};

/// The tool's name.
pub const NAME: &str = "bash";

/// Code of a call whose mode the kernel cannot enforce (nothing ran).
pub const SANDBOX_UNAVAILABLE: &str = "SANDBOX_UNAVAILABLE";
/// Code of a call that exceeded its own `timeoutMs`.
pub const BASH_TIMEOUT: &str = "BASH_TIMEOUT";
/// Code of a call whose `workdir` is not a directory inside the roots.
pub const BASH_WORKDIR: &str = "BASH_WORKDIR";

const DESCRIPTION: &str = "Execute a bash command (`bash -c`) and return its stdout/stderr. Each call runs in a fresh shell: no state (cwd, variables, functions) persists between calls \u{2014} pass `workdir` instead of using `cd`. Non-zero exits are reported as `[exit code: N]`. Commands may run under a file sandbox; a blocked file operation is reported as `[sandbox: file access denied under <mode> mode]` \u{2014} a policy denial, not a bug in the command; do not retry another way. Long output is truncated to its tail; the full output is saved to a file whose path is reported when available. Whatever the command leaves running when it exits is stopped.";

/// The model-facing arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashInput {
    /// The bash command to execute.
    pub command: String,
    /// Clear, concise description of what this command does in active voice, 5-10 words (shown in the UI). Examples: "ls" → "List files in current directory"; "git status" → "Show working tree status"; "npm install" → "Install package dependencies".
    pub description: Option<String>,
    /// Optional timeout in milliseconds (max 600000). The executor applies its configured default and cap, and kills the command on expiry.
    pub timeout: Option<f64>,
    /// The same as `timeout` (milliseconds); give one of the two.
    #[serde(rename = "timeoutMs")]
    pub timeout_ms: Option<f64>,
    /// Working directory for this command. Defaults to the session workspace; a relative path is resolved against it.
    pub workdir: Option<String>,
    /// Ask to run this command under a wider sandbox mode ("workspace-write" or "danger-full-access"); the user is asked to approve it, this once. Use only after a sandbox denial, with the narrowest mode that suffices.
    pub sandbox_permissions: Option<String>,
    /// Why the wider sandbox mode is needed (shown in the approval prompt).
    pub justification: Option<String>,
}

/// The canonical value of a call that ran.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct BashValue {
    /// The model-facing text.
    pub text: String,
    /// The exit code, if the shell exited.
    pub exit_code: Option<i32>,
    /// The signal that killed the shell, if one did.
    pub signal: Option<i32>,
    /// The mode it ran under.
    pub sandbox: SandboxMode,
    /// Whether output was left out of `text`.
    pub truncated: bool,
    /// The file holding the full output, when `truncated`.
    pub full_output_path: Option<String>,
    /// Whether the sandbox refused an operation of the command.
    pub sandbox_denied: bool,
}

/// A `bash` tool: its configuration, session sandbox settings and the decisions of its policy.
/// Cloning gives another handle to the same tool.
#[derive(Clone)]
pub struct BashTool {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for BashTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BashTool")
            .field("settings", &self.shared.settings())
            .finish_non_exhaustive()
    }
}

impl BashTool {
    /// A tool with `config` under the default settings (`workspace-write`, escalation offered,
    /// fail closed without kernel support).
    pub fn new(config: BashConfig) -> BashTool {
        BashTool::with_settings(config, SandboxSettings::default())
    }

    /// A tool with `config` under `settings`.
    pub fn with_settings(config: BashConfig, settings: SandboxSettings) -> BashTool {
        BashTool {
            shared: Arc::new(Shared::new(NAME, config, settings)),
        }
    }

    /// The session's sandbox settings.
    pub fn settings(&self) -> SandboxSettings {
        self.shared.settings()
    }

    /// Replaces the session's sandbox settings (calls already decided keep theirs).
    pub fn set_settings(&self, settings: SandboxSettings) {
        self.shared.set_settings(settings);
    }

    /// The configuration.
    pub fn config(&self) -> &BashConfig {
        &self.shared.config
    }

    /// Whether this kernel can contain commands (asked once, then remembered).
    pub async fn probe(&self) -> Probe {
        self.shared.probe().await
    }

    /// The pre-execute sandbox policy for this tool's calls.
    pub fn policy(&self) -> SandboxPolicy {
        SandboxPolicy {
            shared: self.shared.clone(),
        }
    }

    /// The `tools/result` observer that forgets each call's decision once its result is final.
    pub fn decision_janitor(&self) -> impl dsh_core::ResultObserver {
        ForgetDecision(self.shared.clone())
    }

    /// Decisions not yet forgotten (for tests: zero once every call has a final result).
    #[doc(hidden)]
    pub fn pending_decisions(&self) -> usize {
        self.shared.pending_decisions()
    }

    /// The tool definition: exclusive, permission subject = the command.
    pub fn definition(&self) -> Result<ToolDefinition, CoreError> {
        let shared = self.shared.clone();
        ToolDefinition::builder(NAME, DESCRIPTION)
            .output(
                ToolOutput::new(
                    Json::from_shallow(json!({
                        "type": "object",
                        "required": ["text", "sandbox", "truncated"],
                        "properties": {
                            "text": {"type": "string"},
                            "sandbox": {"type": "string"},
                            "truncated": {"type": "boolean"}
                        }
                    })),
                    |v| {
                        let text = v.value().get("text").and_then(|t| t.as_str()).unwrap_or("");
                        Ok(Arc::from(vec![ContentBlock::text(text)]))
                    },
                )
                .with_presentation_meta(|v| {
                    let value = v.value();
                    Ok(Some(Json::from_shallow(json!({
                        "sandbox": value.get("sandbox"),
                        "exitCode": value.get("exitCode"),
                        "sandboxDenied": value.get("sandboxDenied"),
                        "fullOutputPath": value.get("fullOutputPath"),
                    }))))
                }),
            )
            .concurrency_safe(false)
            .permission_subjects(|args, _agent| {
                args.get("command")
                    .and_then(|c| c.as_str())
                    .and_then(crate::subject::command_subject)
            })
            .execute_typed(move |input: BashInput, ctx: ToolContext| {
                let shared = shared.clone();
                async move { execute(&shared, input, ctx).await }
            })
            .build()
    }
}

static NEXT_RUN: AtomicU64 = AtomicU64::new(1);

fn stem(call_id: &str) -> String {
    let safe: String = call_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(64)
        .collect();
    format!(
        "bash-{}-{}-{safe}",
        std::process::id(),
        NEXT_RUN.fetch_add(1, Ordering::Relaxed)
    )
}

fn unavailable(mode: SandboxMode, why: &str) -> Failure {
    Failure::harness(
        SANDBOX_UNAVAILABLE,
        format!("cannot run the command under the {mode} sandbox: {why}; the command was not run"),
    )
}

async fn execute(
    shared: &Shared,
    input: BashInput,
    ctx: ToolContext,
) -> Result<BashValue, Failure> {
    let config = &shared.config;
    let call: CallSandbox = shared.decision(ctx.exec().token());
    let asked = match (input.timeout, input.timeout_ms) {
        (Some(a), Some(b)) if a != b => {
            return Err(Failure::invalid_args(&[format!(
                "timeout ({a}) and timeoutMs ({b}) disagree: give one of them (both are milliseconds)"
            )]));
        }
        (a, b) => a.or(b),
    };
    let timeout_ms = clamp_timeout(
        asked,
        config.default_timeout_ms,
        config.max_timeout_ms,
        None,
    )
    .map_err(|e| Failure::invalid_args(&[e.to_string()]))?;
    let workspace = &config.workspace;
    let cwd: PathBuf = match &input.workdir {
        None => workspace.default_cwd().to_path_buf(),
        Some(w) => {
            let p = workspace
                .resolve(workspace.default_cwd(), w)
                .await
                .map_err(|e| Failure::harness(BASH_WORKDIR, format!("workdir: {e}")))?;
            let is_dir = tokio::fs::metadata(&p).await.map(|m| m.is_dir());
            if !matches!(is_dir, Ok(true)) {
                return Err(Failure::harness(
                    BASH_WORKDIR,
                    format!("workdir: {} is not a directory", p.display()),
                ));
            }
            p
        }
    };
    if call.mode.is_contained()
        && let Probe::Unavailable(why) = shared.probe().await
    {
        return Err(unavailable(call.mode, &why));
    }
    let spec = RunSpec {
        mode: call.mode,
        command: input.command,
        cwd,
        roots: workspace.roots().to_vec(),
        timeout: Duration::from_millis(timeout_ms),
        signal: ctx.signal().clone(),
        stem: stem(ctx.exec().call_id()),
    };
    let outcome = runner::run(config, &shared.supervisors, spec)
        .await
        .map_err(|e| match e {
            runner::SpawnError::NoHelper => unavailable(call.mode, &e.to_string()),
            other => Failure::new(other.to_string()),
        })?;
    if let Some(why) = &outcome.setup_failure {
        outcome
            .spool
            .discard(&outcome.stdout, &outcome.stderr)
            .await;
        return Err(unavailable(call.mode, why));
    }

    // Notes, in the order the model reads them.
    let mut notes = Vec::new();
    if let Some(why) = &call.fallback {
        notes.push(format!(
            "[sandbox: unavailable ({why}); the command ran without containment]"
        ));
    }
    let stderr_text = {
        let err = outcome.stderr.lock();
        String::from_utf8_lossy(err.tail(config.max_output_bytes.max(64 * 1024))).into_owned()
    };
    let mut sandbox_denied = false;
    if call.mode.is_contained() {
        let denied = render::denials(&stderr_text);
        let denial_notes = render::denial_notes(denied, call.mode, call.hint);
        sandbox_denied = !denial_notes.is_empty();
        notes.extend(denial_notes);
    }
    let xfsz =
        outcome.signal == Some(libc::SIGXFSZ) || stderr_text.contains("File size limit exceeded");
    if xfsz {
        notes.push("[file size limit exceeded: a write was stopped]".to_owned());
    }
    if let Stop::ProcessLimit(n) = &outcome.stop {
        notes.push(format!(
            "[sandbox: process limit exceeded ({n} processes, limit {}); the command's process group was killed]",
            config.max_processes.unwrap_or(0)
        ));
    }
    if let Ended::Stuck(n) = outcome.ended {
        notes.push(format!(
            "[warning: {n} process(es) of the command could not be killed]"
        ));
    }
    if let Some(note) = render::exit_note(outcome.code, outcome.signal) {
        notes.push(note);
    }

    let (out_total, err_total) = (outcome.stdout.lock().total(), outcome.stderr.lock().total());
    let truncated = out_total + err_total > config.max_output_bytes as u64;
    let full_output: Option<String> = if truncated {
        let kept = outcome
            .spool
            .keep(&outcome.stdout, &outcome.stderr, config.max_spool_bytes)
            .await;
        Some(match kept {
            Ok(p) => p.display().to_string(),
            Err(e) => format!("unavailable ({e})"),
        })
    } else {
        // Output that fits was never spooled (a stream spools only past the cap).
        outcome
            .spool
            .discard(&outcome.stdout, &outcome.stderr)
            .await;
        None
    };
    let assembled = {
        let out = outcome.stdout.lock();
        let err = outcome.stderr.lock();
        render::assemble(
            Stream {
                tail: out.tail(config.max_output_bytes),
                total: out.total(),
            },
            Stream {
                tail: err.tail(config.max_output_bytes),
                total: err.total(),
            },
            &notes,
            config.max_output_bytes,
            full_output.as_deref(),
        )
    };
    match outcome.stop {
        Stop::TimedOut => Err(Failure::typed(
            dsh_core::codes::TOOL_TIMEOUT_ERROR,
            BASH_TIMEOUT,
            format!(
                "command timed out after {timeout_ms}ms; its process group was killed. Output so far:\n{}",
                assembled.text
            ),
        )),
        Stop::Aborted(reason) => {
            let base = match reason {
                AbortReason::Timeout(t) => Failure::tool_timeout(t.timeout_ms()),
                AbortReason::Cancelled(_) => Failure::aborted(),
            };
            Err(base.with_suffix(&format!(
                "; the command's process group was killed. Output so far:\n{}",
                assembled.text
            )))
        }
        Stop::Exited | Stop::ProcessLimit(_) => Ok(BashValue {
            text: assembled.text,
            exit_code: outcome.code,
            signal: outcome.signal,
            sandbox: call.mode,
            truncated: assembled.truncated,
            full_output_path: full_output.filter(|_| truncated),
            sandbox_denied,
        }),
    }
}
