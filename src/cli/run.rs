//! `dsh run`: a scripted model through the full pipeline.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use dsh::core::{AbortController, AbortReason, CancelCause, Signal};
use dsh::guard::Scope;
use dsh::scheduler::TurnEnd;
use dsh::{Approvals, Harness, Policy, parse_script};

use super::Exit;
use super::render::{self, Renderer};

/// How `ask` decisions are answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Approve {
    /// Ask at the terminal (stderr/stdin), one line per question.
    Ask,
    /// Allow every ask once.
    Always,
    /// Reject every ask.
    Never,
}

/// Presentation modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Every tool is offered to the model.
    Native,
    /// Only `run_code` (needs Code Mode).
    Code,
    /// Every tool and `run_code` (needs Code Mode).
    Both,
}

/// Permission presets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PresetArg {
    /// Commands read anywhere and write only a private temp dir; approval asks.
    ReadOnly,
    /// Commands may also write the workspace; approval asks (the default).
    WorkspaceWrite,
    /// No containment and no approval prompts (every ask is rejected).
    DangerFullAccess,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The script: JSON Lines, one assistant message per line (OpenAI or Anthropic shape); each
    /// line is one step of one turn.
    pub script: PathBuf,
    /// The workspace the file tools may touch (default: the current directory).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// The session log (default `$XDG_STATE_HOME/dsh/sessions/<workspace key>/<id>.jsonl`, or
    /// `~/.local/state/dsh/...`); an existing log is repaired and resumed.
    #[arg(long)]
    pub session: Option<PathBuf>,
    /// A policy file (TOML).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// The permission preset: the `bash` tool's sandbox mode and the approval policy together
    /// (overrides the policy file's `preset` and `approval`).
    #[arg(long, value_enum)]
    pub preset: Option<PresetArg>,
    /// A hook settings file (Claude Code format), merged after the workspace's
    /// `.dsh/settings.json` and the user's `settings.json` (`$XDG_CONFIG_HOME/dsh` or
    /// `~/.config/dsh`), which are always read.
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// How asks are answered (default: `ask` on a terminal, otherwise no channel: every ask is
    /// denied).
    #[arg(long, value_enum)]
    pub approve: Option<Approve>,
    /// Most tool bodies running at once (overrides the policy).
    #[arg(long)]
    pub max_parallel: Option<usize>,
    /// Tool presentation mode (overrides the policy).
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Cancel the turn this many milliseconds after it starts, as an interrupt would.
    #[arg(long)]
    pub cancel_after_ms: Option<u64>,
    /// Add the `echo`, `sleep` and `fail` tools.
    #[arg(long)]
    pub demo_tools: bool,
    /// Print one JSON object per durable event on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A ready-to-run configuration, shared with `dsh demo`.
pub struct Prepared {
    pub harness: Harness,
    pub steps: Vec<dsh::core::Json>,
    pub log: PathBuf,
    pub renderer: Arc<Renderer>,
    _subscription: dsh::session::Subscription,
    _observer: dsh::guard::HookHandle,
}

/// Validates everything, opens the session and wires the harness. `settings`: `None` loads no
/// user hooks; `Some(explicit)` loads the standard hook settings files plus `explicit`.
#[allow(clippy::too_many_arguments)]
pub async fn prepare(
    script_text: &str,
    workspace: &Path,
    session: Option<PathBuf>,
    policy: Policy,
    approvals: Approvals,
    demo_tools: bool,
    json: bool,
    settings: Option<Option<PathBuf>>,
) -> Result<Prepared, Exit> {
    let script = parse_script(script_text).map_err(|e| Exit::usage(e.to_string()))?;
    Harness::supports(&policy).map_err(|e| Exit::usage(e.to_string()))?;
    let workspace = workspace
        .canonicalize()
        .map_err(|e| Exit::usage(format!("workspace {}: {e}", workspace.display())))?;
    if !workspace.is_dir() {
        return Err(Exit::usage(format!(
            "workspace {} is not a directory",
            workspace.display()
        )));
    }
    if let Some(explicit) = settings.clone() {
        check_settings(&workspace, explicit).await?;
    }
    let id = dsh::jsonl::session_id();
    let log = session.unwrap_or_else(|| dsh::jsonl::default_log_path(&workspace, &id));
    let (session, report) = dsh::jsonl::open_session(&log, &id, &workspace)
        .await
        .map_err(|e| {
            let message = format!("session log {}: {e}", log.display());
            if dsh::jsonl::is_permission_denied(&e) {
                Exit::usage(message)
            } else {
                Exit::internal(message)
            }
        })?;
    if !report.is_clean() {
        eprintln!("dsh: {} was repaired before resuming:", log.display());
        for line in super::logs::report_lines(&report) {
            eprintln!("{}", render::sanitize(&line));
        }
    }
    let renderer = Renderer::new(render::Mode::detect(json));
    let subscription = renderer.attach(&session);
    let mut builder = Harness::builder(session)
        .policy(policy)
        .approvals(approvals)
        .demo_tools(demo_tools)
        .bash(dsh::BashOptions::default())
        .workspace(&workspace);
    if let Some(explicit) = settings {
        builder = builder.settings(explicit);
    }
    let harness = builder.build().await.map_err(|e| match e {
        dsh::HarnessError::Policy(_)
        | dsh::HarnessError::Unsupported(_)
        | dsh::HarnessError::Hooks(_) => Exit::usage(e.to_string()),
        other => Exit::internal(other.to_string()),
    })?;
    let r = renderer.clone();
    let observer = harness.hooks().on_result(
        Scope::Global,
        move |exec: &dsh::core::ToolExecution, res: &dsh::core::ToolResult| r.on_result(exec, res),
    );
    Ok(Prepared {
        harness,
        steps: script.steps,
        log,
        renderer,
        _subscription: subscription,
        _observer: observer,
    })
}

