//! The interpreter side of a run, on its own thread: one QuickJS runtime and context, the
//! prelude, and the loop that runs jobs, drives the tool calls and enforces the limits.
//!
//! The tool calls are polled right here ([`Calls`]): a call is handed to the bindings the
//! moment the program makes it, the sub-call coordinator (when this thread claimed it) is
//! advanced at once, and the thread parks only when nothing is ready, woken by whatever it
//! waits on. A call whose policy and body complete at once thus settles without leaving
//! this thread.
//!
//! Guarantees: every exit path returns a [`CodeOutcome`] (a failure is a field); no JavaScript
//! value outlives the context; the interrupt handler stops CPU-bound code once the deadline
//! passes, the run is aborted or a fatal limit was hit; results settle one at a time, each
//! followed by the jobs it queued.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Instant;

use dsh_core::{Json, Signal};
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use rquickjs::context::intrinsic;
use rquickjs::function::{Args, Opt};
use rquickjs::{Context, Ctx, Exception, Function, Object, Persistent, Promise, Runtime, Value};

use super::arena::Pins;
use super::lossless::{Held, Realm};
use super::trap;
use crate::bindings::{ARGS_NOT_LOSSLESS, Bindings, MISSING_ARGS, parse_args};
use crate::limits::Limits;
use crate::outcome::{CodeErrorKind, CodeOutcome, ToolCallError};
use crate::subcall::LocalDriver;

/// Why the interpreter must stop, shared with the interrupt handler.
pub(crate) struct Stop {
    pub abort: AtomicBool,
    /// The run's own signal, read directly: an answer this thread polls may follow from the
    /// abort (a refused call) before the async side has forwarded it.
    signal: Signal,
    /// The async side of the run is gone: nobody will read the outcome.
    pub host_gone: AtomicBool,
    fatal: AtomicU8,
    deadline: Instant,
}

const FATAL_NONE: u8 = 0;
const FATAL_OUTPUT: u8 = 1;
const FATAL_SUB_CALLS: u8 = 2;

impl Stop {
    pub(crate) fn new(deadline: Instant, signal: Signal) -> Stop {
        Stop {
            abort: AtomicBool::new(false),
            signal,
            host_gone: AtomicBool::new(false),
            fatal: AtomicU8::new(FATAL_NONE),
            deadline,
        }
    }

    fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed) || self.signal.is_aborted()
    }

    fn should_stop(&self) -> bool {
        self.fatal.load(Ordering::Relaxed) != FATAL_NONE
            || self.aborted()
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
    if stop.aborted() {
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

/// Wakes the interpreter thread when something it waits on can make progress, and remembers
/// that it did: `any` for the thread's wait, `own` for whoever polls the future behind it.
struct ThreadWaker {
    thread: Thread,
    any: Arc<AtomicBool>,
    own: AtomicBool,
}

impl ThreadWaker {
    fn new(thread: Thread, any: Arc<AtomicBool>) -> Arc<ThreadWaker> {
        Arc::new(ThreadWaker {
            thread,
            any,
            own: AtomicBool::new(true),
        })
    }
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.own.store(true, Ordering::Release);
        self.any.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// One call's answer, tagged with the id the program knows it by.
struct Reply {
    id: u32,
    answer: BoxFuture<'static, Result<Json, ToolCallError>>,
}

impl Future for Reply {
    type Output = (u32, Result<Json, ToolCallError>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let id = self.id;
        self.answer.as_mut().poll(cx).map(|answer| (id, answer))
    }
}

/// The tool calls of one run, polled on the interpreter thread.
struct Calls {
    bindings: Bindings,
    /// The sub-call coordinator, when this thread claimed it.
    local: Option<LocalDriver>,
    /// Set by any of the wakers below.
    woken: Arc<AtomicBool>,
    /// The coordinator's waker: it is polled only once woken.
    coordinator: Arc<ThreadWaker>,
    coordinator_waker: Waker,
    /// The answers' waker.
    waker: Waker,
    waiting: RefCell<FuturesUnordered<Reply>>,
    /// Answers polled but not yet handed to the program, in the order they came.
    ready: RefCell<VecDeque<(u32, Result<Json, ToolCallError>)>>,
    /// Calls made and not yet handed back to the program.
    in_flight: Cell<usize>,
}

impl Calls {
    fn new(bindings: Bindings, local: Option<LocalDriver>) -> Calls {
        let woken = Arc::new(AtomicBool::new(false));
        let thread = std::thread::current();
        let coordinator = ThreadWaker::new(thread.clone(), woken.clone());
        Calls {
            bindings,
            local,
            waker: Waker::from(ThreadWaker::new(thread, woken.clone())),
            coordinator_waker: Waker::from(coordinator.clone()),
            coordinator,
            woken,
            waiting: RefCell::new(FuturesUnordered::new()),
            ready: RefCell::new(VecDeque::new()),
            in_flight: Cell::new(0),
        }
    }

    /// Hands one call of the program, its arguments checked (or refused), to the bindings and
    /// lets the coordinator start it.
    fn submit(&self, id: u32, name: &Arc<str>, checked: Result<Json, ToolCallError>) {
        match &self.local {
            // The claimed coordinator answers into a queue read right here.
            Some(local) => match checked {
                Ok(json) => local.submit(id, name.clone(), json),
                Err(e) => self.ready.borrow_mut().push_back((id, Err(e))),
            },
            None => {
                let answer = self.bindings.answer(name, checked);
                self.waiting.borrow_mut().push(Reply { id, answer });
            }
        }
        self.in_flight.set(self.in_flight.get() + 1);
        self.advance();
    }

    /// Advances the coordinator as far as it goes without waiting, if something woke it since
    /// its last poll (a call submitted, a body done, a signal fired).
    fn advance(&self) {
        if let Some(local) = &self.local
            && self.coordinator.own.swap(false, Ordering::AcqRel)
        {
            local.poll(&mut TaskContext::from_waker(&self.coordinator_waker));
        }
    }

    /// The next answer to hand to the program, if one is ready.
    fn next_ready(&self) -> Option<(u32, Result<Json, ToolCallError>)> {
        if self.ready.borrow().is_empty() {
            self.advance();
            if let Some(local) = &self.local {
                local.take_answers(&mut self.ready.borrow_mut());
            }
        }
        if self.ready.borrow().is_empty() {
            let mut cx = TaskContext::from_waker(&self.waker);
            loop {
                // The borrow ends before the answer is queued.
                let polled = self.waiting.borrow_mut().poll_next_unpin(&mut cx);
                match polled {
                    Poll::Ready(Some(answer)) => self.ready.borrow_mut().push_back(answer),
                    Poll::Ready(None) | Poll::Pending => break,
                }
            }
        }
        let next = self.ready.borrow_mut().pop_front();
        if next.is_some() {
            self.in_flight.set(self.in_flight.get().saturating_sub(1));
        }
        next
    }

    /// Parks the thread until something it polls was woken or a stop condition may hold.
    fn wait(&self, stop: &Stop) {
        loop {
            if self.woken.swap(false, Ordering::AcqRel)
                || stop.aborted()
                || stop.host_gone.load(Ordering::Acquire)
                || stop.fatal.load(Ordering::Acquire) != FATAL_NONE
            {
                return;
            }
            let now = Instant::now();
            if now >= stop.deadline {
                return;
            }
            std::thread::park_timeout(stop.deadline - now);
        }
    }
}

/// The parsed state the prelude's `poll` reports once the program settled.
#[derive(serde::Deserialize)]
struct Settled {
    ok: bool,
    kind: Option<String>,
    message: Option<String>,
    json: Option<String>,
}

/// A fresh interpreter with nothing of a run in it yet: its runtime, its context and the
/// prelude compiled (not yet called). Made ahead of a run so that compiling the prelude is off
/// the run's path; one run consumes it, and none is ever used twice.
pub(crate) struct Prepared {
    // Dropped in this order: the prelude and the held blocks before the context and the
    // runtime that hold them.
    prelude: Persistent<Function<'static>>,
    pins: Option<Pins>,
    context: Context,
    runtime: Runtime,
}

impl Prepared {
    /// A new runtime (under `limits`' memory and stack bounds) and context with the prelude
    /// compiled, on the current thread, which must be the one that runs the program.
    pub(crate) fn new(limits: &Limits) -> Result<Prepared, CodeOutcome> {
        let start_failed = |message: String| {
            if message.contains("out of memory") {
                return CodeOutcome::failure(
                    CodeErrorKind::Memory,
                    memory_message(limits),
                    Vec::new(),
                );
            }
            CodeOutcome::failure(
                CodeErrorKind::Exception,
                format!("the code runtime could not start: {message}"),
                Vec::new(),
            )
        };
        let runtime = Runtime::new().map_err(|e| {
            CodeOutcome::failure(
                CodeErrorKind::Memory,
                format!("the code runtime could not start: {e}"),
                Vec::new(),
            )
        })?;
        runtime.set_memory_limit(limits.memory_bytes);
        runtime.set_max_stack_size(limits.stack_bytes);
        let context = Context::custom::<(
            intrinsic::Eval,
            intrinsic::RegExpCompiler,
            intrinsic::RegExp,
            intrinsic::Json,
            intrinsic::MapSet,
            intrinsic::TypedArrays,
            intrinsic::Promise,
            intrinsic::Proxy,
        )>(&runtime)
        .map_err(|e| {
            CodeOutcome::failure(
                CodeErrorKind::Memory,
                format!("the code runtime could not start: {e}"),
                Vec::new(),
            )
        })?;
        let pins = context.with(|ctx| Pins::hold(&runtime, &ctx));
        let prelude = context.with(|ctx| match super::prelude::load(&ctx) {
            Ok(f) => Ok(Persistent::save(&ctx, f)),
            Err(rquickjs::Error::Exception) => Err(start_failed(describe_value(&ctx.catch()))),
            Err(e) => Err(start_failed(e.to_string())),
        })?;
        Ok(Prepared {
            prelude,
            pins,
            context,
            runtime,
        })
    }
}

/// What a finished run leaves to free: its context, then its runtime (a collection of all the
/// program made). Dropped once the outcome is sent, so the caller does not wait for it.
pub(crate) struct Spent {
    // Dropped in this order: the held blocks and the context before the runtime that holds
    // them.
    _pins: Option<Pins>,
    _context: Context,
    _runtime: Runtime,
}

/// Runs one program to completion on the current thread (the one `prepared` was made on),
/// polling its tool calls here (and the sub-call coordinator, if `local` holds it).
pub(crate) fn execute(
    prepared: Prepared,
    program: String,
    bindings: Bindings,
    local: Option<LocalDriver>,
    limits: Limits,
    stop: Arc<Stop>,
) -> (CodeOutcome, Spent) {
    let Prepared {
        prelude,
        pins,
        context,
        runtime,
    } = prepared;
    // The run's own bounds, whatever the interpreter was prepared under.
    runtime.set_memory_limit(limits.memory_bytes);
    runtime.set_max_stack_size(limits.stack_bytes);
    let handler_stop = stop.clone();
    runtime.set_interrupt_handler(Some(Box::new(move || handler_stop.should_stop())));
    let logs = Rc::new(RefCell::new(Logs {
        lines: Vec::new(),
        bytes: 0,
    }));
    let names: Rc<[Arc<str>]> = Rc::from(bindings.names());
    let calls = Rc::new(Calls::new(bindings, local));
    let outcome = context.with(|ctx| {
        let mut session = Session {
            ctx: ctx.clone(),
            limits: &limits,
            stop: &stop,
            logs: logs.clone(),
            calls: calls.clone(),
            pending: Rc::new(RefCell::new(Vec::new())),
            done: Rc::new(RefCell::new(None)),
            realm: Rc::new(RefCell::new(None)),
            slow: Rc::new(RefCell::new(None)),
        };
        let outcome = session.run(prelude, program, names);
        // No JavaScript value may outlive the context: drop the unsettled calls' resolvers.
        session.pending.borrow_mut().clear();
        session.realm.borrow_mut().take();
        session.slow.borrow_mut().take();
        outcome
    });
    let spent = Spent {
        _pins: pins,
        _context: context,
        _runtime: runtime,
    };
    (outcome, spent)
}

struct Session<'a, 'js> {
    ctx: Ctx<'js>,
    limits: &'a Limits,
    stop: &'a Arc<Stop>,
    logs: Rc<RefCell<Logs>>,
    calls: Rc<Calls>,
    /// The resolve and reject functions of each call's promise, until it settles.
    pending: Rc<RefCell<Pending<'js>>>,
    /// The settled program's state (JSON text), once the prelude reported it.
    done: Rc<RefCell<Option<String>>>,
    /// The builtins the lossless check relies on, captured before the program ran.
    realm: Held<'js>,
    /// The prelude's path for a call the bindings do not make themselves.
    slow: Slow<'js>,
}

/// The prelude's `slow(index, args)`, held for the bindings until the run ends.
type Slow<'js> = Rc<RefCell<Option<Function<'js>>>>;

/// Resolvers of the calls in flight, at index `id - 1` (ids count up from 1, at most
/// `maxSubCalls` of them).
type Pending<'js> = Vec<Option<(Function<'js>, Function<'js>)>>;

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
        prelude: Persistent<Function<'static>>,
        program: String,
        names: Rc<[Arc<str>]>,
    ) -> CodeOutcome {
        let ctx = self.ctx.clone();
        let prelude: Function = match prelude.restore(&ctx) {
            Ok(f) => f,
            Err(e) => return self.failed("the code runtime could not start", e),
        };
        let caller = Rc::new(Caller {
            names: names.clone(),
            stop: self.stop.clone(),
            max: self.limits.max_sub_calls,
            calls: self.calls.clone(),
            pending: self.pending.clone(),
            last_id: Cell::new(0),
        });
        let log_fn = self.log_function();
        let call_fn = self.call_function(caller.clone());
        let bind_fn = self.bind_function(caller);
        let trap_fn = Function::new(ctx.clone(), |ctx: Ctx<'js>, unknown: Function<'js>| {
            trap::make(&ctx, &unknown)
        });
        let done_fn = self.done_function();
        // Captured before any of the program's code runs (the prelude is not the program's).
        let lossless_fn = Realm::capture(&ctx).and_then(|realm| {
            *self.realm.borrow_mut() = Some(realm);
            Realm::replacer(&ctx, self.realm.clone())
        });
        let names_json = serde_json::to_string(&*names).unwrap_or_else(|_| "[]".to_owned());
        let runner: rquickjs::Result<Object> = (|| {
            let mut args = Args::new(ctx.clone(), 9);
            args.push_arg(log_fn?)?;
            args.push_arg(call_fn?)?;
            args.push_arg(bind_fn?)?;
            args.push_arg(trap_fn?)?;
            args.push_arg(done_fn?)?;
            args.push_arg(lossless_fn?)?;
            args.push_arg(names_json)?;
            args.push_arg(ARGS_NOT_LOSSLESS)?;
            args.push_arg(MISSING_ARGS)?;
            prelude.call_arg(args)
        })();
        let runner = match runner {
            Ok(r) => r,
            Err(e) => return self.failed("the code runtime could not start", e),
        };
        let entry = |name: &str| runner.get::<_, Function>(name);
        let (start, failure) = match (entry("start"), entry("failure")) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
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
            let state = self.done.borrow_mut().take();
            if let Some(state) = state {
                return self.settled(&state);
            }
            if let Some((id, outcome)) = self.calls.next_ready() {
                if let Err(e) = self.settle(&failure, id, outcome) {
                    return self.failed("a tool result could not be handed to the program", e);
                }
                continue;
            }
            if self.calls.in_flight.get() == 0 {
                return CodeOutcome::failure(
                    CodeErrorKind::Exception,
                    "the program is waiting on a promise that can never settle (no tool call is in flight)",
                    self.take_logs(),
                );
            }
            if self.stop.host_gone.load(Ordering::Acquire) {
                return CodeOutcome::failure(
                    CodeErrorKind::Abort,
                    "the run was aborted: its host went away",
                    self.take_logs(),
                );
            }
            self.calls.wait(self.stop);
        }
    }

    /// Settles the promise of call `id` with its answer: the value, or a `ToolCallError` made
    /// by the prelude's `failure`.
    fn settle(
        &self,
        failure: &Function<'js>,
        id: u32,
        outcome: Result<Json, ToolCallError>,
    ) -> rquickjs::Result<()> {
        let taken = (id as usize)
            .checked_sub(1)
            .and_then(|i| self.pending.borrow_mut().get_mut(i).and_then(Option::take));
        let Some((resolve, reject)) = taken else {
            return Ok(());
        };
        match outcome {
            Ok(value) => resolve.call::<_, ()>((to_js(&self.ctx, &value)?,)),
            Err(e) => {
                let error: Value<'js> = failure.call((e.tool_name, e.message))?;
                reject.call::<_, ()>((error,))
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

    /// `hostDone(state)`: the prelude reports the settled program once.
    fn done_function(&self) -> rquickjs::Result<Function<'js>> {
        let done = self.done.clone();
        Function::new(self.ctx.clone(), move |state: String| {
            *done.borrow_mut() = Some(state);
        })
    }

    /// `hostCall(index, argsJson)`: makes a call of the binding at `index` of the names with
    /// the arguments' JSON text and returns its native promise.
    fn call_function(&self, caller: Rc<Caller<'js>>) -> rquickjs::Result<Function<'js>> {
        Function::new(
            self.ctx.clone(),
            move |ctx: Ctx<'js>, index: u32, args: String| -> rquickjs::Result<Promise<'js>> {
                caller.call(&ctx, index, |name| parse_args(name, Some(&args)))
            },
        )
    }

    /// `hostBind(slow)`: the binding functions, one for each name, in the names' order. A
    /// call whose argument is plain data (engine/plain.rs) is made straight from it and
    /// answers the call's native promise; anything else (no argument, a value plain data is
    /// not, a call refused here such as one past the limit) is handed to `slow(index, args)`,
    /// the prelude's JavaScript path, which writes the text, makes the call with `hostCall`
    /// and turns every failure into a rejection. So a binding never throws and always answers
    /// a promise, whichever path it takes.
    fn bind_function(&self, caller: Rc<Caller<'js>>) -> rquickjs::Result<Function<'js>> {
        let realm = self.realm.clone();
        let held = self.slow.clone();
        Function::new(
            self.ctx.clone(),
            move |ctx: Ctx<'js>, slow: Function<'js>| -> rquickjs::Result<Vec<Function<'js>>> {
                *held.borrow_mut() = Some(slow);
                let names = caller.names.clone();
                let mut bindings = Vec::with_capacity(names.len());
                for (index, name) in (0u32..).zip(names.iter()) {
                    let binding = binding(&ctx, index, &caller, &realm, &held)?;
                    // `function (args)`: one declared parameter, the tool's name.
                    bindings.push(binding.with_length(1)?.with_name(&**name)?);
                }
                Ok(bindings)
            },
        )
    }
}

/// The binding of the tool at `index` (see `hostBind`).
fn binding<'js>(
    ctx: &Ctx<'js>,
    index: u32,
    caller: &Rc<Caller<'js>>,
    realm: &Held<'js>,
    slow: &Slow<'js>,
) -> rquickjs::Result<Function<'js>> {
    let (caller, realm, slow) = (caller.clone(), realm.clone(), slow.clone());
    Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, args: Opt<Value<'js>>| -> rquickjs::Result<Value<'js>> {
            let args = match args.0 {
                Some(args) => args,
                None => Value::new_undefined(ctx.clone()),
            };
            let json = realm
                .borrow()
                .as_ref()
                .and_then(|realm| realm.plain.json(&ctx, &args));
            if let Some(json) = json {
                match caller.call(&ctx, index, |_| Ok(json)) {
                    Ok(promise) => return Ok(promise.into_value()),
                    // The slow path meets the same refusal and rejects with it.
                    Err(rquickjs::Error::Exception) => drop(ctx.catch()),
                    Err(e) => return Err(e),
                }
            }
            let slow = slow.borrow().clone();
            match slow {
                Some(slow) => slow.call((index, args)),
                None => Err(Exception::throw_internal(&ctx, "the run has ended")),
            }
        },
    )
}

