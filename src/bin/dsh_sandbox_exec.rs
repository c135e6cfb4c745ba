//! `dsh-sandbox-exec`: the `bash` tool's sandbox helper as a program of its own, installed beside
//! `dsh`, which starts it when it is there (else it re-executes itself as `dsh __sandbox-exec`,
//! which runs the same code): once per session and mode as the supervisor that starts every
//! `bash` command (`--serve`; a contained command's child installs the seccomp filter before
//! its `exec`), and as a per-call helper when no supervisor could start. It contains itself
//! (Landlock, seccomp, `no_new_privs`, capabilities dropped) before it runs anything; it never
//! returns. It is kept apart from `dsh` only because it starts in about half the time: the
//! loader maps and relocates far less.

fn main() {
    dsh_tool_bash::sandbox::exec_sandboxed(std::env::args_os().skip(1))
}
