//! Hooks from closures, for the common case of a synchronous decision: no `#[async_trait]`
//! impl needed. A hook that has to await implements the trait itself (with `async_trait`).

use async_trait::async_trait;

use crate::decision::{PostToolDecision, PreToolDecision};
use crate::execution::ToolExecution;
use crate::failure::Failure;
use crate::hooks::{PostExecuteHook, PostNext, PreExecuteHook, PreNext};
use crate::result::ToolResult;

/// An observer of every call that reaches `tools/pre-execute`, whatever the deciding listeners
/// answer (registered with `Hooks::observe_pre_execute` in `dsh-guard`). It sees the frozen
/// execution before any listener decides; it cannot decide. A panic is contained.
pub trait PreExecuteObserver: Send + Sync + 'static {
    /// Sees the call before the pre-execute waterfall runs.
    fn observe(&self, exec: &ToolExecution);
}

impl<F> PreExecuteObserver for F
where
    F: Fn(&ToolExecution) + Send + Sync + 'static,
{
    fn observe(&self, exec: &ToolExecution) {
        self(exec)
    }
}

/// A pre-execute listener from a synchronous closure: `Some(decision)` decides, `None` lets the
/// rest of the waterfall decide.
///
/// ```
/// use dsh_core::{PreToolDecision, pre_execute_fn};
/// let no_deletes = pre_execute_fn(|exec| {
///     (exec.name() == "delete").then(|| PreToolDecision::deny("deleting is not allowed here"))
/// });
/// # let _ = no_deletes;
/// ```
pub fn pre_execute_fn<F>(f: F) -> impl PreExecuteHook
where
    F: Fn(&ToolExecution) -> Option<PreToolDecision> + Send + Sync + 'static,
{
    PreFn(f)
}

/// A post-execute listener from a synchronous closure over the call and its candidate result:
/// `Some(decision)` decides, `None` lets the rest of the waterfall decide.
///
/// ```
/// use dsh_core::{PostToolDecision, post_execute_fn};
/// let audit = post_execute_fn(|exec, result| {
///     result.is_error().then(|| PostToolDecision::accept())
/// });
/// # let _ = audit;
/// ```
pub fn post_execute_fn<F>(f: F) -> impl PostExecuteHook
where
    F: Fn(&ToolExecution, &ToolResult) -> Option<PostToolDecision> + Send + Sync + 'static,
{
    PostFn(f)
}

struct PreFn<F>(F);

#[async_trait]
impl<F> PreExecuteHook for PreFn<F>
where
    F: Fn(&ToolExecution) -> Option<PreToolDecision> + Send + Sync + 'static,
{
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        match (self.0)(exec) {
            Some(d) => Ok(d),
            None => next.run(exec).await,
        }
    }
}

struct PostFn<F>(F);

#[async_trait]
impl<F> PostExecuteHook for PostFn<F>
where
    F: Fn(&ToolExecution, &ToolResult) -> Option<PostToolDecision> + Send + Sync + 'static,
{
    async fn post_execute(
        &self,
        exec: &ToolExecution,
        result: &ToolResult,
        next: PostNext<'_>,
    ) -> Result<PostToolDecision, Failure> {
        match (self.0)(exec, result) {
            Some(d) => Ok(d),
            None => next.run(exec, result).await,
        }
    }
}
