//! # dsh-hooks
//!
//! User command hooks in the Claude Code settings format, bridged onto the dsh pipeline, so the
//! hooks people already wrote for Claude Code work unchanged.
//!
//! ## Settings
//!
//! Read from, and merged in this order (hooks of every file are concatenated, so all of them
//! run): the workspace's `.dsh/settings.json`, the user's `settings.json` in
//! `$XDG_CONFIG_HOME/dsh` (else `~/.config/dsh`), then an explicit file (`dsh run --settings`):
//!
//! ```json
//! {"hooks": {
//!   "PreToolUse":  [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh", "timeout": 5}]}],
//!   "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "./fmt.sh", "onFailure": "block"}]}]
//! }}
//! ```
//!
//! A matcher that is empty or `*` matches every tool; a plain name or `A|B` list matches those
//! names exactly; anything else is a regex. Matchers see both our tool names and the Claude Code
//! names (`read`/`Read`, `write`/`Write`, `edit`/`Edit`, `bash`/`Bash`, `glob`/`Glob`,
//! `grep`/`Grep`). `timeout` is in seconds (default 60).
//!
//! ```
//! use dsh_hooks::{HookEvent, HookSettings};
//! let settings = HookSettings::parse(
//!     r#"{"hooks": {"PreToolUse": [{"matcher": "Bash",
//!         "hooks": [{"type": "command", "command": "./guard.sh"}]}]}}"#,
//!     std::path::Path::new("settings.json"),
//! )?;
//! assert_eq!(settings.count(HookEvent::PreToolUse), 1);
//! // settings → ClaudeHooks → `.install(&hooks, session)` bridges them onto the pipeline.
//! # Ok::<(), dsh_hooks::HooksError>(())
//! ```
//!
//! ## Protocol
//!
//! A hook runs as `sh -c <command>` in the workspace (also in `CLAUDE_PROJECT_DIR`) and reads
//! `{session_id, transcript_path, cwd, hook_event_name, tool_name, tool_input, tool_use_id}` on
//! stdin, plus `tool_response` (the tool's value) for PostToolUse; `tool_name` is the Claude
//! Code name when there is one. Exit 0 with optional JSON on stdout
//! (`hookSpecificOutput.permissionDecision` `allow` | `deny` | `ask` with
//! `permissionDecisionReason`; `decision: "block"` with `reason`; `additionalContext`, in
//! `hookSpecificOutput` or at the top level); exit 2 blocks with stderr as the reason; any other
//! exit is a hook error. PreToolUse deny → `deny`, ask → `ask`, allow → no objection (other
//! policy still decides); PostToolUse (after a successful call only) block → `block`, the reason
//! being what the model sees instead of the result. Several hooks on one point run one after
//! the other in configuration order and fold most restrictively: deny > ask > allow.
//! Additional contexts (from either point) are contexts of the call's result, delivered after
//! all the results of the batch.
//!
//! ## Failures
//!
//! A hook that crashes, is killed, times out (it is killed with its process group), prints
//! invalid JSON or asks to rewrite the call (`updatedInput`: refused, arguments are never
//! rewritten, spec S1) is a hook error: it is reported (a `hook/result` event with `error`, and
//! a `tracing` warning) but does not change the decision, as in Claude Code, unless the hook
//! says `"onFailure": "block"`: then it fails closed (PreToolUse denies, PostToolUse blocks).
//! Every run appends `hook/invoked` before it starts and `hook/result` after it ends.
//!
//! Code Mode sub-calls (`run_code`) go through the same staged pipeline as native calls, so the
//! hooks run for them too, with no special case here: there is no bypass through `run_code`.
//!
//! It deliberately does NOT: rewrite arguments or results (only deny, ask, block and add
//! context), run hook points other than PreToolUse and PostToolUse (others in a file are
//! ignored with a warning), run hook types other than `command` (refused at load), or grant
//! anything: a hook's `allow` never overrides permission rules, approval or guards.
//!
//! Spec rules served: P1 (a pre-execute listener), F1/F2/F6 (post-execute decisions and
//! contexts), S1 (no rewriting), L2 (`hook/*` events kept verbatim in the log).
//!
//! Its modules are private: everything public is re-exported at the root ([`ClaudeHooks`],
//! [`HookSettings`], [`ClaudePermissions`], [`TrustStore`], the `hook/*` event types
//! [`HOOK_INVOKED`] and [`HOOK_RESULT`], ...).

// Every module is private: what a user names is re-exported below, chosen one by one.
mod bridge;
mod error;
mod events;
mod fold;
mod install;
mod matcher;
mod names;
mod permissions;
#[cfg(test)]
mod props_tests;
mod protocol;
mod runner;
mod settings;
mod trust;

pub use bridge::CONTEXT_PLUGIN;
pub use error::HooksError;
pub use events::{HOOK_INVOKED, HOOK_RESULT};
pub use install::{ClaudeHooks, Installed};
pub use matcher::{Matcher, MatcherError};
pub use names::{CLAUDE_NAMES, claude_name};
pub use permissions::{ClaudeMatch, ClaudePermissions, ClaudeRule};
pub use settings::{
    CommandHook, DEFAULT_TIMEOUT_SECS, HookEvent, HookSettings, MatcherGroup, OnFailure,
    SETTINGS_FILE, WORKSPACE_SETTINGS, user_config_dir,
};
pub use trust::{TRUST_FILE, TrustStore, WorkspaceSettingsFile};
