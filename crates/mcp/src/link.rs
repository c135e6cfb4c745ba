//! The connection to one server: started (a child process dsh owns, or an HTTP endpoint),
//! handshaken and listed within the start-up budget, and started again, with backoff, when it
//! has died.
//!
//! Guarantees: a call never goes to a connection known to be closed; a server that died is
//! started again for the next call (at most [`MAX_RESTARTS`] times, waiting 200 ms, 400 ms, ...
//! up to 5 s before each), and a call it died under fails naming the server, its exit status
//! and its last words on stderr; the process and everything it started (its process group,
//! owned through `dsh-process`: `SIGTERM`, a short grace, then `SIGKILL`) end when the link is
//! dropped or the server is started again, or, closed by the host ([`Link::close`]), once the
//! server exited on its own after its input closed (or was ended after a wait), and are killed at once, with every other live
//! group, when dsh must exit at once (`dsh_process::kill_all_live_groups`) or its runtime
//! shuts down under a link its own tools keep alive. The tool list is read again after each
//! restart and on each `notifications/tools/list_changed`, and the new list replaces the
//! server's tools in the registry they were registered in.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_core::{Failure, ToolRegistry};
use dsh_process::EndOnDrop;
use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig, StreamableHttpError,
};
use tokio::io::AsyncBufReadExt;

use crate::config::ServerConfig;
use crate::error::McpError;
use crate::hub::{Client, Hub};
use crate::in_order::InOrder;

/// At most this many of a server's last stderr lines are kept, to say why it failed.
const STDERR_LINES: usize = 20;

/// How many times a dead server is started again before its calls just fail.
pub const MAX_RESTARTS: u32 = 5;

/// A running connection.
pub(crate) type Service = Arc<RunningService<RoleClient, Client>>;

/// One server's connection, restarted when it dies.
pub(crate) struct Link {
    name: Arc<str>,
    pub(crate) config: ServerConfig,
    live: tokio::sync::Mutex<Live>,
    restarts: AtomicU32,
    /// Closed by the host ([`Link::close`]): never started again.
    closed: std::sync::atomic::AtomicBool,
    pub(crate) hub: Arc<Hub>,
    /// The tools the server listed last.
    tools: Mutex<Vec<rmcp::model::Tool>>,
    /// Where its tools are registered (set by `McpServer::register`), to replace them there
    /// when the list changes.
    registry: Mutex<Option<ToolRegistry>>,
    /// The server's own names of the tools it listed once and no longer lists.
    withdrawn: Mutex<std::collections::HashSet<String>>,
    /// Where the whole text of a result too long to show is saved.
    spool: Mutex<Option<std::path::PathBuf>>,
}

/// The current connection and the process behind it (none over HTTP).
struct Live {
    service: Service,
    child: Option<tokio::process::Child>,
    /// The last lines this process (not an earlier one) wrote on stderr.
    stderr: Tail,
    /// Becomes true once its stderr was read to its end (none over HTTP).
    stderr_read: Option<tokio::sync::watch::Receiver<bool>>,
    /// The process group the server leads (`dsh-process`: ended, `SIGTERM`, [`GROUP_GRACE`],
    /// then `SIGKILL`, when this connection is replaced or dropped, and killed with every other
    /// live group when dsh exits at once; declared after `child` so it is dropped after it).
    group: Option<EndOnDrop>,
}

/// A process's last lines on stderr.
type Tail = Arc<Mutex<VecDeque<String>>>;

/// How long the members of a server's process group have, after `SIGTERM`, before `SIGKILL`.
const GROUP_GRACE: Duration = Duration::from_millis(500);

