//! The `dsh` command line: argument parsing, subcommands and exit codes.
//!
//! Exit codes: 0 the command did its job (tool failures are results); 1 an internal error (or,
//! for `check` and `repair`, a log with problems left); 2 bad usage (arguments, script, policy;
//! for `agent` and `chat`, a model request that cannot succeed as configured); 130 interrupted
//! or cancelled (the log still checks clean).

// Every stdout line goes through `out` (a lost line is an error the command ends with, never
// a panic), so `print!` and `println!` are refused here.
#![deny(clippy::print_stdout)]

/// `eprintln!` that never panics: a closed or broken stderr (`dsh ... 2>&1 | head`) loses the
/// line instead of ending the command with a panic (exit 101).
macro_rules! err_line {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

#[cfg(feature = "agent")]
mod agent;
mod approve;
#[cfg(feature = "agent")]
mod chat;
#[cfg(feature = "agent")]
mod config_file;
mod demo;
#[cfg(feature = "agent")]
mod duration;
mod logs;
#[cfg(feature = "mcp-serve")]
mod mcp;
#[cfg(feature = "mcp-serve")]
mod mcp_rounds;
#[cfg(feature = "mcp-serve")]
mod mcp_stop;
#[cfg(feature = "agent")]
mod model_config;
mod options;
#[cfg(feature = "otel")]
mod otel;
mod panics;
mod percent;
mod render;
mod run;
mod sandbox;
mod sessions;
mod signals;
mod store;
mod store_url;
#[cfg(feature = "agent")]
mod stream_view;
mod tools;
mod trust;
#[cfg(feature = "view")]
mod view;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// The tool execution pipeline of an agent harness.
#[derive(Parser, Debug)]
#[command(
    name = "dsh",
    version,
    about = "Run an agent's tool calls through the dsh pipeline, and check, repair or read its session logs",
    long_about = None,
    after_help = "Start with `dsh demo`.\n\nExit codes: 0 done (tool failures are results), 1 internal error or (check, repair) a log with problems left, 2 bad usage (arguments, script, policy; for agent and chat, a model request that cannot succeed as configured: the key, the model, the URL, a status no retry changes), 130 interrupted or cancelled by Ctrl-C, SIGTERM or SIGHUP (the log still checks clean; a second signal exits at once and leaves the log for `dsh repair` or the next open)."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a bundled scripted session on a copy of a small project, through the full pipeline.
    Demo,
    /// Run a scripted model (JSON Lines of assistant messages) through the pipeline.
    Run(run::RunArgs),
    /// Ask a model (DeepSeek, OpenAI or Anthropic); its tool calls run through the pipeline and
    /// its final text is printed.
    #[cfg(feature = "agent")]
    Agent(agent::AgentArgs),
    /// Talk with a model in the terminal: each line a turn of one session, its tool calls
    /// through the pipeline.
    #[cfg(feature = "agent")]
    Chat(chat::ChatArgs),
    /// List the workspace's sessions, newest first: id, time, size, first prompt.
    Sessions(sessions::SessionsArgs),
    /// Show sessions in the browser: turns, steps, each call's waterfall, arguments, result and
    /// decisions, followed live (a local server on 127.0.0.1 with a token in its URL); with
    /// `--store`, a PostgreSQL store's sessions.
    #[cfg(feature = "view")]
    View(view::ViewArgs),
    /// Print the tool definitions a model would be sent under the policy and mode (JSON).
    Tools(tools::ToolsArgs),
    /// Check session logs; prints each problem with its file and line.
    Check {
        /// Log files to check (with `--store`: session ids).
        #[arg(required = true)]
        logs: Vec<PathBuf>,
        #[command(flatten)]
        store: store::StoreArg,
    },
    /// Print the model-visible history of a log as JSON.
    Transcript {
        /// The log file (with `--store`: a session id).
        log: PathBuf,
        /// The shape of the history.
        #[arg(long, value_enum, default_value_t = Format::Dsh)]
        format: Format,
        #[command(flatten)]
        store: store::StoreArg,
    },
    /// Repair a log left by a crash: cut a torn line, close unpaired calls, open steps and turns.
    Repair {
        /// The log file (with `--store`: a session id).
        log: PathBuf,
        #[command(flatten)]
        store: store::StoreArg,
    },
    /// Write a stored session's log (JSON Lines, as a file holds it) to stdout.
    Export(store::ExportArgs),
    /// Load a JSON Lines log into the store as a new session, losslessly.
    Import(store::ImportArgs),
    /// Print a stored session's lines as they are written, until its writer is gone.
    Tail(store::TailArgs),
    /// MCP: `dsh mcp serve` offers dsh's tools to any MCP client, through the pipeline.
    #[cfg(feature = "mcp-serve")]
    Mcp(mcp::McpArgs),
    /// The `bash` tool's sandbox helper (internal).
    #[command(name = "__sandbox-exec", hide = true)]
    SandboxExec(sandbox::SandboxExecArgs),
}

