//! One file per topic; `support` spawns the binary and reads logs back.

mod adversarial_input;
mod adversarial_kill;
mod adversarial_log;
mod adversarial_pipeline;
mod adversarial_terminal;
mod approval;
mod bash_tool;
mod cancel;
mod claude_permissions;
mod code_mode;
mod crash;
mod demo;
mod exit_codes;
mod flags;
mod help;
mod large_read;
mod logs;
mod props;
mod script;
mod sessions;
mod support;
mod terminal;
mod tools_cmd;
