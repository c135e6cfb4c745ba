//! The interpreter side of a run, on its own thread: one QuickJS runtime and context, the
//! prelude, and the loop that runs jobs, answers host replies and enforces the limits.
//!
//! Guarantees: every exit path returns a [`CodeOutcome`] (a failure is a field); no JavaScript
//! value outlives the context; the interrupt handler stops CPU-bound code once the deadline
//! passes, the run is aborted or a fatal limit was hit.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Instant;

use dsh_core::Json;
use rquickjs::context::intrinsic;
use rquickjs::{Context, Ctx, Exception, Function, Object, Runtime};
use tokio::sync::mpsc::UnboundedSender;

use crate::bindings::{ARGS_NOT_LOSSLESS, MISSING_ARGS};
use crate::limits::Limits;
use crate::outcome::{CodeErrorKind, CodeOutcome, ToolCallError};

const PRELUDE: &str = include_str!("prelude.js");

/// A tool call the program made: `(id, name, JSON text of the arguments)`.
pub(crate) struct HostRequest {
    pub id: u32,
    pub name: String,
    pub args: String,
}

/// What the host side sends the interpreter.
pub(crate) enum HostMessage {
    /// A call settled.
    Reply {
        id: u32,
        outcome: Result<Json, ToolCallError>,
    },
    /// Something changed (abort); re-check the stop conditions.
    Wake,
}

/// Why the interpreter must stop, shared with the interrupt handler.
pub(crate) struct Stop {
    pub abort: AtomicBool,
    fatal: AtomicU8,
    deadline: Instant,
}

const FATAL_NONE: u8 = 0;
const FATAL_OUTPUT: u8 = 1;
const FATAL_SUB_CALLS: u8 = 2;

impl Stop {
    pub(crate) fn new(deadline: Instant) -> Stop {
        Stop {
            abort: AtomicBool::new(false),
            fatal: AtomicU8::new(FATAL_NONE),
            deadline,
        }
    }

    fn should_stop(&self) -> bool {
        self.fatal.load(Ordering::Relaxed) != FATAL_NONE
            || self.abort.load(Ordering::Relaxed)
            || Instant::now() >= self.deadline
    }
}

/// Console output with the output cap applied.
struct Logs {
    lines: Vec<String>,
    bytes: usize,
}

/// The outcome of a run whose stop conditions fired, or `None` if none did.
fn stopped(stop: &Stop, limits: &Limits, logs: &RefCell<Logs>) -> Option<CodeOutcome> {
    let take = || std::mem::take(&mut logs.borrow_mut().lines);
    match stop.fatal.load(Ordering::Relaxed) {
        FATAL_OUTPUT => {
            return Some(CodeOutcome::failure(
                CodeErrorKind::OutputLimit,
                output_limit_message(limits),
                take(),
            ));
        }
        FATAL_SUB_CALLS => {
            return Some(CodeOutcome::failure(
                CodeErrorKind::Exception,
                format!(
                    "run_code made more than {} tool calls (maxSubCalls limit)",
                    limits.max_sub_calls
                ),
                take(),
            ));
        }
        _ => {}
    }
    if stop.abort.load(Ordering::Relaxed) {
        return Some(CodeOutcome::failure(
            CodeErrorKind::Abort,
            "the run was aborted",
            take(),
        ));
    }
    if Instant::now() >= stop.deadline {
        return Some(CodeOutcome::failure(
            CodeErrorKind::Timeout,
            timeout_message(limits),
            take(),
        ));
    }
    None
}

pub(crate) fn timeout_message(limits: &Limits) -> String {
    format!(
        "run_code exceeded its wall time of {}ms (wallTime limit)",
        limits.wall_time.as_millis()
    )
}

fn output_limit_message(limits: &Limits) -> String {
    format!(
        "run_code output exceeded {} (maxOutputBytes limit)",
        Limits::bytes(limits.max_output_bytes)
    )
}

fn memory_message(limits: &Limits) -> String {
    format!(
        "run_code ran out of memory: the limit is {} (memoryBytes limit)",
        Limits::bytes(limits.memory_bytes)
    )
}

/// The parsed state the prelude's `poll` reports once the program settled.
#[derive(serde::Deserialize)]
struct Settled {
    ok: bool,
    kind: Option<String>,
    message: Option<String>,
    json: Option<String>,
}

