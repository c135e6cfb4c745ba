//! `dsh-sandbox-exec`: the sandbox helper as a stand-alone program (the `dsh` binary offers the
//! same as its hidden `__sandbox-exec` subcommand). Used by this crate's tests.

fn main() {
    dsh_tool_bash::sandbox::exec_sandboxed(std::env::args_os().skip(1))
}
