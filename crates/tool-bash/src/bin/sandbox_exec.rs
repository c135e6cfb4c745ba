//! `dsh-tool-bash-helper`: the sandbox helper as a stand-alone program of this crate, for its
//! tests and for hosts that embed the library (the `dsh` package installs the same code as
//! `dsh-sandbox-exec`, and offers it as the `dsh` binary's hidden `__sandbox-exec` subcommand).

fn main() {
    dsh_tool_bash::sandbox::exec_sandboxed(std::env::args_os().skip(1))
}