/// Runs one program to completion on the current thread.
pub(crate) fn execute(
    program: String,
    names: Vec<String>,
    limits: Limits,
    stop: Arc<Stop>,
    requests: UnboundedSender<HostRequest>,
    replies: Receiver<HostMessage>,
) -> CodeOutcome {
    let runtime = match Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            return CodeOutcome::failure(
                CodeErrorKind::Memory,
                format!("the code runtime could not start: {e}"),
                Vec::new(),
            );
        }
    };
    runtime.set_memory_limit(limits.memory_bytes);
    runtime.set_max_stack_size(limits.stack_bytes);
    let handler_stop = stop.clone();
    runtime.set_interrupt_handler(Some(Box::new(move || handler_stop.should_stop())));
    let context = match Context::custom::<(
        intrinsic::Eval,
        intrinsic::RegExpCompiler,
        intrinsic::RegExp,
        intrinsic::Json,
        intrinsic::MapSet,
        intrinsic::TypedArrays,
        intrinsic::Promise,
        intrinsic::Proxy,
    )>(&runtime)
    {
        Ok(c) => c,
        Err(e) => {
            return CodeOutcome::failure(
                CodeErrorKind::Memory,
                format!("the code runtime could not start: {e}"),
                Vec::new(),
            );
        }
    };
    let logs = Rc::new(RefCell::new(Logs {
        lines: Vec::new(),
        bytes: 0,
    }));
    let outcome = context.with(|ctx| {
        let mut session = Session {
            ctx: ctx.clone(),
            limits: &limits,
            stop: &stop,
            logs: logs.clone(),
            in_flight: Rc::new(RefCell::new(0)),
        };
        session.run(program, names, requests, &replies)
    });
    drop(context);
    drop(runtime);
    outcome
}

struct Session<'a, 'js> {
    ctx: Ctx<'js>,
    limits: &'a Limits,
    stop: &'a Arc<Stop>,
    logs: Rc<RefCell<Logs>>,
    in_flight: Rc<RefCell<usize>>,
}