/// What makes a call for the program: the binding names, the limit on calls, and where each
/// call's promise waits for its answer.
struct Caller<'js> {
    names: Rc<[Arc<str>]>,
    stop: Arc<Stop>,
    max: usize,
    calls: Rc<Calls>,
    pending: Rc<RefCell<Pending<'js>>>,
    /// The id of the last call made (ids count up from 1).
    last_id: Cell<u32>,
}

impl<'js> Caller<'js> {
    /// Makes a call of the binding at `index`, its arguments checked by `check`, and returns
    /// the promise its answer settles. The names are the bindings' own list, so a name found
    /// at `index` is a binding: only the arguments are left to check.
    fn call(
        &self,
        ctx: &Ctx<'js>,
        index: u32,
        check: impl FnOnce(&str) -> Result<Json, ToolCallError>,
    ) -> rquickjs::Result<Promise<'js>> {
        let Some(name) = self.names.get(index as usize) else {
            return Err(Exception::throw_internal(ctx, "no such binding"));
        };
        if self.last_id.get() as usize >= self.max {
            self.stop.fatal.store(FATAL_SUB_CALLS, Ordering::Relaxed);
            return Err(Exception::throw_range(
                ctx,
                "run_code tool call limit exceeded",
            ));
        }
        let (promise, resolve, reject) = Promise::new(ctx)?;
        let id = self.last_id.get() + 1;
        self.last_id.set(id);
        self.pending.borrow_mut().push(Some((resolve, reject)));
        let checked = check(name);
        self.calls.submit(id, name, checked);
        Ok(promise)
    }
}

/// The program's copy of an answer: strings, booleans and null made directly (what
/// `JSON.parse` of their text gives), anything else parsed from its JSON text.
fn to_js<'js>(ctx: &Ctx<'js>, value: &Json) -> rquickjs::Result<Value<'js>> {
    match value.value() {
        serde_json::Value::String(s) => {
            rquickjs::String::from_str(ctx.clone(), s).map(|s| s.into_value())
        }
        serde_json::Value::Bool(b) => Ok(Value::new_bool(ctx.clone(), *b)),
        serde_json::Value::Null => Ok(Value::new_null(ctx.clone())),
        _ => ctx.json_parse(value.to_json_string()),
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
