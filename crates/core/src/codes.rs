//! The typed error codes and names of spec section 9, and the exact model-facing messages of the
//! conformance quick reference. Every crate takes its strings from here.

/// `UNKNOWN_TOOL`: the name is not registered or not visible to the caller.
pub const UNKNOWN_TOOL: &str = "UNKNOWN_TOOL";
/// `INVALID_ARGS`: arguments fail the tool's parameter schema.
pub const INVALID_ARGS: &str = "INVALID_ARGS";
/// `INVALID_TOOL_OUTPUT`: a value, render or projection failed the output contract.
pub const INVALID_TOOL_OUTPUT: &str = "INVALID_TOOL_OUTPUT";
/// `ABORTED_BEFORE_DISPATCH`: cancelled before the body was invoked.
pub const ABORTED_BEFORE_DISPATCH: &str = "ABORTED_BEFORE_DISPATCH";
/// `ABORTED`: cancelled after the body was invoked.
pub const ABORTED: &str = "ABORTED";
/// `TOOL_TIMEOUT`: the tool's deadline fired first.
pub const TOOL_TIMEOUT: &str = "TOOL_TIMEOUT";
/// `CODE_RUN_FAILED`: a `run_code` program failed.
pub const CODE_RUN_FAILED: &str = "CODE_RUN_FAILED";
/// `FS_NOT_OBSERVED`: a mutation of a file this session never read.
pub const FS_NOT_OBSERVED: &str = "FS_NOT_OBSERVED";
/// `FS_NOT_FOUND`: the file is known to be absent.
pub const FS_NOT_FOUND: &str = "FS_NOT_FOUND";
/// `FS_STALE_VERSION`: the file changed since it was read.
pub const FS_STALE_VERSION: &str = "FS_STALE_VERSION";
/// `INTERRUPTED`: the process died while the call was in flight (spec I4).
pub const INTERRUPTED: &str = "INTERRUPTED";

/// Error name of unknown-tool failures.
pub const TOOL_NOT_FOUND_ERROR: &str = "ToolNotFoundError";
/// Error name of argument failures.
pub const TOOL_ARGS_ERROR: &str = "ToolArgsError";
/// Error name of output-contract failures.
pub const TOOL_OUTPUT_ERROR: &str = "ToolOutputError";
/// Error name of cancellations.
pub const ABORT_ERROR: &str = "AbortError";
/// Error name of timeouts.
pub const TOOL_TIMEOUT_ERROR: &str = "ToolTimeoutError";
/// Error name of code-run failures.
pub const CODE_RUN_FAILED_ERROR: &str = "CodeRunFailedError";
/// Error name of filesystem failures.
pub const FS_ERROR: &str = "FsError";
/// Error name of a coded error raised by a hook, wrapper or tool.
pub const HARNESS_ERROR: &str = "HarnessError";
/// Error name of crash-repair results.
pub const INTERRUPTED_ERROR: &str = "InterruptedError";

/// Exact messages.
pub mod messages {
    /// Body never invoked.
    pub const ABORTED_BEFORE_DISPATCH: &str = "tool call aborted before dispatch";
    /// Body invoked.
    pub const ABORTED: &str = "tool call aborted";
    /// Arguments cannot be represented as JSON.
    pub const ARGS_NOT_LOSSLESS: &str =
        "tool execution arguments must be losslessly JSON-serializable";
    /// A final result that cannot be serialized.
    pub const RESULT_NOT_LOSSLESS: &str = "tool result must be losslessly JSON-serializable";
    /// post-execute tried to replace both.
    pub const POST_REPLACE_BOTH: &str =
        "tools/post-execute accept decision cannot replace both value and content";
    /// post-execute tried to replace the value of a failure.
    pub const POST_REPLACE_FAILED_VALUE: &str =
        "tools/post-execute cannot replace the value of a failed result";
    /// A block with empty feedback.
    pub const POST_BLOCK_EMPTY: &str = "tool result blocked by post-execute policy";
    /// A thrown value that cannot be printed.
    pub const UNPRINTABLE: &str = "<unprintable thrown value>";
    /// `run_code` without output.
    pub const RUN_CODE_NO_OUTPUT: &str = "(run_code completed with no output)";
    /// The positive-timeout rule.
    pub const TIMEOUT_POSITIVE: &str = "timeoutMs must be a positive finite number";
    /// The scheduler's pool-size rule.
    pub const MAX_PARALLEL_POSITIVE: &str = "maxParallelToolCalls must be a positive integer";
    /// Code Mode's pool-size rule.
    pub const MAX_SUB_CALLS_POSITIVE: &str = "maxParallelSubCalls must be a positive integer";
    /// Approval policy outside the vocabulary.
    pub const APPROVAL_POLICY_VALUES: &str = "approval policy must be one of \"ask\" or \"never\"";

    /// `unknown tool "<name>"`.
    pub fn unknown_tool(name: &str) -> String {
        format!("unknown tool \"{name}\"")
    }
    /// The Code Mode route hint for a direct call.
    pub fn code_mode_only(name: &str) -> String {
        format!(
            "unknown tool \"{name}\": only `run_code` is callable directly — call `{name}` from inside a `run_code` program instead"
        )
    }
    /// `tool call timed out after <ms>ms`.
    pub fn timed_out(ms: u64) -> String {
        format!("tool call timed out after {ms}ms")
    }
    /// An ask with no approval service and no reason.
    pub fn approval_not_supported(name: &str) -> String {
        format!("tool \"{name}\" requires approval (not yet supported)")
    }
    /// Approval `rejected`.
    pub fn approval_rejected(name: &str) -> String {
        format!("the user rejected tool \"{name}\"")
    }
    /// Approval `cancelled`.
    pub fn approval_cancelled(name: &str) -> String {
        format!("approval for tool \"{name}\" was cancelled")
    }
    /// Approval `unavailable`.
    pub fn approval_unavailable(name: &str) -> String {
        format!("tool \"{name}\" requires approval, but no approval channel is available")
    }
    /// An ask for a call without an agent.
    pub fn approval_no_agent(name: &str) -> String {
        format!("tool \"{name}\" requires approval, but the call has no agent to route it through")
    }
}