impl<'js> Session<'_, 'js> {
    fn take_logs(&self) -> Vec<String> {
        std::mem::take(&mut self.logs.borrow_mut().lines)
    }

    /// The outcome for a JavaScript-level failure of the host's own driving code.
    fn failed(&self, what: &str, error: rquickjs::Error) -> CodeOutcome {
        if let Some(o) = stopped(self.stop, self.limits, &self.logs) {
            return o;
        }
        let message = if matches!(error, rquickjs::Error::Exception) {
            let caught = self.ctx.catch();
            describe_value(&caught)
        } else {
            error.to_string()
        };
        if message.contains("out of memory") {
            return CodeOutcome::failure(
                CodeErrorKind::Memory,
                memory_message(self.limits),
                self.take_logs(),
            );
        }
        CodeOutcome::failure(
            CodeErrorKind::Exception,
            format!("{what}: {message}"),
            self.take_logs(),
        )
    }

    fn run(
        &mut self,
        program: String,
        names: Vec<String>,
        requests: UnboundedSender<HostRequest>,
        replies: &Receiver<HostMessage>,
    ) -> CodeOutcome {
        let ctx = self.ctx.clone();
        let prelude: Function = match ctx.eval(PRELUDE) {
            Ok(f) => f,
            Err(e) => return self.failed("the code runtime could not start", e),
        };
        let log_fn = self.log_function();
        let call_fn = self.call_function(requests);
        let (log_fn, call_fn) = match (log_fn, call_fn) {
            (Ok(l), Ok(c)) => (l, c),
            (Err(e), _) | (_, Err(e)) => return self.failed("the code runtime could not start", e),
        };
        let names_json = serde_json::to_string(&names).unwrap_or_else(|_| "[]".to_owned());
        let runner: Object =
            match prelude.call((log_fn, call_fn, names_json, ARGS_NOT_LOSSLESS, MISSING_ARGS)) {
                Ok(r) => r,
                Err(e) => return self.failed("the code runtime could not start", e),
            };
        let entry = |name: &str| runner.get::<_, Function>(name);
        let (start, settle, poll) = match (entry("start"), entry("settle"), entry("poll")) {
            (Ok(a), Ok(b), Ok(c)) => (a, b, c),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                return self.failed("the code runtime could not start", e);
            }
        };
        if let Err(e) = start.call::<_, ()>((program,)) {
            return self.failed("the program failed", e);
        }
        loop {
            while ctx.execute_pending_job() {
                if let Some(o) = stopped(self.stop, self.limits, &self.logs) {
                    return o;
                }
            }
            if let Some(o) = stopped(self.stop, self.limits, &self.logs) {
                return o;
            }
            match poll.call::<_, Option<String>>(()) {
                Err(e) => return self.failed("the program failed", e),
                Ok(Some(state)) => return self.settled(&state),
                Ok(None) => {}
            }
            if *self.in_flight.borrow() == 0 {
                return CodeOutcome::failure(
                    CodeErrorKind::Exception,
                    "the program is waiting on a promise that can never settle (no tool call is in flight)",
                    self.take_logs(),
                );
            }
            let wait = self.stop.deadline.saturating_duration_since(Instant::now());
            match replies.recv_timeout(wait) {
                Ok(HostMessage::Wake) => {}
                Ok(HostMessage::Reply { id, outcome }) => {
                    *self.in_flight.borrow_mut() -= 1;
                    let settled = match outcome {
                        Ok(value) => settle.call::<_, ()>((id, true, value.to_json_string())),
                        Err(e) => {
                            let payload = serde_json::json!({
                                "toolName": e.tool_name,
                                "message": e.message,
                            });
                            settle.call::<_, ()>((id, false, payload.to_string()))
                        }
                    };
                    if let Err(e) = settled {
                        return self.failed("a tool result could not be handed to the program", e);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return CodeOutcome::failure(
                        CodeErrorKind::Timeout,
                        timeout_message(self.limits),
                        self.take_logs(),
                    );
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return CodeOutcome::failure(
                        CodeErrorKind::Abort,
                        "the run was aborted: its host went away",
                        self.take_logs(),
                    );
                }
            }
        }
    }

    fn settled(&self, state: &str) -> CodeOutcome {
        let parsed: Settled = match serde_json::from_str(state) {
            Ok(s) => s,
            Err(e) => {
                return CodeOutcome::failure(
                    CodeErrorKind::Exception,
                    format!("the program's outcome could not be read: {e}"),
                    self.take_logs(),
                );
            }
        };
        if !parsed.ok {
            let message = parsed.message.unwrap_or_default();
            let kind = match parsed.kind.as_deref() {
                Some("invalid-output") => CodeErrorKind::InvalidOutput,
                _ if message.contains("out of memory") => {
                    return CodeOutcome::failure(
                        CodeErrorKind::Memory,
                        memory_message(self.limits),
                        self.take_logs(),
                    );
                }
                _ => CodeErrorKind::Exception,
            };
            let message = if message.contains("Maximum call stack size exceeded") {
                format!(
                    "{message} (the stack is limited to {}: stackBytes limit)",
                    Limits::bytes(self.limits.stack_bytes)
                )
            } else {
                message
            };
            return CodeOutcome::failure(kind, message, self.take_logs());
        }
        let Some(text) = parsed.json else {
            return CodeOutcome::success(None, self.take_logs());
        };
        if self.logs.borrow().bytes.saturating_add(text.len()) > self.limits.max_output_bytes {
            return CodeOutcome::failure(
                CodeErrorKind::OutputLimit,
                output_limit_message(self.limits),
                self.take_logs(),
            );
        }
        match Json::parse(&text) {
            Ok(value) => CodeOutcome::success(Some(value), self.take_logs()),
            Err(e) => CodeOutcome::failure(
                CodeErrorKind::InvalidOutput,
                format!("the returned value is not lossless JSON: {e}"),
                self.take_logs(),
            ),
        }
    }

    fn log_function(&self) -> rquickjs::Result<Function<'js>> {
        let logs = self.logs.clone();
        let stop = self.stop.clone();
        let cap = self.limits.max_output_bytes;
        Function::new(
            self.ctx.clone(),
            move |ctx: Ctx<'js>, line: String| -> rquickjs::Result<()> {
                let mut logs = logs.borrow_mut();
                let separator = usize::from(!logs.lines.is_empty());
                let total = logs
                    .bytes
                    .saturating_add(separator)
                    .saturating_add(line.len());
                if total > cap {
                    stop.fatal.store(FATAL_OUTPUT, Ordering::Relaxed);
                    return Err(Exception::throw_range(
                        &ctx,
                        "run_code output limit exceeded",
                    ));
                }
                logs.bytes = total;
                logs.lines.push(line);
                Ok(())
            },
        )
    }

    fn call_function(
        &self,
        requests: UnboundedSender<HostRequest>,
    ) -> rquickjs::Result<Function<'js>> {
        let stop = self.stop.clone();
        let max = self.limits.max_sub_calls;
        let in_flight = self.in_flight.clone();
        let mut next_id: u32 = 0;
        Function::new(
            self.ctx.clone(),
            rquickjs::function::MutFn::new(
                move |ctx: Ctx<'js>, name: String, args: String| -> rquickjs::Result<u32> {
                    if next_id as usize >= max {
                        stop.fatal.store(FATAL_SUB_CALLS, Ordering::Relaxed);
                        return Err(Exception::throw_range(
                            &ctx,
                            "run_code tool call limit exceeded",
                        ));
                    }
                    next_id += 1;
                    let id = next_id;
                    if requests.send(HostRequest { id, name, args }).is_err() {
                        return Err(Exception::throw_internal(&ctx, "the host went away"));
                    }
                    *in_flight.borrow_mut() += 1;
                    Ok(id)
                },
            ),
        )
    }
}

/// A printable description of a caught JavaScript value.
fn describe_value(v: &rquickjs::Value<'_>) -> String {
    if let Some(ex) = v.as_exception() {
        let message = ex.message().unwrap_or_default();
        return if message.is_empty() {
            "uncaught exception".to_owned()
        } else {
            message
        };
    }
    if let Some(s) = v.as_string() {
        return s.to_string().unwrap_or_default();
    }
    if v.is_null() || v.is_undefined() {
        return "uncaught exception".to_owned();
    }
    format!("{v:?}")
}
