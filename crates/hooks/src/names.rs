//! The Claude Code names of our tools, shared with the permission rules (see `dsh_core::names`).

pub use dsh_core::names::{CLAUDE_NAMES, claude_name, hook_tool_name};