impl Link {
    /// Connects for the first time, the server's tools listed.
    pub(crate) async fn open(name: &str, config: &ServerConfig) -> Result<Arc<Link>, McpError> {
        config.check(name)?;
        let hub = Arc::new(Hub::default());
        let (live, tools) = connect(name, config, &hub).await?;
        let service = live.service.clone();
        let link = Arc::new(Link {
            name: Arc::from(name),
            config: config.clone(),
            live: tokio::sync::Mutex::new(live),
            restarts: AtomicU32::new(0),
            closed: std::sync::atomic::AtomicBool::new(false),
            hub,
            tools: Mutex::new(tools),
            registry: Mutex::new(None),
            withdrawn: Mutex::new(std::collections::HashSet::new()),
            spool: Mutex::new(None),
        });
        let _ = link.hub.link.set(Arc::downgrade(&link));
        link.watch(&service);
        Ok(link)
    }

    /// Where long results are saved, when the host said.
    pub(crate) fn spool_dir(&self) -> Option<std::path::PathBuf> {
        self.spool.lock().ok().and_then(|s| s.clone())
    }

    /// Saves long results in `dir` from now on.
    pub(crate) fn set_spool_dir(&self, dir: std::path::PathBuf) {
        if let Ok(mut s) = self.spool.lock() {
            *s = Some(dir);
        }
    }

    /// Whether the server listed its tool `tool` once and no longer does.
    pub(crate) fn withdrew(&self, tool: &str) -> bool {
        self.withdrawn.lock().is_ok_and(|w| w.contains(tool))
    }

