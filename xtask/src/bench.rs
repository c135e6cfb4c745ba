//! `cargo xtask bench`: builds the bench targets once, runs each (criterion writes its
//! estimates under `target/dsh-bench/criterion`; the others print `DSH-BENCH` lines, kept in
//! `target/dsh-bench/<target>.out`), then rewrites BENCHMARKS.md from what this run measured.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::machine::{CpuTimes, Machine};
use crate::report::{self, Run, TargetRun};
use crate::results::{self, Results};

/// The bench targets of the root package, in the order they run.
const TARGETS: &[&str] = &[
    "pipeline",
    "registry",
    "append",
    "session",
    "durable",
    "session_memory",
    "code_mode",
    "cli_run",
    "bash",
    "agent_loop",
    "mcp_gateway",
    "step_timing",
    "store",
];

/// Where a target's absence is explained, when its source file does not exist yet.
fn absent_reason(name: &str) -> String {
    match name {
        "code_mode" => "blocked: Code Mode not landed".to_owned(),
        other => format!("bench target `{other}` does not exist"),
    }
}

/// The share of the processors' time the host took since `earlier` was read.
fn steal_since(earlier: Option<CpuTimes>) -> Option<f64> {
    CpuTimes::now()?.stolen_since(&earlier?)
}

fn out_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("dsh-bench")
}

/// Runs `cargo bench` for one target, echoing its output and keeping its standard output.
fn run_target(root: &Path, dir: &Path, name: &str) -> Result<(bool, String)> {
    eprintln!("$ cargo bench -p dsh --bench {name}");
    let mut child = Command::new("cargo")
        .args(["bench", "-p", "dsh", "--bench", name])
        .current_dir(root)
        .env("CRITERION_HOME", dir.join("criterion"))
        .stdout(Stdio::piped())
        .spawn()
        .context("could not start cargo bench")?;
    let mut kept = String::new();
    if let Some(stdout) = child.stdout.take() {
        let mut echo = std::io::stderr();
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            let _ = writeln!(echo, "{line}");
            kept.push_str(&line);
            kept.push('\n');
        }
    }
    let status = child.wait()?;
    std::fs::write(dir.join(format!("{name}.out")), &kept)?;
    Ok((status.success(), kept))
}

/// Builds and runs every benchmark, then rewrites BENCHMARKS.md.
pub fn run_all(root: &Path) -> Result<()> {
    let start = Instant::now();
    // The benches drive the same components the tests do (the Python MCP SDK, npm's MCP
    // servers, PostgreSQL): a fresh machine gets them first, not a failed target.
    crate::components::install(root)?;
    let dir = out_dir(root);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clear {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir)?;
    let machine = Machine::current(root);

    let present: Vec<&str> = TARGETS
        .iter()
        .copied()
        .filter(|t| root.join("benches").join(format!("{t}.rs")).exists())
        .collect();
    // Only the bench targets: `--benches` would also build the library and binary in bench mode.
    let mut build = vec!["bench", "-p", "dsh", "--no-run"];
    for t in &present {
        build.extend(["--bench", t]);
    }
    eprintln!("$ cargo {}", build.join(" "));
    let built = Command::new("cargo")
        .args(&build)
        .current_dir(root)
        .status()
        .context("could not start cargo bench")?
        .success();

    let mut targets = Vec::new();
    for name in TARGETS {
        let t0 = Instant::now();
        let cpu0 = CpuTimes::now();
        let failure = if !present.contains(name) {
            Some(absent_reason(name))
        } else if !built {
            Some("failed to build (see `cargo bench -p dsh --no-run`)".to_owned())
        } else {
            match run_target(root, &dir, name) {
                Ok((true, _)) => None,
                Ok((false, _)) => Some(format!(
                    "failed to run (output in target/dsh-bench/{name}.out)"
                )),
                Err(e) => Some(format!("failed to run: {e}")),
            }
        };
        targets.push(TargetRun {
            name: (*name).to_owned(),
            failure,
            seconds: t0.elapsed().as_secs_f64(),
            steal: steal_since(cpu0),
        });
    }
    let total_seconds = start.elapsed().as_secs_f64();
    let run = serde_json::json!({
        "machine": machine,
        "targets": targets,
        "total_seconds": total_seconds,
    });
    std::fs::write(dir.join("run.json"), serde_json::to_string_pretty(&run)?)?;
    write_report(root, &dir)?;
    let failed: Vec<&TargetRun> = targets
        .iter()
        .filter(|t| t.failure.is_some() && present.contains(&t.name.as_str()))
        .collect();
    if !failed.is_empty() {
        let names: Vec<&str> = failed.iter().map(|t| t.name.as_str()).collect();
        bail!("bench targets failed: {}", names.join(", "));
    }
    Ok(())
}

