//! `dsh mcp serve`: dsh as an MCP server (stdio, or streamable HTTP with `--http`), its tools
//! behind the whole pipeline.
//!
//! Guarantees: `tools/list` offers the tools the policy leaves callable (a tool every call of
//! which the rules deny is absent, as `dsh tools` leaves it out); every `tools/call` runs as one
//! step of its own turn through the same pipeline as `dsh run` (logged before anything runs,
//! hooks, permission rules, sandbox, guards, timeouts, exactly one result), so the session log
//! is checked, shown and repaired by `dsh check`, `dsh transcript` and `dsh repair` as any
//! other; an `ask` goes to the client through elicitation when it declared it, and with no way
//! to ask is denied (fail closed), unless `--approve` says otherwise; a client's `notifications/cancelled` cancels the call as an interrupt would.
//! Calls run as they arrive, side by side (`dsh_scheduler::SharedTurn`): each is a step of its
//! own, overlapping calls share a turn, a call the tools declare exclusive runs alone; each has
//! its own cancel, and an ask goes to the client that made the call.
//! With upstream MCP servers, their progress reaches the client of the call as
//! `notifications/progress` (with the client's token), and a changed tool list reaches every
//! client as `notifications/tools/list_changed`.
//! Nothing but the protocol goes to stdout: call lines and warnings go to stderr. Over HTTP, a
//! request without the bearer token (when one is set) is answered 401 before it reaches the
//! MCP service, and a non-loopback address without a token is refused at start.
//! SIGINT, SIGTERM or SIGHUP cancels the calls in progress and closes the log once each is
//! recorded (a second signal exits at once); a client that goes away (stdin closed) has its
//! calls in progress cancelled the same way before the log is closed, so the log a stopped
//! gateway leaves checks clean (`mcp_stop`). Exit 130 when calls were cancelled, else 0.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::{Args, Subcommand};
use dsh::Approvals;
use dsh::core::{AbortController, AbortReason, CancelCause, ContentBlock as Block};
use dsh::guard::GuardError;
use dsh::guard::{AnswerNext, Answerer, ApprovalOutcome, ApprovalRequest};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitationSchema, Implementation, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::Value;

use super::Exit;
use super::mcp_rounds;
use super::mcp_stop::{self, InFlight};
use super::run::{Approve, HookSources, ModeArg, Prepared, Setup, prepare};
use super::signals::Stops;

/// `dsh mcp ...`.
#[derive(Args, Debug)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: McpCommand,
}

/// The MCP commands.
#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// Serve dsh's tools to an MCP client over stdio (or streamable HTTP with `--http`), every
    /// call through the pipeline and logged.
    Serve(ServeArgs),
}

/// `dsh mcp serve` options (as for `dsh run`, where they apply).
#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub pipeline: super::options::PipelineArgs,
    /// The session log (default as for `dsh run`); an existing log is repaired and resumed.
    #[arg(long)]
    pub session: Option<PathBuf>,
    /// How asks are answered: `always`, `never`, or (over `--http` only) `ask` on dsh's
    /// terminal; default over stdio: no channel, every ask is denied (stdin carries the
    /// protocol); over HTTP: asked on the terminal when stdin is one, else denied.
    #[arg(long, value_enum)]
    pub approve: Option<Approve>,
    /// Tool presentation mode (overrides the policy).
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Add the `echo`, `sleep` and `fail` tools.
    #[arg(long)]
    pub demo_tools: bool,
    /// Serve streamable HTTP at this address (`127.0.0.1:8765`; port 0 picks one) instead of
    /// stdio; the endpoint is `/mcp`, printed on stderr once listening.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// The bearer token HTTP clients must send (`Authorization: Bearer TOKEN`); required when
    /// `--http` is not a loopback address. Also read from `DSH_MCP_TOKEN`.
    #[arg(long, env = "DSH_MCP_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// How many seconds a call asked of a client on protocol 2026-07-28 or later (which
    /// answers in a retry of the call, MRTR) waits for that retry before the ask is denied.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub ask_ttl_secs: u64,
}

