//! # dsh-tool-bash
//!
//! The shell tool of the dsh pipeline: `bash {command, description?, timeout?, timeoutMs?, workdir?}`, a
//! fresh `bash -c` per call, contained by the kernel rather than by matching command strings.
//!
//! - [`SandboxMode`]: `read-only`, `workspace-write`, `danger-full-access`. In the two contained
//!   modes the command runs under Landlock (read everywhere; write only beneath the workspace
//!   roots — in `workspace-write` — and a private temp dir; `/dev/null` reachable; TCP bind and
//!   connect refused) and a seccomp filter (no socket but `AF_UNIX`, no `io_uring`, no leaving
//!   the process group, no owner changes), with `no_new_privs` and every capability dropped.
//!   These are applied by a small helper ([`sandbox::exec_sandboxed`]: the `dsh-sandbox-exec`
//!   program, installed beside `dsh` and built by this crate too, or the `dsh` binary's hidden
//!   `__sandbox-exec` subcommand) to itself, so the library needs no `unsafe` `pre_exec` code.
//!   The helper runs once per tool and mode as the session supervisor, which starts every
//!   command (inheriting its Landlock ruleset; each contained command passes through the
//!   helper's seccomp step, then `exec`s the shell) and kills every group it started when dsh
//!   is gone; when it cannot start, each call runs under a helper of its own.
//! - [`SandboxPolicy`]: the pre-execute listener that picks each call's mode; a request for a
//!   wider mode (`sandbox_permissions` + `justification`) becomes a fresh approval question.
//!   Without kernel support a contained call fails closed with `SANDBOX_UNAVAILABLE` unless the
//!   settings say otherwise ([`Unavailable`]).
//! - [`Preset`]: a sandbox mode and an approval policy chosen together, announced in the session
//!   log as `permission/preset`, `sandbox/mode` and `approval/policy` ([`announce_preset`]).
//! - Processes: each call runs in its own process group, owned through `dsh-process` (so a
//!   process about to exit at once kills it with every other live group:
//!   `dsh_process::kill_all_live_groups`); cancellation, its own timeout and a process-count
//!   limit end the whole group (`SIGTERM`, a short grace, `SIGKILL`), and so does the shell's
//!   exit for whatever it left running; output captured so far is reported.
//!
//! ```
//! use dsh_tool_bash::{Preset, SandboxMode};
//! let preset: Preset = "read-only".parse()?;
//! assert_eq!(preset.sandbox_mode(), SandboxMode::ReadOnly);
//! # Ok::<(), dsh_tool_bash::BashError>(())
//! ```
//!
//! To mount: build a [`BashConfig`] over the `dsh_tool_fs::Workspace`, make a [`BashTool`], set
//! its [`SandboxSettings`] from the preset, and call [`mount()`].
//!
//! It deliberately does NOT: keep shell state between calls, run commands in the background,
//! parse or filter command text (the kernel decides what a command may do), restrict reads, or
//! contain a `danger-full-access` command in any way (it may leave the process group, so the
//! group kill cannot reach what it detached).
//!
//! Spec rules owned here: the sandbox policy of the pre-execute stage (P1's "sandbox policy"
//! listener), escalation through approval (P2), cancellation of a running body (C1: the body
//! honours its signal by killing its process group), and the `bash` tool's D3 output contract.
//!
//! Everything public is re-exported at the root, but for the helper side, which keeps its
//! namespace: [`sandbox`] (what `dsh __sandbox-exec` and `dsh-sandbox-exec` run).

// `sandbox` is the namespace of the helper side (what `dsh __sandbox-exec` and the
// `dsh-sandbox-exec` program run); every other module is private and its public items are
// re-exported below, chosen one by one.
mod capture;
mod config;
mod error;
mod helper;
mod mode;
mod mount;
mod policy;
mod preset;
mod render;
#[cfg(test)]
mod render_tests;
mod runner;
pub mod sandbox;
mod subject;
mod supervisor;
mod tool;

pub use config::{
    BashConfig, DEFAULT_KILL_GRACE, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_PROCESSES,
    DEFAULT_MAX_SPOOL_BYTES, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS,
};
pub use error::BashError;
pub use helper::{DSH_SUBCOMMAND, HELPER_PROGRAM, Probe, SandboxHelper};
pub use mode::SandboxMode;
pub use mount::{BashMount, mount};
pub use policy::{CallSandbox, SandboxPolicy, SandboxSettings, Unavailable};
pub use preset::{PERMISSION_PRESET, Preset, RecordedPreset, SANDBOX_MODE, announce_preset};
pub use render::ESCALATION_HINT;
pub use tool::{
    BASH_TIMEOUT, BASH_WORKDIR, BashInput, BashTool, BashValue, NAME, SANDBOX_UNAVAILABLE,
};
