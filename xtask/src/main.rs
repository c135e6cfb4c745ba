//! Project chores: `cargo xtask ci` runs what CI runs; `cargo xtask bench` runs the benchmarks and
//! rewrites BENCHMARKS.md.

use std::process::Command;

use anyhow::{Context, Result, bail};

fn run(cmd: &str, args: &[&str]) -> Result<()> {
    eprintln!("$ {cmd} {}", args.join(" "));
    let status = Command::new(cmd)
        .args(args)
        .status()
        .with_context(|| format!("could not start {cmd}"))?;
    if !status.success() {
        bail!("`{cmd} {}` failed with {status}", args.join(" "));
    }
    Ok(())
}

fn ci() -> Result<()> {
    run("cargo", &["fmt", "--all", "--check"])?;
    run(
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    run("cargo", &["build", "-p", "dsh", "--no-default-features"])?;
    run(
        "cargo",
        &[
            "build",
            "-p",
            "dsh",
            "--no-default-features",
            "--features",
            "fs",
        ],
    )?;
    run(
        "cargo",
        &[
            "build",
            "-p",
            "dsh",
            "--no-default-features",
            "--features",
            "jsonl",
        ],
    )?;
    run("cargo", &["test", "--workspace"])
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some(other) => bail!("unknown task `{other}`; known: ci"),
        None => bail!("usage: cargo xtask <ci>"),
    }
}