/// Runs `dsh mcp ...`.
pub async fn mcp(args: McpArgs) -> Result<i32, Exit> {
    match args.command {
        McpCommand::Serve(serve_args) => serve(serve_args).await,
    }
}

async fn serve(args: ServeArgs) -> Result<i32, Exit> {
    if let Some(addr) = args.http
        && !addr.ip().is_loopback()
        && args.token.as_deref().is_none_or(str::is_empty)
    {
        return Err(Exit::usage(format!(
            "--http {addr} is not a loopback address: give --token (or DSH_MCP_TOKEN) so only \
             clients that send it are served"
        )));
    }
    let terminal = || -> Arc<dyn Answerer> { Arc::new(super::approve::TerminalApprover::new()) };
    // Without --approve, a client that declared elicitation is asked; otherwise, over HTTP, the
    // terminal that started dsh (stdin is free there); otherwise nobody: the ask is denied.
    let elicit = Arc::new(Eliciting {
        clients: parking_lot::Mutex::new(None),
        fallback: (args.http.is_some() && std::io::stdin().is_terminal()).then(terminal),
    });
    let approvals = match (args.approve, args.http.is_some()) {
        (None, _) => Approvals::Answerer(elicit.clone()),
        (Some(Approve::Always), _) => Approvals::Always,
        (Some(Approve::Never), _) => Approvals::Never,
        (Some(Approve::Ask), false) => {
            return Err(Exit::usage(
                "--approve ask cannot be used with `dsh mcp serve` over stdio: stdin carries the \
                 protocol (over --http, the terminal that started dsh answers)",
            ));
        }
        // Over HTTP stdin is free: the person at dsh's terminal answers, as for `dsh run`.
        (Some(Approve::Ask), true) => Approvals::Answerer(terminal()),
    };
    let policy = super::options::load_policy(
        args.pipeline.policy.as_deref(),
        None,
        args.mode,
        args.pipeline.preset,
    )?;
    let workspace = super::options::workspace_or_cwd(args.pipeline.workspace.as_ref())?;
    let prepared = prepare(Setup {
        script_text: None,
        workspace: &workspace,
        session: args.session.clone(),
        store: args.pipeline.store.url()?,
        policy,
        approvals,
        grants: None,
        demo_tools: args.demo_tools,
        json: false,
        stderr: true,
        hooks: HookSources::Standard {
            explicit: args.pipeline.settings.clone(),
            trust_workspace: args.pipeline.trust_workspace,
        },
    })
    .await?;
    let log = prepared.log.clone();
    let harness = &prepared.harness;
    let lanes = dsh::scheduler::SharedTurn::new(
        harness.runtime().clone(),
        harness.session().clone(),
        Some(harness.agent().clone()),
    )
    .with_max_parallel(harness.policy().max_parallel_tool_calls);
    let next_id = next_call_number(harness.session());
    // Installed before the first call can arrive: from here a signal stops, it does not kill.
    let stops = Stops::install()
        .map_err(|e| Exit::internal(format!("installing the signal handlers: {e}")))?;
    let in_flight = Arc::new(InFlight::default());
    let clients = Arc::new(Clients::new());
    *elicit.clients.lock() = Some(clients.clone());
    #[cfg(feature = "mcp")]
    forward_upstream(&prepared, &clients);
    let gateway = Gateway {
        prepared: Arc::new(prepared),
        lanes: Arc::new(lanes),
        next_id: Arc::new(AtomicU64::new(next_id)),
        clients,
        rounds: mcp_rounds::Rounds::new(std::time::Duration::from_secs(args.ask_ttl_secs)),
        in_flight: in_flight.clone(),
    };
    let prepared = gateway.prepared.clone();
    let (stop_transport, stopped) = tokio::sync::oneshot::channel();
    let (hard_stop, hard_stopped) = tokio::sync::oneshot::channel();
    let watcher = mcp_stop::watch(stops, in_flight.clone(), stop_transport, hard_stop);
    let serving = async {
        match args.http {
            Some(addr) => http(gateway, addr, args.token, stopped).await,
            None => {
                let service = gateway
                    .serve(rmcp::transport::stdio())
                    .await
                    .map_err(|e| Exit::internal(format!("starting the MCP server: {e}")))?;
                let token = service.cancellation_token();
                let stopper = tokio::spawn(async move {
                    if stopped.await.is_ok() {
                        token.cancel();
                    }
                });
                let waited = service.waiting().await;
                stopper.abort();
                waited
                    .map(|_| ())
                    .map_err(|e| Exit::internal(format!("the MCP server stopped: {e}")))
            }
        }
    };
    let served = tokio::select! {
        served = serving => served,
        Ok(()) = hard_stopped => return Err(Exit { code: 130, message: None }),
    };
    // The client is gone or a signal stopped the server: calls still in progress are cancelled
    // and recorded before the log is closed under them.
    in_flight.stop();
    in_flight.idle().await;
    watcher.abort();
    served?;
    super::close_servers(&prepared.harness).await;
    let closed = prepared.harness.session().close().await;
    if let Err(e) = closed {
        return Err(Exit::internal(format!("closing {}: {e}", log.display())));
    }
    err_line!("{}", prepared.renderer.summary());
    err_line!("log: {}", log.display());
    // Calls cancelled by the stop make it an interruption (130); a stop with nothing in
    // progress is the server's normal end.
    Ok(if in_flight.cancelled() > 0 { 130 } else { 0 })
}

