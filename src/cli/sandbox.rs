//! `dsh __sandbox-exec` (hidden): the sandbox helper of the `bash` tool. It contains itself
//! (Landlock, seccomp, `no_new_privs`, capabilities dropped) and then `exec`s the command; it
//! never returns. Run before any async runtime exists, so nothing else shares the process.

use std::ffi::OsString;

use clap::Args;

/// The helper's own arguments, passed through untouched (`--mode M --root R... -- bash -c CMD`).
#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
pub struct SandboxExecArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<OsString>,
}

/// Contains this process and runs the command.
pub fn exec(args: SandboxExecArgs) -> ! {
    dsh::bash::sandbox::exec_sandboxed(args.args)
}
