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
    #[command(flatten)]
    pub pipeline: super::options::PipelineArgs,
    /// The session log (default `$XDG_STATE_HOME/dsh/sessions/<workspace key>/<id>.jsonl`, or
    /// `~/.local/state/dsh/...`); an existing log is repaired and resumed. With `--store`: the
    /// session id in the store (created when absent, resumed and repaired when present).
    #[arg(long)]
    pub session: Option<PathBuf>,
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

/// Which hook settings a run loads.
pub enum HookSources {
    /// None at all (`dsh demo`).
    None,
    /// The standard files (the workspace's own only when trusted, the user's) and `explicit`.
    Standard {
        /// `--settings FILE`, trusted as the user's own.
        explicit: Option<PathBuf>,
        /// `--trust-workspace`: the workspace's own settings apply without asking.
        trust_workspace: bool,
    },
}

/// What a run is made of, validated by [`prepare`].
pub struct Setup<'a> {
    /// The script's text (`None`: no script, the calls come from elsewhere: `dsh mcp serve`).
    pub script_text: Option<&'a str>,
    /// The workspace root.
    pub workspace: &'a Path,
    /// `--session`, when given (with `store`: the session id).
    pub session: Option<PathBuf>,
    /// `--store`: the session lives in this PostgreSQL database instead of a file.
    pub store: Option<String>,
    /// The loaded policy.
    pub policy: Policy,
    /// Where asks go.
    pub approvals: Approvals,
    /// The grants that answer asks before anyone is asked (see [`grants`]).
    pub grants: Option<Arc<dsh::Grants>>,
    /// Whether the demo tools are mounted.
    pub demo_tools: bool,
    /// Whether events are printed as JSON.
    pub json: bool,
    /// Whether call lines go to stderr (stdout carries a protocol: `dsh mcp serve`).
    pub stderr: bool,
    /// Which hook settings load.
    pub hooks: HookSources,
}

/// Validates everything, opens the session and wires the harness.
pub async fn prepare(setup: Setup<'_>) -> Result<Prepared, Exit> {
    let Setup {
        script_text,
        workspace,
        session,
        store,
        policy,
        approvals,
        grants,
        demo_tools,
        json,
        stderr,
        hooks,
    } = setup;
    let script = script_text
        .map(parse_script)
        .transpose()
        .map_err(|e| Exit::usage(e.to_string()))?;
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
    if let HookSources::Standard { explicit, .. } = &hooks {
        check_settings(&workspace, explicit.clone()).await?;
    }
    // What this run created, to delete if it is refused before anything ran.
    let mut created_row = None;
    let (session, report, log, new_log) = match store {
        Some(url) => {
            let id = match session {
                Some(given) => super::store::id_of(&given)?,
                None => dsh::jsonl::session_id(),
            };
            let store = super::store::connect(&url).await?;
            let (session, report, created) =
                super::store::open(&store, &url, &id, &workspace).await?;
            let place = super::store::place(&url, &id);
            if created {
                created_row = Some((store, id, session.clone()));
            }
            (session, report, place, false)
        }
        None => {
            let id = dsh::jsonl::session_id();
            let log = session.unwrap_or_else(|| dsh::jsonl::default_log_path(&workspace, &id));
            let new_log = !log.exists();
            let (session, report) = dsh::jsonl::open_session(&log, &id, &workspace)
                .await
                .map_err(|e| {
                    if let dsh::session::SessionError::Invalid { problems } = &e {
                        let label = log.display().to_string();
                        return Exit::internal(super::logs::unresumable(&label, problems));
                    }
                    let message = format!("session log {}: {e}", log.display());
                    if dsh::jsonl::is_permission_denied(&e) {
                        Exit::usage(message)
                    } else {
                        Exit::internal(message)
                    }
                })?;
            (session, report, log, new_log)
        }
    };
    if !report.is_clean() {
        err_line!("dsh: {} was repaired before resuming:", log.display());
        for line in super::logs::report_lines(&report) {
            err_line!("{}", render::sanitize(&line));
        }
    }
    let used: std::collections::HashSet<String> = session
        .events()
        .iter()
        .filter_map(|(_, e)| e.as_tool_call().map(|c| c.call_id.to_owned()))
        .collect();
    if let Some(script) = &script {
        script
            .check_unused(&used)
            .map_err(|e| Exit::usage(e.to_string()))?;
    }
    let renderer = Renderer::new(if stderr {
        render::Mode::Stderr
    } else {
        render::Mode::detect(json)
    });
    let subscription = renderer.attach(&session);
    let mut builder = Harness::builder(session)
        .policy(policy)
        .approvals(approvals)
        .demo_tools(demo_tools)
        .bash(dsh::BashOptions::default())
        .workspace(&workspace)
        // Stage timing in the log (`dsh/step-timing`, skipped by every reader): `dsh view`
        // draws each step's waterfall from it.
        .runtime_config(dsh::scheduler::RuntimeConfig {
            step_timing: true,
            ..Default::default()
        });
    if let Some(grants) = &grants {
        builder = builder.grants(grants.clone());
    }
    if let HookSources::Standard {
        explicit,
        trust_workspace,
    } = hooks
    {
        let trusted = super::trust::decide(&workspace, trust_workspace)?;
        builder = builder.settings(explicit).workspace_trusted(trusted);
    }
    // Refused or stopped before anything ran: a log this run created holds only its header, and
    // goes (a file, or a store's row).
    let discard = async || {
        if new_log {
            let _ = std::fs::remove_file(&log);
        }
        if let Some((store, id, session)) = &created_row {
            super::store::discard_created(store, id, session).await;
        }
    };
    // The MCP servers start here: a signal meanwhile ends them and stops dsh.
    let built = match super::signals::while_starting(builder.build()).await {
        Ok(built) => built,
        Err(_signal) => {
            discard().await;
            return Err(Exit {
                code: 130,
                message: None,
            });
        }
    };
    let harness = match built {
        Ok(h) => h,
        Err(e) => {
            // A rule naming no tool, say.
            discard().await;
            return Err(match e {
                dsh::HarnessError::Policy(_)
                | dsh::HarnessError::Unsupported(_)
                | dsh::HarnessError::Hooks(_) => Exit::usage(e.to_string()),
                other => Exit::internal(other.to_string()),
            });
        }
    };
    drop(created_row);
    for w in harness.warnings() {
        err_line!("dsh: warning: {}", render::sanitize(w));
    }
    if let Some(grants) = &grants {
        let restored: Vec<String> = grants
            .rules()
            .into_iter()
            .filter(|(_, scope)| *scope == dsh::GrantScope::Session)
            .map(|(rule, _)| rule.to_string())
            .collect();
        if !restored.is_empty() {
            err_line!(
                "dsh: allowed for this session, as granted before it was resumed: {}",
                render::sanitize(&restored.join(", "))
            );
        }
    }
    let r = renderer.clone();
    let observer = harness.hooks().on_result(
        Scope::Global,
        move |exec: &dsh::core::ToolExecution, res: &dsh::core::ToolResult| r.on_result(exec, res),
    );
    // An MCP call's progress notifications show on its line.
    #[cfg(feature = "mcp")]
    for server in harness.mcp_servers() {
        let r = renderer.clone();
        server.on_progress(move |p| r.on_progress(&p.call_id, &p.tool, &progress_text(p)));
    }
    Ok(Prepared {
        harness,
        steps: script.map(|s| s.steps).unwrap_or_default(),
        log,
        renderer,
        _subscription: subscription,
        _observer: observer,
    })
}