/// Transcript shapes.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    /// OpenAI Chat Completions messages.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// The harness's own message shape.
    Dsh,
}

/// Writes a line to stdout; a closed pipe (`dsh transcript | head`) is not an error worth a panic.
pub fn out(line: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(line.as_bytes())
        .and_then(|()| stdout.write_all(b"\n"))
    {
        let _ = STDOUT_FAILED.set(e);
    }
}

/// The first error writing standard output met (a full disk, a closed pipe): the command
/// ends with it ([`stdout_verdict`]) instead of claiming success for output that was lost.
static STDOUT_FAILED: std::sync::OnceLock<std::io::Error> = std::sync::OnceLock::new();

/// Whether writing standard output has failed (a reader that streams, such as `dsh tail`,
/// stops then).
pub fn stdout_failed() -> bool {
    STDOUT_FAILED.get().is_some()
}

/// The exit code once standard output is flushed: `code`, or 1 with a sentence when output
/// was lost (a full disk, an I/O error). A closed pipe (`dsh transcript ID | head`) is the
/// reader's choice: quiet, and the code stays.
fn stdout_verdict(code: i32) -> i32 {
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().flush() {
        let _ = STDOUT_FAILED.set(e);
    }
    match STDOUT_FAILED.get() {
        Some(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            err_line!("dsh: cannot write to standard output: {e}");
            if code == 0 { 1 } else { code }
        }
        _ => code,
    }
}

/// A failure with its exit code.
pub struct Exit {
    pub code: i32,
    pub message: Option<String>,
}

impl Exit {
    pub fn usage(message: impl Into<String>) -> Exit {
        Exit {
            code: 2,
            message: Some(message.into()),
        }
    }
    pub fn internal(message: impl Into<String>) -> Exit {
        Exit {
            code: 1,
            message: Some(message.into()),
        }
    }
}

impl From<anyhow::Error> for Exit {
    fn from(e: anyhow::Error) -> Exit {
        Exit::internal(format!("{e:#}"))
    }
}

/// Runs the program; returns the exit code.
/// Warnings (a hook that cannot run, times out or answers garbage; a hook point dsh does not
/// run) go to stderr: `warn` and above by default, `RUST_LOG` honoured (`RUST_LOG=dsh=debug`).
/// The MCP library's own warnings (a broken stream, in its internal types' words) are left out
/// by default: the call they break fails saying so. An unparsable `RUST_LOG` falls back to the
/// default and says so.
fn install_tracing() -> Option<Telemetry> {
    const DEFAULT_LOG: &str = "warn,rmcp=error";
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let (filter, bad) = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => match EnvFilter::try_new(&v) {
            Ok(f) => (f, None),
            Err(e) => (EnvFilter::new(DEFAULT_LOG), Some(format!("{v:?}: {e}"))),
        },
        _ => (EnvFilter::new(DEFAULT_LOG), None),
    };
    // Colour only on a terminal (and never with NO_COLOR): a log file or a pipe gets plain text.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_target(false)
        .without_time()
        .with_filter(filter);
    #[cfg(feature = "otel")]
    let (otel, telemetry, otel_problem) = match otel::layer() {
        Ok(Some((layer, guard))) => (Some(layer), Some(guard), None),
        Ok(None) => (None, None, None),
        Err(problem) => (None, None, Some(problem)),
    };
    #[cfg(not(feature = "otel"))]
    let (otel, telemetry, otel_problem): (
        Option<tracing_subscriber::layer::Identity>,
        _,
        Option<String>,
    ) = (None, None, None);
    let installed = tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init()
        .is_ok();
    if let (true, Some(bad)) = (installed, bad) {
        tracing::warn!("RUST_LOG ignored, using {DEFAULT_LOG:?}: {bad}");
    }
    if let Some(problem) = otel_problem {
        err_line!("dsh: OpenTelemetry: {problem}");
    }
    telemetry
}

