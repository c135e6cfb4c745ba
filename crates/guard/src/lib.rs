//! # dsh-guard
//!
//! The policy half of the tool pipeline: the hook points with their ordering rules, deny-only
//! guards, the approval seam, permission rules, and the built-in dispatch wrappers (timeout,
//! retry, metrics). The staged runtime drives what is registered here; this crate only keeps
//! the listeners, orders them, and implements the built-in policies.
//!
//! It deliberately does NOT: schedule calls, run tool bodies, write tool events, know about the
//! session (approval audit goes through [`AuditSink`], which `dsh-scheduler` implements over the
//! session log; this crate depends on `dsh-core` only), or know about the scheduler, the filesystem tools or Code Mode (those use its
//! generic [`Waterfall`]s and call [`resolve_ask`]).
//!
//! Spec rules owned here: P1 (pre-execute ordering and scoping), P2 (approval, fail closed),
//! P3 (guards), D1 (around-chain registration), D4 (timeout policy), F1/F4 registration of
//! post-execute listeners and result observers, the FS1 intent waterfalls as generic
//! [`Waterfall`]s; conformance APR-01..40, GRD-05..09, TMO-01..12.
//!
//! ## Example
//!
//! Permission rules, decided for a call's subject (installed as a pre-execute listener with
//! `hooks.on_pre_execute(Scope::Global, rules).keep()`):
//!
//! ```
//! use dsh_core::{PermissionSubject, ToolRegistry};
//! use dsh_guard::{PermissionAction, PermissionMatch, PermissionRules};
//!
//! let rules = PermissionRules::new(ToolRegistry::new())
//!     .allow("read")?
//!     .deny("read(*secrets*)")?;
//! let secret = PermissionSubject::single("config/secrets.env");
//! assert!(matches!(
//!     rules.decide_subject("read", Some(&secret)),
//!     PermissionMatch::Rule { action: PermissionAction::Deny, .. }
//! ));
//! # Ok::<(), dsh_guard::GuardError>(())
//! ```
//!
//! ## Hook points
//!
//! Ordering is the same everywhere: the first-registered listener is outermost (asked first),
//! `prepend_*` puts one in front of all existing ones. A listener is [`Scope::Global`] (every
//! call) or [`Scope::Agent`] (calls of that agent and, through the registry's scope chain, of
//! agents nested under it). Registration returns a handle; disposing or dropping it removes
//! exactly that listener (`keep()` keeps it). Registration and removal are safe while calls
//! run: **a call in flight keeps the listeners it started with** ([`Hooks::snapshot`] is taken
//! once per call); only guards are evaluated live (see below). Anyone holding the [`Hooks`] may
//! register: plugins, the host, policies of this crate.
//!
//! | point | register with | sees | may return |
//! |---|---|---|---|
//! | `tools/pre-execute` | [`Hooks::on_pre_execute`], [`Hooks::prepend_pre_execute`] | the frozen `ToolExecution` (arguments read-only) and `next` | `allow`, `deny{reason}`, `ask{reason?}` ([`dsh_core::PreToolDecision`]) or what `next` returns; innermost default `allow`; an `Err` or panic fails the call (P5) |
//! | approval answerers (for an `ask`) | [`ApprovalService::add_answerer`], [`ApprovalService::prepend_answerer`] | the [`ApprovalRequest`] `{agent, tool_name, call_id, reason, signal}` (the caller's own signal) and `next`; only questions of an agent their scope reaches | an [`ApprovalOutcome`] or `next`'s; chain end `unavailable`; an error or panic is `unavailable`; the `never` policy and an already-aborted signal answer before any answerer is asked |
//! | guards | [`Hooks::add_guard`] | the frozen execution, only for a call still allowed after pre-execute and approval | a denial reason or nothing; a panic denies |
//! | `tools/execute` | [`Hooks::on_execute`], [`Hooks::prepend_execute`] | a [`dsh_core::Dispatch`] (the execution and the signal the body will see) and `next` | a `ToolResult` (its own, or `next`'s, after calling `next` zero, one or several times), or `Err` (a wrapper failure: post-execute is skipped); it may replace the body's signal with [`dsh_core::Dispatch::with_signal`] but never the arguments, and the runtime fuses the caller's signal back in |
//! | `tools/post-execute` | [`Hooks::on_post_execute`], [`Hooks::prepend_post_execute`] | the execution, the candidate result, and `next` | a [`dsh_core::PostToolDecision`] (accept, replace content or value, block; plus contexts) or `next`'s; innermost default `accept` |
//! | `tools/result` | [`Hooks::on_result`] | the execution and the frozen, final result | nothing: synchronous, observe only; a panic is contained and logged |
//! | `fs/write-intent`, `fs/edit-intent`, `tools/code-dispatch-log` | [`Waterfall::on`], [`Waterfall::prepend`] | the question type of the crate that owns the point, and `next` | that crate's answer type; the owner supplies the innermost default; these points are global (no scope); a panicking listener is skipped ([`Waterfall::decide`]) or ends the question with the owner's fail-closed answer ([`Waterfall::decide_or`]) |
//!
//! Guards (spec P3) run only for a call still allowed: global guards first, then the agent's
//! scope chain from farthest to nearest, registration order within a layer; the first reason
//! wins and is final. They cannot be reordered and only their handle removes them. They are
//! evaluated live: a guard registered during a pass is seen in that pass unless its layer was
//! emptied in between (GRD-08, GRD-09).
//!
//! ## Approval
//!
//! [`resolve_ask`] is what the runtime calls for an `ask` (APR-01..08): no service, or no agent
//! on the call, denies at once; otherwise [`ApprovalService::request`] asks, and only
//! `allowed-once` continues (to the guards). Every question is audited to the agent's session
//! as `approval/asked` + `approval/decided` with one id, inside an open turn; a session's
//! `approval/policy` override (`ask` | `never`) outranks the configured default.
//!
//! ## Built-in policies
//!
//! - [`PermissionRules`]: a pre-execute listener over `allow`/`ask`/`deny` rule lists.
//! - [`TimeoutPolicy`] (`timeout-policy`): the D4 wrapper.
//! - [`RetryPolicy`]: bounded retries with backoff for retryable tool failures.
//! - [`Metrics`]: a `tracing` span per dispatch and per-tool counters and latency histograms.
//! - [`GuardConfig`]: loads all of the above from TOML and installs them.
//!
//! Its modules are private: everything public is re-exported at the root.