/// `3/10 copying` (or `3 copying` without a total) for one MCP progress notification.
#[cfg(feature = "mcp")]
pub(super) fn progress_text(p: &dsh::mcp::Progress) -> String {
    let n = |x: f64| {
        if x.fract() == 0.0 && x.abs() < 1e15 {
            format!("{}", x as i64)
        } else {
            format!("{x:.1}")
        }
    };
    let mut text = match p.total {
        Some(t) => format!("{}/{}", n(p.progress), n(t)),
        None => n(p.progress),
    };
    if let Some(m) = &p.message {
        text.push(' ');
        text.push_str(&render::sanitize(m));
    }
    text
}

/// Loads the settings files (hooks and permission rules) once before the session is opened,
/// so a bad file refuses the run (exit 2) before anything is written.
async fn check_settings(workspace: &Path, explicit: Option<PathBuf>) -> Result<(), Exit> {
    let root = workspace.to_path_buf();
    tokio::task::spawn_blocking(move || {
        // The workspace's own file is checked too (a bad file is named before anything runs);
        // whether it applies is decided by trust.
        dsh::hooks::ClaudeHooks::load_standard(Some(&root), true, explicit.as_deref())?;
        dsh::hooks::ClaudePermissions::load_standard(Some(&root), true, explicit.as_deref())?;
        Ok::<(), dsh::hooks::HooksError>(())
    })
    .await
    .map_err(|e| Exit::internal(format!("loading settings: {e}")))?
    .map_err(|e| Exit::usage(e.to_string()))
}