/// Builds and runs only the bench targets that measure `rows` (numbers as in the table), then
/// replaces just those rows' lines in BENCHMARKS.md; the other rows, the machine line of the
/// last full run and the notes stay as they are. Earlier results of other targets are kept.
pub fn run_rows(root: &Path, spec: &str) -> Result<()> {
    let start = Instant::now();
    let rows = report::parse_rows(spec).map_err(anyhow::Error::msg)?;
    crate::components::install(root)?;
    let mut names: Vec<&str> = Vec::new();
    for &n in &rows {
        let bench = report::ROWS[n - 1].bench;
        if !names.contains(&bench) {
            names.push(bench);
        }
    }
    let dir = out_dir(root);
    std::fs::create_dir_all(&dir)?;
    let machine = Machine::current(root);
    let mut build = vec!["bench", "-p", "dsh", "--no-run"];
    for t in &names {
        build.extend(["--bench", t]);
    }
    eprintln!("$ cargo {}", build.join(" "));
    let built = Command::new("cargo")
        .args(&build)
        .current_dir(root)
        .status()
        .context("could not start cargo bench")?
        .success();
    let mut targets = Vec::new();
    for name in &names {
        let t0 = Instant::now();
        let cpu0 = CpuTimes::now();
        let failure = if !built {
            Some("failed to build (see `cargo bench -p dsh --no-run`)".to_owned())
        } else {
            match run_target(root, &dir, name) {
                Ok((true, _)) => None,
                Ok((false, _)) => Some(format!(
                    "failed to run (output in target/dsh-bench/{name}.out)"
                )),
                Err(e) => Some(format!("failed to run: {e}")),
            }
        };
        targets.push(TargetRun {
            name: (*name).to_owned(),
            failure,
            seconds: t0.elapsed().as_secs_f64(),
            steal: steal_since(cpu0),
        });
    }
    let mut results = Results {
        criterion: results::read_criterion(&dir.join("criterion"))?,
        records: Vec::new(),
    };
    for t in &targets {
        if let Ok(out) = std::fs::read_to_string(dir.join(format!("{}.out", t.name))) {
            results.records.extend(results::records_of(&out));
        }
    }
    let run = Run {
        machine: &machine,
        targets: &targets,
        results: &results,
        total_seconds: start.elapsed().as_secs_f64(),
    };
    let path = root.join("BENCHMARKS.md");
    let existing = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "read {} (run `cargo xtask bench` once first)",
            path.display()
        )
    })?;
    std::fs::write(&path, report::update_rows(&existing, &rows, &run))
        .with_context(|| format!("write {}", path.display()))?;
    eprintln!(
        "updated rows {spec} of {} ({:.1} min; commit {}, {})",
        path.display(),
        run.total_seconds / 60.0,
        machine.commit,
        machine.date
    );
    let failed: Vec<&str> = targets
        .iter()
        .filter(|t| t.failure.is_some())
        .map(|t| t.name.as_str())
        .collect();
    if !failed.is_empty() {
        bail!("bench targets failed: {}", failed.join(", "));
    }
    Ok(())
}

/// Rewrites BENCHMARKS.md from the last run's results.
pub fn report_only(root: &Path) -> Result<()> {
    write_report(root, &out_dir(root))
}

fn write_report(root: &Path, dir: &Path) -> Result<()> {
    let run_path = dir.join("run.json");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&run_path).with_context(|| {
            format!(
                "read {} (run `cargo xtask bench` first)",
                run_path.display()
            )
        })?)?;
    let machine: Machine = serde_json::from_value(run["machine"].clone())?;
    let targets: Vec<TargetRun> = serde_json::from_value(run["targets"].clone())?;
    let total_seconds = run["total_seconds"].as_f64().unwrap_or(0.0);
    let mut results = Results {
        criterion: results::read_criterion(&dir.join("criterion"))?,
        records: Vec::new(),
    };
    for t in &targets {
        if let Ok(out) = std::fs::read_to_string(dir.join(format!("{}.out", t.name))) {
            results.records.extend(results::records_of(&out));
        }
    }
    let report = report::render(&Run {
        machine: &machine,
        targets: &targets,
        results: &results,
        total_seconds,
    });
    let path = root.join("BENCHMARKS.md");
    let existing = std::fs::read_to_string(&path).unwrap_or_default();
    let notes = report::notes_of(&existing).unwrap_or(DEFAULT_NOTES);
    std::fs::write(&path, format!("{report}\n{notes}"))
        .with_context(|| format!("write {}", path.display()))?;
    eprintln!(
        "wrote {} ({:.1} min in all)",
        path.display(),
        total_seconds / 60.0
    );
    Ok(())
}

const DEFAULT_NOTES: &str = "## Notes\n\nWhat each profile showed, for rows that miss.\n";
