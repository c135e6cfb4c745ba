//! The `dsh` command-line program; see `dsh --help`.

#[path = "cli/mod.rs"]
mod cli;

fn main() {
    std::process::exit(cli::main());
}
