//! The small, stable hook traits every policy plugs into, with the `next` handles that chain them.
//! The ordering rules (who is outermost, scoping by agent, registration handles) live in
//! `dsh-guard`; this module only says what each kind of hook may do.
//!
//! - [`PreExecuteHook`]: a waterfall listener; decides or calls `next` (innermost default `allow`).
//! - [`ExecuteWrapper`]: an around-dispatch wrapper; may replace the body's signal, short-circuit,
//!   or call `next` any number of times; can never change the arguments.
//! - [`PostExecuteHook`]: a waterfall listener over the candidate result (innermost `accept`).
//! - [`ResultObserver`]: synchronous notice of the frozen result; observe only.
//! - [`Guard`]: deny-only; returns a reason or abstains.
//!
//! A panic inside any hook is caught where the hook is invoked and becomes a [`Failure`].

use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;

use crate::decision::{PostToolDecision, PreToolDecision};
use crate::execution::ToolExecution;
use crate::failure::Failure;
use crate::result::ToolResult;
use crate::signal::Signal;

/// A `tools/pre-execute` listener.
#[async_trait]
pub trait PreExecuteHook: Send + Sync + 'static {
    /// Decide, or delegate with `next.run(exec).await`.
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure>;
}

/// The rest of the pre-execute waterfall.
#[derive(Clone, Copy)]
pub struct PreNext<'a> {
    rest: &'a [Arc<dyn PreExecuteHook>],
}

impl<'a> PreNext<'a> {
    /// A waterfall over `chain`, outermost first.
    pub fn new(chain: &'a [Arc<dyn PreExecuteHook>]) -> PreNext<'a> {
        PreNext { rest: chain }
    }
    /// Runs the rest of the waterfall; the innermost default is `Allow`.
    pub async fn run(self, exec: &ToolExecution) -> Result<PreToolDecision, Failure> {
        match self.rest.split_first() {
            None => Ok(PreToolDecision::Allow),
            Some((hook, tail)) => crate::contained::future(std::pin::pin!(
                hook.pre_execute(exec, PreNext { rest: tail })
            ))
            .await
            .unwrap_or_else(|p| Err(Failure::from_panic("tools/pre-execute listener", &*p))),
        }
    }
}

/// What a wrapper and the body see of a call during dispatch: the execution and the signal the
/// body will observe (the only thing a wrapper may replace).
#[derive(Clone, Debug)]
pub struct Dispatch {
    exec: Arc<ToolExecution>,
    signal: Signal,
}

impl Dispatch {
    /// A dispatch view whose signal is the caller's.
    pub fn new(exec: Arc<ToolExecution>) -> Dispatch {
        let signal = exec.signal().clone();
        Dispatch { exec, signal }
    }
    /// The execution.
    pub fn exec(&self) -> &Arc<ToolExecution> {
        &self.exec
    }
    /// The signal installed so far (the caller's unless a wrapper replaced it).
    pub fn signal(&self) -> &Signal {
        &self.signal
    }
    /// The execution and the signal, taken apart (the terminal owns its dispatch: nothing is
    /// cloned).
    pub fn into_parts(self) -> (Arc<ToolExecution>, Signal) {
        (self.exec, self.signal)
    }
    /// The same call with another signal for the body. The caller's signal is fused back in
    /// before the body runs, so it can never be dropped.
    pub fn with_signal(&self, signal: Signal) -> Dispatch {
        Dispatch {
            exec: self.exec.clone(),
            signal,
        }
    }
}

/// The innermost step of the around-chain: dispatch to the body.
pub trait Terminal: Send + Sync {
    /// Runs the body for `call` and returns its normalized result (a body failure is a result).
    fn dispatch(&self, call: Dispatch) -> BoxFuture<'_, ToolResult>;
}

/// A `tools/execute` wrapper.
#[async_trait]
pub trait ExecuteWrapper: Send + Sync + 'static {
    /// Wraps dispatch. `Err` is a wrapper failure: post-execute is skipped for it (spec D5).
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure>;
}

/// The rest of the around-chain; copyable, so a wrapper may call it several times (retry).
#[derive(Clone, Copy)]
pub struct ExecuteNext<'a> {
    rest: &'a [Arc<dyn ExecuteWrapper>],
    terminal: &'a dyn Terminal,
}

impl<'a> ExecuteNext<'a> {
    /// An around-chain over `chain` (outermost first) ending in `terminal`.
    pub fn new(chain: &'a [Arc<dyn ExecuteWrapper>], terminal: &'a dyn Terminal) -> Self {
        ExecuteNext {
            rest: chain,
            terminal,
        }
    }
    /// Runs the rest of the chain. A body failure resolves as a failed result, never an `Err`;
    /// `Err` comes only from a wrapper further in that failed.
    pub async fn run(self, call: Dispatch) -> Result<ToolResult, Failure> {
        match self.rest.split_first() {
            None => Ok(self.terminal.dispatch(call).await),
            Some((w, tail)) => {
                let next = ExecuteNext {
                    rest: tail,
                    terminal: self.terminal,
                };
                crate::contained::future(std::pin::pin!(w.around(call, next)))
                    .await
                    .unwrap_or_else(|p| Err(Failure::from_panic("tools/execute wrapper", &*p)))
            }
        }
    }
}

/// A `tools/post-execute` listener.
#[async_trait]
pub trait PostExecuteHook: Send + Sync + 'static {
    /// Decide about the candidate result, or delegate with `next.run(exec, result).await`.
    async fn post_execute(
        &self,
        exec: &ToolExecution,
        result: &ToolResult,
        next: PostNext<'_>,
    ) -> Result<PostToolDecision, Failure>;
}

/// The rest of the post-execute waterfall.
#[derive(Clone, Copy)]
pub struct PostNext<'a> {
    rest: &'a [Arc<dyn PostExecuteHook>],
}

impl<'a> PostNext<'a> {
    /// A waterfall over `chain`, outermost first.
    pub fn new(chain: &'a [Arc<dyn PostExecuteHook>]) -> PostNext<'a> {
        PostNext { rest: chain }
    }
    /// Runs the rest of the waterfall; the innermost default is `accept`.
    pub async fn run(
        self,
        exec: &ToolExecution,
        result: &ToolResult,
    ) -> Result<PostToolDecision, Failure> {
        match self.rest.split_first() {
            None => Ok(PostToolDecision::accept()),
            Some((hook, tail)) => crate::contained::future(std::pin::pin!(hook.post_execute(
                exec,
                result,
                PostNext { rest: tail }
            )))
            .await
            .unwrap_or_else(|p| Err(Failure::from_panic("tools/post-execute listener", &*p))),
        }
    }
}

/// A `tools/result` observer: synchronous, observe only; a panic is contained and logged.
pub trait ResultObserver: Send + Sync + 'static {
    /// Sees the frozen, authoritative result.
    fn on_result(&self, exec: &ToolExecution, result: &ToolResult);
}

impl<F> ResultObserver for F
where
    F: Fn(&ToolExecution, &ToolResult) + Send + Sync + 'static,
{
    fn on_result(&self, exec: &ToolExecution, result: &ToolResult) {
        self(exec, result)
    }
}

/// A monotonic guard: may only deny (return a reason) or abstain (`None`).
pub trait Guard: Send + Sync + 'static {
    /// Checks a call that policy has allowed.
    fn check(&self, exec: &ToolExecution) -> Option<String>;
}

impl<F> Guard for F
where
    F: Fn(&ToolExecution) -> Option<String> + Send + Sync + 'static,
{
    fn check(&self, exec: &ToolExecution) -> Option<String> {
        self(exec)
    }
}