    /// The tools the server listed last.
    pub(crate) fn tools(&self) -> Vec<rmcp::model::Tool> {
        self.tools.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Registers the tools in `registry` (replacing the ones registered before), and keeps
    /// doing so when the list changes.
    pub(crate) fn register(self: &Arc<Self>, registry: &ToolRegistry) -> Result<(), McpError> {
        let defs = crate::server::definitions(self, &self.tools())?;
        registry
            .replace_group(&self.name, defs)
            .map_err(|source| McpError::Register {
                server: self.name.to_string(),
                source,
            })?;
        if let Ok(mut r) = self.registry.lock() {
            *r = Some(registry.clone());
        }
        Ok(())
    }

    /// Takes `tools` as the server's list, and re-registers them where they were registered.
    fn install(self: &Arc<Self>, tools: Vec<rmcp::model::Tool>) {
        let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        tracing::info!(server = %self.name, tools = ?names, "MCP server: tool list read");
        if let (Ok(mut t), Ok(mut w)) = (self.tools.lock(), self.withdrawn.lock()) {
            w.extend(t.iter().map(|old| old.name.to_string()));
            for new in &tools {
                w.remove(new.name.as_ref());
            }
            *t = tools.clone();
        }
        let registry = self.registry.lock().ok().and_then(|r| r.clone());
        let Some(registry) = registry else { return };
        let replaced = crate::server::definitions(self, &tools).and_then(|defs| {
            registry
                .replace_group(&self.name, defs)
                .map_err(|source| McpError::Register {
                    server: self.name.to_string(),
                    source,
                })
        });
        match replaced {
            Ok(_) => self.hub.changed(&self.name),
            Err(e) => {
                tracing::warn!(server = %self.name, "MCP server: its new tool list is refused: {e}")
            }
        }
    }

    /// Reads the tool list again (after `tools/list_changed`) and installs it.
    pub(crate) async fn relist(self: Arc<Self>) {
        let _one = self.hub.relisting.lock().await;
        let service = self.live.lock().await.service.clone();
        if service.is_closed() {
            return; // the restart reads it
        }
        match service.peer().list_all_tools().await {
            Ok(tools) => self.install(tools),
            Err(e) => {
                tracing::warn!(server = %self.name, "MCP server: listing its tools again: {e}")
            }
        }
    }

    /// Says which protocol version the connection speaks (dsh uses the `initialize`
    /// handshake: 2025-11-25 at most, whose servers send `tools/list_changed` unasked).
    fn watch(&self, service: &Service) {
        let version = service
            .peer()
            .peer_info()
            .map(|i| i.protocol_version.clone());
        tracing::debug!(server = %self.name, ?version, "MCP server: connected");
    }

    /// The server's name.
    pub(crate) fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// Ends the connection as the MCP stdio transport asks a client to: the server's input is
    /// closed first, so it reads everything sent before (a `notifications/cancelled` included)
    /// and exits on its own; only a server still running after `within` gets `SIGTERM`, then
    /// `SIGKILL` after the group's grace. A closed link is never started again. Over HTTP, the
    /// session is closed and there is no process to wait for.
    pub(crate) async fn close(&self, within: Duration) {
        self.closed.store(true, Ordering::Release);
        let mut live = self.live.lock().await;
        // The service's task ends, dropping the transport: the server's stdin is closed.
        live.service.cancellation_token().cancel();
        if let Some(child) = live.child.as_mut() {
            match tokio::time::timeout(within, child.wait()).await {
                Ok(_) => {
                    tracing::debug!(server = %self.name, "MCP server: exited once its input closed")
                }
                Err(_) => tracing::warn!(
                    server = %self.name,
                    "MCP server still running {within:?} after its input closed; ending it"
                ),
            }
        }
        if let Some(group) = live.group.take() {
            group.end().await;
        }
    }

    /// A live connection: the current one, or, when it has died, a new one.
    pub(crate) async fn service(self: &Arc<Self>) -> Result<Service, Failure> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Failure::new(format!(
                "MCP server `{}` was closed by dsh",
                self.name
            )));
        }
        let mut live = self.live.lock().await;
        let exited = live
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        // A connection the server broke the protocol on is closed, or about to be.
        if !live.service.is_closed() && exited.is_none() && self.hub.broken().is_none() {
            return Ok(live.service.clone());
        }
        let n = self.restarts.fetch_add(1, Ordering::Relaxed) + 1;
        if n > MAX_RESTARTS {
            return Err(Failure::new(format!(
                "MCP server `{}` has died {} times and is not started again",
                self.name,
                MAX_RESTARTS + 1
            )));
        }
        let wait = Duration::from_millis(200u64 << (n - 1).min(5)).min(Duration::from_secs(5));
        tracing::warn!(
            server = %self.name,
            "MCP server died ({}); starting it again in {wait:?} (restart {n} of {MAX_RESTARTS})",
            exited.map_or_else(
                || self.hub.broken().unwrap_or_else(|| "its connection closed".to_owned()),
                |s| s.to_string()
            )
        );
        tokio::time::sleep(wait).await;
        match connect(&self.name, &self.config, &self.hub).await {
            Ok((fresh, tools)) => {
                *live = fresh;
                let service = live.service.clone();
                drop(live);
                // A new process may offer other tools.
                self.install(tools);
                self.watch(&service);
                Ok(service)
            }
            Err(e) => Err(Failure::new(format!(
                "MCP server `{}` died and could not be started again: {e}",
                self.name
            ))),
        }
    }

    /// What a call that failed on the connection should say: the server's exit status when it
    /// has exited, and its last words.
    pub(crate) async fn why(&self, error: &rmcp::ServiceError) -> String {
        let (exited, stderr) = {
            let mut live = self.live.lock().await;
            let exited = match live.child.as_mut() {
                // Give a dying process a moment to be reaped, so its status can be named.
                Some(child) => tokio::time::timeout(Duration::from_millis(200), child.wait())
                    .await
                    .ok()
                    .and_then(Result::ok),
                None => None,
            };
            // Its last words may still be in the pipe when it is reaped: read them first (a
            // moment at most: a child it left behind may hold the pipe open).
            if exited.is_some()
                && let Some(read) = live.stderr_read.as_mut()
            {
                let _ =
                    tokio::time::timeout(Duration::from_millis(200), read.wait_for(|r| *r)).await;
            }
            (exited, live.stderr.clone())
        };
        let said = last_lines(&stderr);
        let next = if self.restarts.load(Ordering::Relaxed) >= MAX_RESTARTS {
            format!(
                "it has been started again {MAX_RESTARTS} times already and is not started \
                 again: its tools fail from now on"
            )
        } else {
            "the server is started again for the next call".to_owned()
        };
        let said = if said.is_empty() {
            String::new()
        } else {
            format!("; it said: {said}")
        };
        if let Some(broke) = self.hub.broken() {
            return format!(
                "MCP server `{}` broke the protocol: {broke}; the connection is closed, the call \
                 fails, and {next}{said}",
                self.name
            );
        }
        match exited {
            Some(status) => format!(
                "MCP server `{}` exited ({status}) during the call{said}; {next}",
                self.name
            ),
            None => format!(
                "MCP server `{}` failed the call: {}{said}",
                self.name,
                plain(error, &self.config)
            ),
        }
    }
}