// Every module is private: what a user names is re-exported below, chosen one by one.
mod approval;
mod audit;
mod config;
mod error;
mod guards;
mod handle;
mod hookset;
mod metrics;
mod permission;
mod retry;
mod scope;
mod timeout;
mod waterfall;

pub use approval::{
    APPROVAL_PLUGIN, ASK_POLICY_TEXT, AnswerNext, Answerer, ApprovalConfig, ApprovalOutcome,
    ApprovalPolicy, ApprovalRequest, ApprovalService, AuditSession, Feedback, NEVER_POLICY_TEXT,
    PolicyPrompt, answer_fn, effective_approval_policy, gate_outcome, gate_wire_outcome,
    resolve_ask,
};
pub use audit::{APPROVAL_ASKED, APPROVAL_DECIDED, APPROVAL_POLICY, AuditSink};
pub use config::{GuardConfig, Installed};
pub use error::{AuditCause, GuardError};
pub use handle::ListenerHandle;
pub use hookset::{CallHooks, HookHandle, Hooks};
pub use metrics::{
    LATENCY_BOUNDS_MS, LatencyHistogram, Metrics, MetricsSnapshot, OUTCOME_ERROR, OUTCOME_OK,
    OUTCOME_WRAPPER_ERROR, ToolMetrics, outcome_label,
};
pub use permission::{PermissionAction, PermissionMatch, PermissionRule, PermissionRules};
pub use retry::RetryPolicy;
pub use scope::Scope;
pub use timeout::{PluginDescriptor, TimeoutPolicy};
pub use waterfall::{DecideNext, Listener, PanicAnswer, Waterfall, WaterfallHandle};