/// Loads the settings files (hooks and permission rules) once before the session is opened,
/// so a bad file refuses the run (exit 2) before anything is written.
async fn check_settings(workspace: &Path, explicit: Option<PathBuf>) -> Result<(), Exit> {
    let root = workspace.to_path_buf();
    tokio::task::spawn_blocking(move || {
        dsh::hooks::ClaudeHooks::load_standard(Some(&root), explicit.as_deref())?;
        dsh::hooks::ClaudePermissions::load_standard(Some(&root), explicit.as_deref())?;
        Ok::<(), dsh::hooks::HooksError>(())
    })
    .await
    .map_err(|e| Exit::internal(format!("loading settings: {e}")))?
    .map_err(|e| Exit::usage(e.to_string()))
}

/// Runs the turn with interrupt handling; returns the exit code.
pub async fn drive(
    prepared: &Prepared,
    cancel_after_ms: Option<u64>,
    quiet_summary: bool,
) -> Result<i32, Exit> {
    let controller = AbortController::new();
    let signal: Signal = controller.signal();
    let ctl = controller.clone();
    let (installed, is_installed) = tokio::sync::oneshot::channel();
    let interrupts = tokio::spawn(async move {
        // The handler is installed on the first poll: poll once, then let the turn start, so a
        // Ctrl-C at any point of the turn cancels it instead of killing the process.
        let first = tokio::signal::ctrl_c();
        tokio::pin!(first);
        let early = futures::poll!(&mut first);
        let _ = installed.send(());
        let first = match early {
            std::task::Poll::Ready(r) => r,
            std::task::Poll::Pending => first.await,
        };
        if first.is_ok() {
            ctl.abort(AbortReason::Cancelled(CancelCause::User));
            eprintln!(
                "dsh: interrupted; finishing started calls (press Ctrl-C again to exit at once)"
            );
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
    let timer = cancel_after_ms.map(|ms| {
        let ctl = controller.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ctl.abort(AbortReason::Cancelled(CancelCause::User));
        })
    });
    let _ = is_installed.await;
    let mut driver = prepared.harness.driver();
    let outcome = driver
        .run_turn(prepared.steps.iter().cloned(), signal)
        .await;
    interrupts.abort();
    if let Some(t) = timer {
        t.abort();
    }
    let report = outcome.map_err(|e| Exit::internal(format!("the run failed: {e}")))?;
    if let Err(e) = prepared.harness.session().close().await {
        return Err(Exit::internal(format!(
            "closing {}: {e}",
            prepared.log.display()
        )));
    }
    if !quiet_summary {
        eprintln!("{}", prepared.renderer.summary());
        eprintln!("log: {}", prepared.log.display());
    }
    Ok(match report.end {
        TurnEnd::Completed => 0,
        TurnEnd::Aborted(_) => 130,
        TurnEnd::Error(_) => 1,
    })
}

pub async fn run(args: RunArgs) -> Result<i32, Exit> {
    let script_text = std::fs::read_to_string(&args.script)
        .map_err(|e| Exit::usage(format!("cannot read script {}: {e}", args.script.display())))?;
    let policy = super::options::load_policy(
        args.policy.as_deref(),
        args.max_parallel,
        args.mode,
        args.preset,
    )?;
    let approvals = match args.approve {
        Some(Approve::Always) => Approvals::Always,
        Some(Approve::Never) => Approvals::Never,
        Some(Approve::Ask) => {
            Approvals::Answerer(Arc::new(super::approve::TerminalApprover::new()))
        }
        None if std::io::stdin().is_terminal() => {
            Approvals::Answerer(Arc::new(super::approve::TerminalApprover::new()))
        }
        None => Approvals::NoChannel,
    };
    let workspace = match &args.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir()
            .map_err(|e| Exit::internal(format!("current directory: {e}")))?,
    };
    let prepared = prepare(
        &script_text,
        &workspace,
        args.session.clone(),
        policy,
        approvals,
        args.demo_tools,
        args.json,
        Some(args.settings.clone()),
    )
    .await?;
    drive(&prepared, args.cancel_after_ms, args.json).await
}
