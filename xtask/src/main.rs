//! Project chores: `cargo xtask ci` runs what CI runs; `cargo xtask check-rules` checks that
//! docs/rules.md describes every cited rule id; `cargo xtask bench` runs the benchmarks and
//! rewrites BENCHMARKS.md.

mod bench;
mod check_rules;
mod fuzz;
mod kill_trials;
mod machine;
mod package_check;
mod public_api;
mod report;
mod results;
mod rule_ids;

use std::path::PathBuf;
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
    check_rules::cli(&root(), &[])?;
    public_api::cli(&root(), &["--check".to_owned()])?;
    // Every public item documented, no broken intra-doc links.
    let status = Command::new("cargo")
        .args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings")
        .status()
        .context("could not start cargo doc")?;
    if !status.success() {
        bail!("`RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace --no-deps` failed");
    }
    package_check::cli(&root())?;
    // Teams pick single crates: each builds on its own, and the facade with no default
    // features and with each feature alone.
    for krate in [
        "dsh-core",
        "dsh-session",
        "dsh-guard",
        "dsh-model",
        "dsh-scheduler",
        "dsh-tool-fs",
        "dsh-code-mode",
        "dsh-hooks",
        "dsh-tool-bash",
    ] {
        run("cargo", &["build", "-p", krate])?;
    }
    run("cargo", &["build", "-p", "dsh", "--no-default-features"])?;
    for feature in ["fs", "jsonl", "code-mode", "hooks", "bash", "cli"] {
        run(
            "cargo",
            &[
                "build",
                "-p",
                "dsh",
                "--no-default-features",
                "--features",
                feature,
            ],
        )?;
    }
    run("cargo", &["test", "--workspace"])
}

/// The workspace root (the parent of this crate's manifest directory).
fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

const USAGE: &str = "usage: cargo xtask <ci | check-rules [--write] | bench [--report-only]>

  ci                   fmt check, clippy -D warnings, check-rules, public-api --check, cargo doc
                       -D warnings, package-check, the feature builds, cargo test --workspace
  check-rules          every id a comment or test name cites is described in docs/rules.md
  check-rules --write  refresh docs/rules.md's lists of where each id is held, then check
  public-api           write api/<crate>.txt, each library crate's public API
  public-api --check   fail when a committed api/<crate>.txt differs from the source
  package-check        `cargo package` every crate in dependency order (nothing uploaded)
  bench                build and run every benchmark, then rewrite BENCHMARKS.md
  bench --report-only  rewrite BENCHMARKS.md from the results of the last run
  bench --rows 12-15   run only the bench targets of these rows (e.g. 12-15 or 1,4,12-15)
                       and update just their lines of BENCHMARKS.md";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("check-rules") => check_rules::cli(&root(), &args[1..]),
        Some("public-api") => public_api::cli(&root(), &args[1..]),
        Some("package-check") => package_check::cli(&root()),
        Some("fuzz") => fuzz::fuzz(&args[1..]),
        Some("kill-trials") => kill_trials::cli(&args[1..]).map_err(anyhow::Error::msg),
        Some("bench") => match args.get(1).map(String::as_str) {
            None => bench::run_all(&root()),
            Some("--report-only") => bench::report_only(&root()),
            Some("--rows") => match args.get(2) {
                Some(spec) => bench::run_rows(&root(), spec),
                None => bail!("--rows needs row numbers, e.g. --rows 12-15\n{USAGE}"),
            },
            Some(other) => bail!("unknown option `{other}`\n{USAGE}"),
        },
        Some(other) => bail!("unknown task `{other}`\n{USAGE}"),
        None => bail!("{USAGE}"),
    }
}