/// Serves streamable HTTP at `addr` until `stop` is answered; with a token, a request without
/// it gets 401.
async fn http(
    gateway: Gateway,
    addr: std::net::SocketAddr,
    token: Option<String>,
    stop: tokio::sync::oneshot::Receiver<&'static str>,
) -> Result<(), Exit> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Exit::usage(format!("--http {addr}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Exit::internal(format!("--http {addr}: {e}")))?;
    let mut config = StreamableHttpServerConfig::default();
    if !bound.ip().is_loopback() {
        let host = bound.ip().to_string();
        config = config.with_allowed_hosts([host.clone(), format!("{host}:{}", bound.port())]);
    }
    let cancel = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(gateway.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let expected: Option<Arc<str>> = token
        .filter(|t| !t.is_empty())
        .map(|t| Arc::from(format!("Bearer {t}")));
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let expected = expected.clone();
                    async move {
                        let sent = request
                            .headers()
                            .get(axum::http::header::AUTHORIZATION)
                            .map(|v| v.as_bytes());
                        match &expected {
                            Some(expected) if !same_secret(sent, expected.as_bytes()) => {
                                axum::response::IntoResponse::into_response((
                                    axum::http::StatusCode::UNAUTHORIZED,
                                    "a bearer token is required (Authorization: Bearer TOKEN)",
                                ))
                            }
                            _ => next.run(request).await,
                        }
                    }
                },
            ));
    err_line!("dsh mcp serve: listening on http://{bound}/mcp");
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let _ = stop.await;
            cancel.cancel();
        })
        .await
        .map_err(|e| Exit::internal(format!("the MCP server stopped: {e}")))
}