/// The trace exporter while the program runs (nothing without the `otel` feature).
#[cfg(feature = "otel")]
type Telemetry = otel::Otel;
#[cfg(not(feature = "otel"))]
type Telemetry = ();

/// How long an MCP server has, once dsh closed its input at the end of a command, to exit on
/// its own before it is ended (servers exit at once on end of input).
#[cfg(feature = "mcp")]
const MCP_CLOSE_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Closes the harness's MCP servers before dsh exits (see [`dsh::Harness::close_mcp_servers`]):
/// a server killed with dsh could miss what dsh sent it last.
pub async fn close_servers(harness: &dsh::Harness) {
    #[cfg(feature = "mcp")]
    harness.close_mcp_servers(MCP_CLOSE_WITHIN).await;
    #[cfg(not(feature = "mcp"))]
    let _ = harness;
}

pub fn main() -> i32 {
    // The sandbox helper starts once per `bash` call: it skips building the whole parser.
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == dsh::bash::DSH_SUBCOMMAND) {
        dsh::bash::sandbox::exec_sandboxed(args)
    }
    let cli = Cli::parse();
    // The sandbox helper contains itself and execs before any runtime thread exists.
    let command = match cli.command {
        Command::SandboxExec(args) => sandbox::exec(args),
        other => other,
    };
    let telemetry = install_tracing();
    // A panic anywhere (a spawned task's broken invariant, say) ends the program with a message
    // instead of leaving it waiting for work that will never finish.
    panics::install();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            err_line!("dsh: cannot start the runtime: {e}");
            return 1;
        }
    };
    let outcome = panics::block_on(&rt, async move {
        match command {
            Command::Demo => demo::demo().await,
            Command::Run(args) => run::run(args).await,
            #[cfg(feature = "agent")]
            Command::Agent(args) => agent::agent(args).await,
            #[cfg(feature = "agent")]
            Command::Chat(args) => chat::chat(args).await,
            Command::Sessions(args) => sessions::sessions(args).await,
            Command::Tools(args) => tools::tools(args).await,
            #[cfg(feature = "view")]
            Command::View(args) => view::view(args).await,
            #[cfg(feature = "mcp-serve")]
            Command::Mcp(args) => mcp::mcp(args).await,
            Command::Check { logs, store } => {
                match store.url_for_logs(&logs.iter().map(PathBuf::as_path).collect::<Vec<_>>())? {
                    // `DSH_STORE` names the store and some operands are files: each operand
                    // is checked as what it is, in the order given.
                    Some(url)
                        if store.named_by_environment() && logs.iter().any(|l| l.is_file()) =>
                    {
                        let mut code = 0;
                        for log in &logs {
                            let one = std::slice::from_ref(log);
                            let checked = if log.is_file() {
                                logs::check(one)?
                            } else {
                                store::check(&url, one).await?
                            };
                            code = code.max(checked);
                        }
                        Ok(code)
                    }
                    Some(url) => store::check(&url, &logs).await,
                    None => logs::check(&logs),
                }
            }
            Command::Transcript { log, format, store } => match store.url_for_logs(&[&log])? {
                Some(url) => store::transcript(&url, &store::id_of(&log)?, format).await,
                None => logs::transcript(&log, format),
            },
            Command::Repair { log, store } => match store.url_for_logs(&[&log])? {
                Some(url) => store::repair(&url, &store::id_of(&log)?).await,
                None => logs::repair(&log),
            },
            Command::Export(args) => store::export(args).await,
            Command::Import(args) => store::import(args).await,
            Command::Tail(args) => store::tail(args).await,
            Command::SandboxExec(args) => sandbox::exec(args),
        }
    });
    // A terminal question cancelled mid-read leaves a blocking stdin read behind; the log is
    // closed by now, so do not wait for someone to press Enter.
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    #[cfg(feature = "otel")]
    if let Some(telemetry) = telemetry {
        telemetry.shutdown();
    }
    #[cfg(not(feature = "otel"))]
    let () = telemetry.unwrap_or(());
    let code = match outcome {
        Ok(code) => code,
        Err(exit) => {
            if let Some(m) = exit.message {
                err_line!("dsh: {}", render::sanitize(&m));
            }
            exit.code
        }
    };
    stdout_verdict(code)
}