/// The stop handler of a run: the first Ctrl-C (or SIGTERM, or SIGHUP: `super::signals`)
/// calls `cancel`; a second kills every process group dsh leads (`bash` commands, MCP servers,
/// hooks: `dsh::process`) and fires `hard_stop`, for the caller to exit at once (from `main`,
/// never from inside a task).
pub struct Interrupts {
    /// The handler; abort it (or drop this) once the run is over.
    pub task: tokio::task::JoinHandle<()>,
    /// Fires on the second signal.
    pub hard_stop: tokio::sync::oneshot::Receiver<()>,
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Installs the stop handler; once it returns, a Ctrl-C, SIGTERM or SIGHUP at any point of what
/// follows cancels instead of killing the process.
pub async fn on_interrupts(cancel: impl FnOnce() + Send + 'static) -> Interrupts {
    let (hard_stop, hard_stopped) = tokio::sync::oneshot::channel::<()>();
    let stops = match super::signals::Stops::install() {
        Ok(stops) => Some(stops),
        Err(e) => {
            err_line!(
                "dsh: warning: cannot handle Ctrl-C, SIGTERM or SIGHUP ({e}): each kills dsh"
            );
            None
        }
    };
    let task = tokio::spawn(async move {
        let Some(mut stops) = stops else {
            return;
        };
        let first = stops.next().await;
        cancel();
        if first == "SIGINT" {
            err_line!(
                "dsh: interrupted; finishing started calls (press Ctrl-C again to exit at once)"
            );
        } else {
            err_line!("dsh: {first}: finishing started calls (a second signal exits at once)");
        }
        stops.next().await;
        // Exiting at once: nothing this process started may outlive it, even a command that
        // ignores SIGTERM and SIGINT: every live group (bash commands, MCP servers, hooks).
        dsh::process::kill_all_live_groups();
        let _ = hard_stop.send(());
    });
    Interrupts {
        task,
        hard_stop: hard_stopped,
    }
}

/// Where asks go: `--approve`, else the terminal when stdin is one, else nobody (denied).
pub fn approvals(approve: Option<Approve>, grants: &Arc<dsh::Grants>) -> Approvals {
    let terminal = || {
        Approvals::Answerer(Arc::new(super::approve::TerminalApprover::with_grants(
            grants.clone(),
        )))
    };
    match approve {
        Some(Approve::Always) => Approvals::Always,
        Some(Approve::Never) => Approvals::Never,
        Some(Approve::Ask) => terminal(),
        None if std::io::stdin().is_terminal() => terminal(),
        None => Approvals::NoChannel,
    }
}

/// The grants of a run in `workspace`: the person's "always" rules for it from their grants
/// file (`$XDG_CONFIG_HOME/dsh/grants.toml`), and the session's, restored from its log.
pub fn grants(workspace: &Path) -> Result<Arc<dsh::Grants>, Exit> {
    match dsh::hooks::user_config_dir() {
        Some(dir) => dsh::Grants::with_file(&dir.join("grants.toml"), workspace)
            .map_err(|e| Exit::usage(e.to_string())),
        None => Ok(dsh::Grants::new()),
    }
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
    let mut interrupts = on_interrupts(move || {
        ctl.abort(AbortReason::Cancelled(CancelCause::User));
    })
    .await;
    let timer = cancel_after_ms.map(|ms| {
        let ctl = controller.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ctl.abort(AbortReason::Cancelled(CancelCause::User));
        })
    });
    let mut driver = prepared.harness.driver();
    let outcome = tokio::select! {
        outcome = driver.run_turn(prepared.steps.iter().cloned(), signal) => outcome,
        Ok(()) = &mut interrupts.hard_stop => {
            // The log is repaired the next time it is opened (spec I4).
            return Err(Exit { code: 130, message: None });
        }
    };
    drop(interrupts);
    if let Some(t) = timer {
        t.abort();
    }
    if outcome.is_err() {
        prepared.renderer.flush_unrecorded();
    }
    super::close_servers(&prepared.harness).await;
    let report = outcome.map_err(|e| Exit::internal(format!("the run failed: {e}")))?;
    if let Err(e) = prepared.harness.session().close().await {
        prepared.renderer.flush_unrecorded();
        return Err(Exit::internal(format!(
            "closing {}: {e}",
            prepared.log.display()
        )));
    }
    if !quiet_summary {
        err_line!("{}", prepared.renderer.summary());
        err_line!("log: {}", prepared.log.display());
    }
    Ok(match report.end {
        TurnEnd::Completed => 0,
        TurnEnd::Aborted(_) => 130,
        // A script has no model to block, stop at max tokens or hit a loop limit: any other
        // end is a failure.
        _ => 1,
    })
}

pub async fn run(args: RunArgs) -> Result<i32, Exit> {
    let script_text = std::fs::read_to_string(&args.script)
        .map_err(|e| Exit::usage(format!("cannot read script {}: {e}", args.script.display())))?;
    let policy = super::options::load_policy(
        args.pipeline.policy.as_deref(),
        args.max_parallel,
        args.mode,
        args.pipeline.preset,
    )?;
    let workspace = super::options::workspace_or_cwd(args.pipeline.workspace.as_ref())?;
    let grants = grants(&workspace)?;
    let prepared = prepare(Setup {
        script_text: Some(&script_text),
        workspace: &workspace,
        session: args.session.clone(),
        store: args.pipeline.store.url_for_logs(
            &args
                .session
                .iter()
                .map(PathBuf::as_path)
                .collect::<Vec<_>>(),
        )?,
        policy,
        approvals: approvals(args.approve, &grants),
        grants: Some(grants),
        demo_tools: args.demo_tools,
        json: args.json,
        stderr: false,
        hooks: HookSources::Standard {
            explicit: args.pipeline.settings.clone(),
            trust_workspace: args.pipeline.trust_workspace,
        },
    })
    .await?;
    drive(&prepared, args.cancel_after_ms, args.json).await
}