/// What went wrong on a server's connection, in words (rmcp's own say "Transport [<a Rust type
/// name>] error" or "Mcp error"): how the server is reached, then the cause.
fn plain(error: &rmcp::ServiceError, config: &ServerConfig) -> String {
    use rmcp::ServiceError as E;
    let wire = match (&config.command, &config.url) {
        (None, Some(url)) => format!("over streamable HTTP at {url}"),
        _ => "over stdio".to_owned(),
    };
    match error {
        E::TransportClosed => format!("its connection {wire} closed"),
        E::TransportSend(e) => {
            // The cause, without the transport's type name; an HTTP client's error with its
            // own causes ("connection refused" is three levels down).
            let text = match e
                .error
                .downcast_ref::<StreamableHttpError<reqwest::Error>>()
            {
                Some(StreamableHttpError::Client(client)) => chain(client),
                _ => chain(&*e.error),
            };
            format!("the request could not be sent {wire}: {text}")
        }
        E::McpError(e) => format!(
            "it answered with a JSON-RPC error {}: {}",
            e.code.0, e.message
        ),
        E::Timeout { timeout } => format!("no answer {wire} within {timeout:?}"),
        other => format!("{other} ({wire})"),
    }
}

/// An error and its causes on one line, each said once.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

/// Starts the server (or opens the endpoint), completes the handshake and lists its tools,
/// within the start-up budget.
async fn connect(
    name: &str,
    config: &ServerConfig,
    hub: &Arc<Hub>,
) -> Result<(Live, Vec<rmcp::model::Tool>), McpError> {
    // Each process has its own: an earlier one's last words would tell the wrong story.
    let stderr: &Tail = &Arc::new(Mutex::new(VecDeque::new()));
    let client = Client {
        server: Arc::from(name),
        hub: hub.clone(),
    };
    let budget = config.startup_timeout();
    let handshake = |e: &dyn std::fmt::Display| McpError::Handshake {
        server: name.to_owned(),
        detail: e.to_string(),
    };
    let started = tokio::time::timeout(budget, async {
        let (service, child, group, stderr_read) = match (&config.command, &config.url) {
            (Some(command), _) => {
                if let Some(cwd) = &config.cwd {
                    check_cwd(name, cwd).await?;
                }
                let (mut child, group, read) = spawn(name, command, config, stderr)?;
                let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                    return Err(handshake(&"its stdin and stdout could not be opened"));
                };
                hub.mend();
                let stdout = crate::guarded::Guarded::new(stdout, hub.clone());
                let transport = AsyncRwTransport::new_client(stdout, stdin);
                let service = client
                    .serve(InOrder::new(transport, Arc::from(name), hub.clone()))
                    .await
                    .map_err(|e| handshake(&e))?;
                (service, Some(child), group, Some(read))
            }
            (None, Some(url)) => {
                let transport = http(name, url, config)?;
                let service = client
                    .serve(InOrder::new(transport, Arc::from(name), hub.clone()))
                    .await
                    .map_err(|e| handshake(&e))?;
                (service, None, None, None)
            }
            (None, None) => {
                return Err(McpError::Config {
                    server: name.to_owned(),
                    problem: "no `command` and no `url`".to_owned(),
                });
            }
        };
        let tools = service
            .peer()
            .list_all_tools()
            .await
            .map_err(|source| McpError::List {
                server: name.to_owned(),
                source: Box::new(source),
            })?;
        Ok((
            Live {
                service: Arc::new(service),
                child,
                stderr: stderr.clone(),
                stderr_read,
                group,
            },
            tools,
        ))
    })
    .await;
    match started {
        Ok(Ok(ok)) => Ok(ok),
        Ok(Err(McpError::Handshake { server, detail })) => {
            // The server's own last words say more than the protocol error.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let said = last_lines(stderr);
            Err(McpError::Handshake {
                server,
                detail: if said.is_empty() {
                    detail
                } else {
                    format!("{detail}; it said: {said}")
                },
            })
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err(McpError::Timeout {
            server: name.to_owned(),
            after: budget,
            // Why it hangs is often on its stderr (a prompt, a missing setting).
            said: last_lines(stderr),
        }),
    }
}

