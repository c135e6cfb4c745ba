//! Project chores: `cargo xtask test` installs what the tests drive and runs them; `cargo xtask
//! ci` runs what CI runs; `cargo xtask check-rules` checks that
//! docs/rules.md describes every cited rule id; `cargo xtask bench` runs the benchmarks and
//! rewrites BENCHMARKS.md.

mod bench;
mod check_rules;
mod components;
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

/// Runs `.ci/run`, the one list of what CI checks (kept in one place: this command used to
/// repeat it and drifted).
fn ci() -> Result<()> {
    let script = root().join(".ci").join("run");
    run(&script.to_string_lossy(), &[])
}

/// The workspace root (the parent of this crate's manifest directory).
fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

const USAGE: &str = "usage: cargo xtask <test | ci | check-rules [--write] | bench [--report-only]>

  test [ARGS]          install what the tests drive (PyPI, npm and Debian packages) when missing,
                       then cargo test --workspace [ARGS]
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
        Some("test") => components::test(&root(), &args[1..]),
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