/// Whether `sent` is `expected`, in a time that does not depend on where they first differ.
fn same_secret(sent: Option<&[u8]>, expected: &[u8]) -> bool {
    let Some(sent) = sent else { return false };
    sent.len() == expected.len()
        && sent
            .iter()
            .zip(expected)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// The number after the highest `mcp-<n>` call id the log holds (1 for a new log), so a resumed
/// gateway's ids stay unique without renaming.
fn next_call_number(session: &dsh::session::Session) -> u64 {
    session
        .events()
        .iter()
        .filter_map(|(_, e)| e.as_tool_call())
        .filter_map(|c| c.call_id.strip_prefix("mcp-")?.parse::<u64>().ok())
        .max()
        .map_or(1, |n| n.saturating_add(1))
}

/// The gateway's clients: every connected one (for list changes) and, for each call in
/// progress, the client that made it with its progress token.
struct Clients {
    connected: parking_lot::Mutex<Vec<rmcp::Peer<RoleServer>>>,
    calls: parking_lot::Mutex<HashMap<String, CallOf>>,
    /// Progress to pass on, sent in the order it came by one task (upstream servers' progress:
    /// read only with the `mcp` feature), and the flushes that wait for it.
    progress: tokio::sync::mpsc::UnboundedSender<Progress>,
}

/// What the progress task is given.
enum Progress {
    /// A notification for a client.
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    Send(Box<(rmcp::Peer<RoleServer>, ProgressNotificationParam)>),
    /// Answered once everything queued before it was handed to its client.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// The client of one call in progress.
#[derive(Clone)]
struct CallOf {
    peer: rmcp::Peer<RoleServer>,
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    progress: Option<ProgressToken>,
    /// Where the call's asks go when its client takes MRTR rounds (protocol `2026-07-28` or
    /// later, with form elicitation): answered by the client's retry (`mcp_rounds`).
    asks: Option<tokio::sync::mpsc::Sender<mcp_rounds::Ask>>,
}

impl Clients {
    /// No clients yet; the task that passes progress on runs until the gateway ends.
    fn new() -> Clients {
        let (progress, mut queue) = tokio::sync::mpsc::unbounded_channel::<Progress>();
        tokio::spawn(async move {
            while let Some(item) = queue.recv().await {
                match item {
                    Progress::Send(sent) => {
                        let (peer, param) = *sent;
                        if let Err(e) = peer.notify_progress(param).await {
                            tracing::debug!("passing progress to an MCP client: {e}");
                        }
                    }
                    Progress::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        Clients {
            connected: parking_lot::Mutex::new(Vec::new()),
            calls: parking_lot::Mutex::new(HashMap::new()),
            progress,
        }
    }

    /// Waits until the progress queued so far was handed to its clients: a call's result is
    /// sent after its progress (a client drops progress of a request it has the answer to).
    async fn flush_progress(&self) {
        let (done, flushed) = tokio::sync::oneshot::channel();
        if self.progress.send(Progress::Flush(done)).is_ok() {
            let _ = flushed.await;
        }
    }

    /// The client that made call `id`, while it runs.
    fn of(&self, id: &str) -> Option<CallOf> {
        self.calls.lock().get(id).cloned()
    }

    /// Tells every connected client that the tool list changed (forgetting closed ones).
    #[cfg(feature = "mcp")]
    fn list_changed(&self) {
        let peers: Vec<_> = {
            let mut connected = self.connected.lock();
            connected.retain(|p| !p.is_transport_closed());
            connected.clone()
        };
        for peer in peers {
            tokio::spawn(async move {
                if let Err(e) = peer.notify_tool_list_changed().await {
                    tracing::debug!("telling an MCP client its tool list changed: {e}");
                }
            });
        }
    }

    /// Passes an upstream call's progress to the client of that call, when it asked for
    /// progress (sent a token).
    #[cfg(feature = "mcp")]
    fn progress(&self, call_id: &str, progress: f64, total: Option<f64>, message: Option<String>) {
        let Some(CallOf {
            peer,
            progress: Some(token),
            ..
        }) = self.of(call_id)
        else {
            return;
        };
        let mut param = ProgressNotificationParam::new(token, progress);
        param.total = total;
        param.message = message;
        let _ = self.progress.send(Progress::Send(Box::new((peer, param))));
    }
}

/// Removes a call from [`Clients::calls`] when it ends, however it ends.
struct CallEntry<'a> {
    clients: &'a Clients,
    id: String,
}

impl Drop for CallEntry<'_> {
    fn drop(&mut self) {
        self.clients.calls.lock().remove(&self.id);
    }
}

/// The upstream servers' progress and list changes, passed on to the gateway's clients (the
/// progress still shows on the call's line).
#[cfg(feature = "mcp")]
fn forward_upstream(prepared: &Prepared, clients: &Arc<Clients>) {
    for server in prepared.harness.mcp_servers() {
        let r = prepared.renderer.clone();
        let to = clients.clone();
        server.on_progress(move |p| {
            r.on_progress(&p.call_id, &p.tool, &super::run::progress_text(p));
            to.progress(&p.call_id, p.progress, p.total, p.message.clone());
        });
        let to = clients.clone();
        server.on_tools_changed(move |_server| to.list_changed());
    }
}

#[derive(Clone)]
struct Gateway {
    prepared: Arc<Prepared>,
    /// Runs each call as a step, overlapping calls in one turn.
    lanes: Arc<dsh::scheduler::SharedTurn>,
    next_id: Arc<AtomicU64>,
    clients: Arc<Clients>,
    /// Calls parked at an ask of a client that takes MRTR rounds.
    rounds: Arc<mcp_rounds::Rounds<Result<CallToolResult, ErrorData>>>,
    /// The calls in progress, cancelled and waited for when the gateway stops.
    in_flight: Arc<InFlight>,
}

impl Gateway {
    fn tools(&self) -> Vec<Tool> {
        let harness = &self.prepared.harness;
        let mut schemas = harness.registry().schemas(Some(harness.agent()));
        schemas.retain(|s| !harness.denies_every_call(&s.name));
        schemas
            .into_iter()
            .map(|s| {
                let schema = match s.parameters.value() {
                    Value::Object(m) => m.clone(),
                    _ => serde_json::Map::new(),
                };
                Tool::new(
                    s.name.to_string(),
                    s.description.to_string(),
                    Arc::new(schema),
                )
            })
            .collect()
    }

    /// Runs a `tools/call` round: a new call, or (with `requestState`) the retry of a call
    /// parked at an ask of a client on protocol `2026-07-28` or later (`mcp_rounds`). The
    /// call runs on a task of its own; this round answers with its result, or with the
    /// client's next question when the call asks one of a client that takes MRTR rounds.
    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = request.name.to_string();
        let mut run = match request.request_state.as_deref() {
            Some(state) => self
                .rounds
                .resume(state, &tool, request.input_responses.as_ref())?,
            None => self.start(request, &context),
        };
        // A cancel of this round's request cancels the call.
        let ct = context.ct.clone();
        let cancel = run.cancel.clone();
        let watcher = tokio::spawn(async move {
            ct.cancelled().await;
            cancel.abort(AbortReason::Cancelled(CancelCause::User));
        });
        let next = tokio::select! {
            ran = &mut run.result => Err(ran),
            Some(ask) = run.asks.recv() => Ok(ask),
        };
        watcher.abort();
        match next {
            Ok(ask) => Ok(self.rounds.park(&tool, run, ask).into()),
            Err(ran) => {
                self.clients.flush_progress().await;
                ran.map_err(|e| {
                    ErrorData::internal_error(format!("the call's task failed: {e}"), None)
                })?
                .map(CallToolResponse::from)
            }
        }
    }

    /// Starts a new call on a task of its own; its asks and progress go to the client that
    /// made it (asks as MRTR rounds when the client is on `2026-07-28` or later and declared
    /// form elicitation).
    fn start(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> mcp_rounds::Run<Result<CallToolResult, ErrorData>> {
        let arguments = Value::Object(request.arguments.unwrap_or_default()).to_string();
        let name = request.name.to_string();
        let id = format!("mcp-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let controller = AbortController::new();
        let takes_rounds = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
            && context
                .client_capabilities()
                .and_then(|c| c.elicitation)
                .is_some_and(|e| e.form.is_some() || e.url.is_none());
        let (asks_tx, asks) = tokio::sync::mpsc::channel(1);
        self.clients.calls.lock().insert(
            id.clone(),
            CallOf {
                peer: context.peer.clone(),
                progress: context.meta.get_progress_token(),
                asks: takes_rounds.then_some(asks_tx),
            },
        );
        let clients = self.clients.clone();
        let lanes = self.lanes.clone();
        let signal = controller.signal();
        let admitted = self.in_flight.admit(&id, &controller);
        let result = tokio::spawn(async move {
            let _admitted = admitted;
            let _entry = CallEntry {
                clients: &clients,
                id: id.clone(),
            };
            let ran = lanes
                .call(&id, &name, &arguments, signal)
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            let Some(result) = ran.outcome.results.first() else {
                return Err(ErrorData::internal_error(
                    "the call was not run (its step ended without a result)",
                    None,
                ));
            };
            Ok(to_mcp(result))
        });
        mcp_rounds::Run {
            result,
            asks,
            cancel: controller,
        }
    }
}

/// A call's result as MCP content.
fn to_mcp(result: &dsh::core::ToolResult) -> CallToolResult {
    let content: Vec<ContentBlock> = result
        .content()
        .iter()
        .map(|block| match block {
            Block::Text { text } => ContentBlock::text(text.to_string()),
            Block::Image { data, mime_type } => {
                ContentBlock::image(data.to_string(), mime_type.to_string())
            }
            Block::Other(other) => ContentBlock::text(other.value().to_string()),
        })
        .collect();
    if result.is_error() {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

/// Asks the client that made the call through MCP elicitation (a form with one boolean,
/// `allow`) when it declared the capability; otherwise the fallback, or nobody (unavailable:
/// the ask is denied). Only `accept` with `allow: true` allows the call, once.
struct Eliciting {
    clients: parking_lot::Mutex<Option<Arc<Clients>>>,
    fallback: Option<Arc<dyn Answerer>>,
}

#[async_trait::async_trait]
impl Answerer for Eliciting {
    async fn answer(
        &self,
        req: &ApprovalRequest,
        next: AnswerNext<'_>,
    ) -> Result<ApprovalOutcome, GuardError> {
        let clients = self.clients.lock().clone();
        let call = req
            .call_id
            .as_deref()
            .zip(clients)
            .and_then(|(id, clients)| clients.of(id));
        let rounds = call.as_ref().and_then(|c| c.asks.clone());
        let peer = call.map(|c| c.peer).filter(|p| {
            p.supported_elicitation_modes()
                .contains(&rmcp::service::ElicitationMode::Form)
        });
        if rounds.is_none() && peer.is_none() {
            return match &self.fallback {
                Some(fallback) => fallback.answer(req, next).await,
                None => next.run(req).await,
            };
        }
        let schema = match ElicitationSchema::builder()
            .required_bool_with("allow", |b| {
                b.with_default(false).description("Allow this call, once")
            })
            .build()
        {
            Ok(schema) => schema,
            Err(e) => {
                tracing::warn!("building the approval form: {e}");
                return Ok(ApprovalOutcome::Unavailable);
            }
        };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: super::approve::description(req),
            requested_schema: schema,
        };
        if let Some(rounds) = rounds {
            // The client answers in its next round: the call waits here meanwhile.
            let (answer, answered) = tokio::sync::oneshot::channel();
            let ask = mcp_rounds::Ask { params, answer };
            return Ok(tokio::select! {
                outcome = async {
                    match rounds.send(ask).await {
                        Ok(()) => answered.await.unwrap_or(ApprovalOutcome::Unavailable),
                        Err(_) => ApprovalOutcome::Unavailable,
                    }
                } => outcome,
                _ = req.signal.aborted() => ApprovalOutcome::Cancelled,
            });
        }
        let Some(peer) = peer else {
            return Ok(ApprovalOutcome::Unavailable);
        };
        tokio::select! {
            answered = peer.create_elicitation(params) => Ok(match answered {
                Ok(result) => mcp_rounds::allows(&result),
                Err(e) => {
                    tracing::warn!("asking the MCP client for approval failed: {e}");
                    ApprovalOutcome::Unavailable
                }
            }),
            _ = req.signal.aborted() => Ok(ApprovalOutcome::Cancelled),
        }
    }
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("dsh", env!("CARGO_PKG_VERSION")))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.clients.connected.lock().push(context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context).await
    }
}