/// Refuses a `cwd` that is not a directory, naming it (the spawn itself would only say "No
/// such file or directory", as if the command were missing).
async fn check_cwd(name: &str, cwd: &std::path::Path) -> Result<(), McpError> {
    let problem = match tokio::fs::metadata(cwd).await {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => format!("its cwd {} is not a directory", cwd.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            format!("its cwd {} does not exist", cwd.display())
        }
        Err(e) => format!("its cwd {} cannot be used: {e}", cwd.display()),
    };
    Err(McpError::Config {
        server: name.to_owned(),
        problem,
    })
}

/// Starts `command` with piped stdio in a process group of its own (ended, whole, when the
/// returned guard is dropped), its stderr's last lines kept; the receiver turns true once its
/// stderr was read to its end.
fn spawn(
    name: &str,
    command: &str,
    config: &ServerConfig,
    lines: &Arc<Mutex<VecDeque<String>>>,
) -> Result<
    (
        tokio::process::Child,
        Option<EndOnDrop>,
        tokio::sync::watch::Receiver<bool>,
    ),
    McpError,
> {
    let mut cmd = tokio::process::Command::new(command);
    for var in dsh_process::WITHHELD_ENV {
        cmd.env_remove(var);
    }
    cmd.args(&config.args)
        .envs(&config.env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some(cwd) = &config.cwd {
        cmd.current_dir(cwd);
    }
    let (mut child, group) = dsh_process::lead(&mut cmd).map_err(|source| McpError::Spawn {
        server: name.to_owned(),
        command: command.to_owned(),
        source,
    })?;
    let group = group
        .group()
        .is_some()
        .then(|| group.end_on_drop(GROUP_GRACE));
    let (read_to_end, read) = tokio::sync::watch::channel(false);
    if let Some(stderr) = child.stderr.take() {
        let keep = lines.clone();
        let server = name.to_owned();
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                tracing::debug!(server = %server, "MCP server stderr: {line}");
                if let Ok(mut kept) = keep.lock() {
                    if kept.len() == STDERR_LINES {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
            }
            let _ = read_to_end.send(true);
        });
    } else {
        let _ = read_to_end.send(true);
    }
    Ok((child, group, read))
}

/// The streamable HTTP transport to `url`, with the table's headers and bearer token.
fn http(
    name: &str,
    url: &str,
    config: &ServerConfig,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, McpError> {
    let bad = |problem: String| McpError::Config {
        server: name.to_owned(),
        problem,
    };
    let mut headers = std::collections::HashMap::new();
    for (k, v) in &config.headers {
        let key = reqwest::header::HeaderName::try_from(k.as_str())
            .map_err(|e| bad(format!("header `{k}`: {e}")))?;
        let value = reqwest::header::HeaderValue::try_from(v.as_str())
            .map_err(|e| bad(format!("header `{k}`: {e}")))?;
        headers.insert(key, value);
    }
    let mut transport = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    if let Some(env) = &config.bearer_token_env {
        let token = std::env::var(env)
            .ok()
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| bad(format!("`bearer_token_env` names {env}, which is not set")))?;
        transport = transport.auth_header(token);
    }
    Ok(StreamableHttpClientTransport::from_config(transport))
}

/// The last three lines a server wrote on stderr, on one line.
fn last_lines(lines: &Mutex<VecDeque<String>>) -> String {
    lines
        .lock()
        .map(|l| {
            l.iter()
                .rev()
                .take(3)
                .rev()
                .cloned()
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .unwrap_or_default()
}
