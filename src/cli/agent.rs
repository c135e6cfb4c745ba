//! `dsh agent "PROMPT"`: one turn of a real model, every tool call it makes through the
//! pipeline, the model's final text on stdout.
//!
//! Guarantees: everything given (config files, policy, settings, the key) is checked before the
//! log is opened; the turn is logged as `dsh run`'s are, so `dsh check`, `dsh transcript` and
//! `--resume` read it; a provider that refuses the key, knows no such model, cannot be reached
//! or answers something that is not its API is one sentence on stderr and exit 2, with the log
//! closed clean; Ctrl-C cancels the turn (exit 130, the log checks clean), a second exits at
//! once as `dsh run` does.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;
use dsh::scheduler::TurnEnd;
use dsh_agent::{Agent, AgentConfig, Cancel, Limits};

use super::Exit;
use super::model_config::{self, Choice, ProviderArg};
use super::run::{Approve, HookSources, ModeArg, Setup, prepare};

/// The system prompt when neither the command line nor a config file gives one.
const SYSTEM: &str = "You are a coding agent working in the user's workspace through the tools \
you are given. Read before you edit, keep changes small, run the project's checks when you \
change code, and end with a short answer saying what you did.";

/// `dsh agent` options.
#[derive(Args, Debug)]
pub struct AgentArgs {
    /// What to ask the model.
    pub prompt: String,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// The options `dsh agent` and `dsh chat` share.
#[derive(Args, Debug)]
pub struct ModelArgs {
    /// The provider (default: the config file's, else `deepseek`).
    #[arg(long, value_enum)]
    pub provider: Option<ProviderArg>,
    /// The model (default: the config file's, else the provider's usual one).
    #[arg(long)]
    pub model: Option<String>,
    /// The API root, as the provider's own SDK takes it (OpenAI-compatible: ending in `/v1`;
    /// Anthropic: the host).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The system prompt (default: the config file's, else dsh's).
    #[arg(long)]
    pub system: Option<String>,
    /// At most this many model requests in the turn.
    #[arg(long)]
    pub max_steps: Option<u32>,
    /// How long the model's answer may send nothing before the request fails with
    /// LLM_STREAM_IDLE_TIMEOUT: a number and a unit, `90s`, `10m`, `1500ms` (default: the config
    /// file's `idle_timeout`, else 5m; more than 0).
    #[arg(long, value_name = "DURATION", value_parser = super::duration::idle_timeout)]
    pub idle_timeout: Option<std::time::Duration>,
    #[command(flatten)]
    pub pipeline: super::options::PipelineArgs,
    /// The session log (default: a new one under the workspace's state directory).
    #[arg(long, conflicts_with = "resume")]
    pub session: Option<PathBuf>,
    /// Continue a session: its id (`dsh sessions` lists them) or its log file; with no value,
    /// the workspace's most recent one.
    #[arg(long, value_name = "SESSION", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,
    /// How asks are answered (default: `ask` on a terminal, otherwise every ask is denied).
    #[arg(long, value_enum)]
    pub approve: Option<Approve>,
    /// Most tool bodies running at once (overrides the policy).
    #[arg(long)]
    pub max_parallel: Option<usize>,
    /// Tool presentation mode (overrides the policy).
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Print one JSON object per durable event on stdout instead of the final text.
    #[arg(long)]
    pub json: bool,
}

/// A session and an agent over it, ready for prompts.
pub struct Started {
    /// The harness, the log and the renderer.
    pub prepared: super::run::Prepared,
    /// The agent loop.
    pub agent: Agent,
    /// Whether the model's text streams to stdout as it comes.
    pub streaming: bool,
    /// The stream's view when it streams (its status line follows each turn).
    pub view: Option<super::stream_view::StreamView>,
}

/// Checks everything, opens (or resumes) the session and builds the agent.
pub async fn start(args: &ModelArgs, json: bool) -> Result<Started, Exit> {
    let workspace = super::options::workspace_or_cwd(args.pipeline.workspace.as_ref())?;
    let file = super::config_file::load(&workspace, args.pipeline.trust_workspace)?;
    let model = model_config::resolve(
        Choice {
            provider: args.provider,
            model: args.model.clone(),
            base_url: args.base_url.clone(),
            idle_timeout: args.idle_timeout,
        },
        &file,
    )?;
    let policy = super::options::load_policy_or(
        args.pipeline.policy.as_deref(),
        file.policy.clone(),
        args.max_parallel,
        args.mode,
        args.pipeline.preset,
    )?;
    let max_parallel = policy.max_parallel_tool_calls;
    // With the store named by DSH_STORE, an existing log file given by its path is that file.
    let named: Vec<&std::path::Path> = args
        .session
        .iter()
        .map(PathBuf::as_path)
        .chain(
            args.resume
                .iter()
                .filter(|r| !r.is_empty())
                .map(std::path::Path::new),
        )
        .collect();
    let store_url = args.pipeline.store.url_for_logs(&named)?;
    let session = match (&args.resume, &store_url) {
        (None, _) => args.session.clone(),
        (Some(which), Some(url)) if which.is_empty() => {
            let root = workspace
                .canonicalize()
                .map_err(|e| Exit::usage(format!("workspace {}: {e}", workspace.display())))?;
            let store = super::store::connect(url).await?;
            Some(PathBuf::from(
                super::store::most_recent(&store, url, &root).await?,
            ))
        }
        (Some(which), Some(url)) => {
            super::store::resumable(url, which).await?;
            Some(PathBuf::from(which))
        }
        (Some(which), None) => {
            let root = workspace
                .canonicalize()
                .map_err(|e| Exit::usage(format!("workspace {}: {e}", workspace.display())))?;
            Some(super::sessions::find(&root, which)?)
        }
    };
    let grants = super::run::grants(&workspace)?;
    let prepared = prepare(Setup {
        script_text: None,
        workspace: &workspace,
        session,
        store: store_url,
        policy,
        approvals: super::run::approvals(args.approve, &grants),
        grants: Some(grants.clone()),
        demo_tools: false,
        json,
        // stdout carries the model's answer (or, with --json, the events).
        stderr: !json,
        hooks: HookSources::Standard {
            explicit: args.pipeline.settings.clone(),
            trust_workspace: args.pipeline.trust_workspace,
        },
    })
    .await?;
    // What the model is offered is what `dsh tools` prints: Code Mode's presentation under
    // `--mode code|both` (its typed SDK joins the system prompt), never a tool the rules deny
    // outright.
    let harness = &prepared.harness;
    let agent_id = harness.agent().clone();
    let (mut offered, sdk) = match super::tools::code_mode_offer(harness, &agent_id)? {
        Some((tools, sdk)) => (tools, Some(sdk)),
        None => (harness.registry().schemas(Some(&agent_id)), None),
    };
    offered.retain(|s| !harness.denies_every_call(&s.name));
    let mut system = args
        .system
        .clone()
        .or_else(|| file.system.clone())
        .unwrap_or_else(|| SYSTEM.to_owned());
    if let Some(sdk) = sdk.filter(|s| !s.trim().is_empty()) {
        system = format!("{system}\n\n{sdk}");
    }
    let limits = Limits {
        max_steps: args.max_steps.or(file.max_steps),
        ..Limits::default()
    };
    let config = AgentConfig::new(model.provider, model.model)
        .with_system(system)
        .with_limits(limits)
        .with_max_parallel(max_parallel)
        .with_tool_offer(move |_| offered.clone());
    let agent = Agent::with_agent_id(
        harness.runtime().clone(),
        harness.session().clone(),
        config,
        Some(agent_id),
    );
    let streaming = !json && std::io::stdout().is_terminal();
    let view = streaming.then(|| super::stream_view::StreamView::new(file.prices));
    if let Some(view) = &view {
        agent.set_hooks(view.clone());
    }
    Ok(Started {
        prepared,
        agent,
        streaming,
        view,
    })
}

/// Runs `dsh agent`.
pub async fn agent(args: AgentArgs) -> Result<i32, Exit> {
    let json = args.model.json;
    let Started {
        prepared,
        agent,
        streaming,
        view,
    } = start(&args.model, json).await?;
    let mut interrupts = super::run::on_interrupts({
        let agent = agent.clone();
        move || agent.cancel(Cancel::user())
    })
    .await;
    let outcome = tokio::select! {
        outcome = agent.prompt(&args.prompt) => outcome,
        Ok(()) = &mut interrupts.hard_stop => return Err(Exit { code: 130, message: None }),
    };
    drop(interrupts);
    super::close_servers(&prepared.harness).await;
    let closed = prepared.harness.session().close().await;
    if outcome.is_err() || closed.is_err() {
        prepared.renderer.flush_unrecorded();
    }
    let outcome = outcome.map_err(|e| Exit::internal(format!("the turn failed: {e}")))?;
    if let Err(e) = closed {
        return Err(Exit::internal(format!(
            "closing {}: {e}",
            prepared.log.display()
        )));
    }
    let Some(outcome) = outcome else {
        return Err(Exit::internal("the turn did not run"));
    };
    if !json {
        if streaming {
            super::out("");
        } else if !outcome.text.is_empty() {
            super::out(&super::render::sanitize(&outcome.text));
        }
        if let Some(view) = &view {
            err_line!("{}", view.end_turn());
        }
        err_line!("{}", prepared.renderer.summary());
        err_line!("log: {}", prepared.log.display());
    }
    end_code(&outcome.end, &prepared.log)
}

/// The exit code of a turn's end: 0 completed, 130 cancelled, 2 what the user has to fix (the
/// key, the model, the URL, the server, a status no retry changes such as 501), 1 anything
/// else (a 429 or 5xx still failing after the last attempt, a stream that stalled); each
/// failure is one sentence.
pub fn end_code(end: &TurnEnd, log: &std::path::Path) -> Result<i32, Exit> {
    match end {
        TurnEnd::Completed => Ok(0),
        TurnEnd::Aborted(_) => Ok(130),
        TurnEnd::Failed(error) => {
            let error = error.value();
            let message = error["message"]
                .as_str()
                .unwrap_or("the model request failed");
            let code = match error["code"].as_str() {
                Some(
                    "AUTH" | "NOT_FOUND" | "BAD_REQUEST" | "STATUS" | "NETWORK" | "NOT_THE_API",
                ) => 2,
                _ => 1,
            };
            Err(Exit {
                code,
                message: Some(format!("{message} (log: {})", log.display())),
            })
        }
        TurnEnd::MaxTokens => Err(Exit::internal(
            "the model stopped at its output limit before it finished",
        )),
        TurnEnd::Limit(limit) => Err(Exit::internal(format!(
            "the turn reached its {limit} limit"
        ))),
        other => Err(Exit::internal(format!(
            "the turn ended: {}",
            other.reason_json()
        ))),
    }
}
