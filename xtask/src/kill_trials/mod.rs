//! Kill trials: `dsh run --json` on a long scripted session, killed with SIGKILL at a random
//! instant, then checked: (a) `dsh repair` + `dsh check` leave a clean log, in which every call
//! of every assistant message has exactly one result, and whose exports (OpenAI and Anthropic)
//! the providers' APIs would accept as request history, (b) every event that
//! `--json` printed before the kill is in the log with the same seq and content, (c) every file
//! the script writes holds one whole state the script could have produced (or its original), and
//! that state agrees with the log.
//!
//! Shared by `cargo xtask kill-trials` and the root test suite (which includes this file by
//! path), so it uses only std, `serde_json`, `dsh_session` and `dsh_test_support`.
//!
//! `run` builds the scripted session and runs `dsh` on it; `check` judges what a killed run
//! left behind.

pub mod check;
pub mod run;

pub use check::{RunStats, check_run_at};
pub use run::{StoreSession, build_session, prepare_dir, run_session_at};
// The file-only forms, for the root test suite (which includes this module by path).
#[allow(unused_imports, reason = "the root test suite's kill trials use them")]
pub use check::check_run;
#[allow(unused_imports, reason = "the root test suite's kill trials use them")]
pub use run::run_session;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How a series of trials runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The `dsh` binary.
    pub dsh: PathBuf,
    /// How many killed runs.
    pub runs: usize,
    /// How many steps the scripted session has (each step is one assistant message).
    pub steps: usize,
    /// The seed of the kill instants (the script itself does not depend on it).
    pub seed: u64,
    /// Where run directories go (a failing run's directory is kept for inspection).
    pub base: PathBuf,
    /// Keep each run's session in this PostgreSQL store (`--store URL`, id `kt-<seed>-<run>`)
    /// instead of a file; the checks read its repaired export.
    pub store: Option<String>,
}

impl Config {
    fn target(&self, run: &str) -> Option<StoreSession> {
        self.store.as_ref().map(|url| StoreSession {
            url: url.clone(),
            id: format!("kt-{}-{run}", self.seed),
        })
    }
}

/// One failed run.
#[derive(Clone, Debug)]
pub struct RunFailure {
    /// The run's number (0-based).
    pub run: usize,
    /// How long after the start the kill was sent.
    pub delay: Duration,
    /// The run's directory (kept).
    pub dir: PathBuf,
    /// Every check that failed.
    pub reasons: Vec<String>,
}

/// What a series of trials found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Runs done.
    pub runs: usize,
    /// Runs whose process was killed (the others finished before the kill instant).
    pub killed: usize,
    /// Runs killed before the log held its header (nothing printed, nothing to repair).
    pub before_log: usize,
    /// Runs whose log needed repair (a torn line or calls, step or turn left open).
    pub repaired: usize,
    /// Calls closed by repair with an `INTERRUPTED` result, over all runs.
    pub interrupted_calls: usize,
    /// Of those, calls the model made whose `tool/call` was never recorded (repair wrote it).
    pub never_recorded_calls: usize,
    /// Events printed by `--json` and found in the log, over all runs.
    pub events_checked: usize,
    /// Files compared with the script's states, over all runs.
    pub files_checked: usize,
    /// Stray temp files (`.<name>.*.dsh-tmp`) an atomic write left when killed mid-write.
    pub stray_temp_files: usize,
    /// How long an unkilled session takes (the kill instants are drawn up to this).
    pub session_time: Duration,
    /// Wall time of the whole series.
    pub wall_time: Duration,
    /// The failed runs.
    pub failures: Vec<RunFailure>,
}

impl Report {
    /// One-paragraph summary.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} runs, {} failures; {} killed mid-session ({} before the log had its header), {} finished first; {} logs repaired ({} calls closed as INTERRUPTED, {} of them never recorded before the kill); {} printed events and {} files checked; {} stray temp files; session {:.0} ms unkilled; wall {:.1} s",
            self.runs,
            self.failures.len(),
            self.killed,
            self.before_log,
            self.runs - self.killed,
            self.repaired,
            self.interrupted_calls,
            self.never_recorded_calls,
            self.events_checked,
            self.files_checked,
            self.stray_temp_files,
            self.session_time.as_secs_f64() * 1e3,
            self.wall_time.as_secs_f64(),
        );
        for f in self.failures.iter().take(20) {
            let _ = write!(
                s,
                "\n  run {} (kill at {} ms, kept in {}):",
                f.run,
                f.delay.as_millis(),
                f.dir.display()
            );
            for r in &f.reasons {
                let _ = write!(s, "\n    - {r}");
            }
        }
        s
    }
}

/// A small deterministic generator (splitmix64).
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// A seed from the clock.
pub fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Runs the session once unkilled (it must finish clean), then `cfg.runs` killed runs; calls
/// `progress` after each run.
pub fn run_trials(cfg: &Config, mut progress: impl FnMut(&Report)) -> Result<Report, String> {
    let started = Instant::now();
    let session = build_session(cfg.steps);
    std::fs::create_dir_all(&cfg.base).map_err(|e| format!("{}: {e}", cfg.base.display()))?;
    let mut report = Report::default();
    // The calibration run: it must pass every check, and it measures the session.
    let dir = cfg.base.join("calibration");
    let _ = std::fs::remove_dir_all(&dir);
    prepare_dir(&dir, &session)?;
    let t = Instant::now();
    let target = cfg.target("calibration");
    let outcome = run_session_at(&cfg.dsh, &dir, None, target.as_ref())?;
    report.session_time = t.elapsed();
    let mut stats = RunStats::default();
    let reasons = check_run_at(
        &cfg.dsh,
        &dir,
        &session,
        &outcome,
        &mut stats,
        target.as_ref(),
    );
    if !reasons.is_empty() {
        return Err(format!(
            "the unkilled session does not pass its own checks (kept in {}):\n  {}",
            dir.display(),
            reasons.join("\n  ")
        ));
    }
    let has_failure = String::from_utf8_lossy(&outcome.stdout).contains("\"isError\":true");
    if has_failure {
        return Err(format!(
            "the unkilled session has a failed call (kept in {})",
            dir.display()
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut rng = Rng::new(cfg.seed);
    let span = (report.session_time.as_micros() as u64).max(1);
    for run in 0..cfg.runs {
        let dir = cfg.base.join(format!("run-{run}"));
        let _ = std::fs::remove_dir_all(&dir);
        prepare_dir(&dir, &session)?;
        // Up to 5% past the measured time, so some runs finish before the kill.
        let delay = Duration::from_micros(rng.below(span + span / 20));
        let target = cfg.target(&run.to_string());
        let outcome = run_session_at(&cfg.dsh, &dir, Some(delay), target.as_ref())?;
        let mut stats = RunStats::default();
        let reasons = check_run_at(
            &cfg.dsh,
            &dir,
            &session,
            &outcome,
            &mut stats,
            target.as_ref(),
        );
        report.runs += 1;
        report.killed += usize::from(outcome.killed);
        report.before_log += usize::from(stats.before_log);
        report.repaired += usize::from(stats.repaired);
        report.interrupted_calls += stats.interrupted;
        report.never_recorded_calls += stats.never_recorded;
        report.events_checked += stats.events;
        report.files_checked += stats.files;
        report.stray_temp_files += stats.stray;
        if reasons.is_empty() {
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            report.failures.push(RunFailure {
                run,
                delay,
                dir,
                reasons,
            });
        }
        report.wall_time = started.elapsed();
        progress(&report);
    }
    report.wall_time = started.elapsed();
    Ok(report)
}

/// `cargo xtask kill-trials [--runs N] [--steps N] [--seed N] [--release] [--store [URL]]`:
/// builds `dsh` once, runs the trials and prints the report; an error if any run failed. With
/// `--store`, each session is kept in PostgreSQL: at URL, or (no URL) in a throwaway cluster
/// started for the series (`dsh_test_support::postgres`).
pub fn cli(args: &[String]) -> Result<(), String> {
    let mut runs = 100usize;
    let mut steps = 40usize;
    let mut seed = clock_seed();
    let mut release = false;
    let mut store: Option<Option<String>> = None;
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        let mut number = |name: &str| -> Result<u64, String> {
            it.next()
                .ok_or(format!("{name} needs a value"))?
                .parse::<u64>()
                .map_err(|e| format!("{name}: {e}"))
        };
        match a.as_str() {
            "--runs" => runs = number("--runs")? as usize,
            "--steps" => steps = number("--steps")? as usize,
            "--seed" => seed = number("--seed")?,
            "--release" => release = true,
            "--store" => {
                let url = it.next_if(|v| !v.starts_with("--")).cloned();
                store = Some(url);
            }
            "-h" | "--help" => {
                println!(
                    "usage: cargo xtask kill-trials [--runs N (100)] [--steps N (40)] [--seed N] [--release] [--store [postgres://...] (a throwaway cluster when no URL)]"
                );
                return Ok(());
            }
            other => return Err(format!("unknown option `{other}` (see --help)")),
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("xtask has no parent folder")?
        .to_path_buf();
    let mut build = Command::new("cargo");
    build
        .current_dir(&root)
        .args(["build", "-p", "dsh", "--bin", "dsh"]);
    if release {
        build.arg("--release");
    }
    eprintln!(
        "$ cargo build -p dsh --bin dsh{}",
        if release { " --release" } else { "" }
    );
    let status = build.status().map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err("building dsh failed".to_owned());
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let dsh = target
        .join(if release { "release" } else { "debug" })
        .join("dsh");
    let base = std::env::temp_dir().join(format!("dsh-kill-trials-{}", std::process::id()));
    // A private copy: a rebuild of the workspace during the trials must not swap the binary.
    std::fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    let copy = base.join("dsh");
    std::fs::copy(&dsh, &copy).map_err(|e| format!("copy {}: {e}", dsh.display()))?;
    let cluster = match &store {
        Some(None) => Some(dsh_test_support::postgres::Cluster::start()),
        _ => None,
    };
    let store = match store {
        Some(Some(url)) => Some(url),
        Some(None) => cluster.as_ref().map(|c| c.url()),
        None => None,
    };
    let cfg = Config {
        dsh: copy,
        runs,
        steps,
        seed,
        base: base.clone(),
        store,
    };
    eprintln!(
        "kill trials: {runs} runs of a {steps}-step session, seed {seed}, in {}{}",
        base.display(),
        if cfg.store.is_some() {
            ", sessions in PostgreSQL"
        } else {
            ""
        }
    );
    let report = run_trials(&cfg, |r| {
        if r.runs % 50 == 0 || r.runs == runs {
            eprintln!(
                "  {} / {runs} runs, {} failures, {:.0} s",
                r.runs,
                r.failures.len(),
                r.wall_time.as_secs_f64()
            );
        }
    })?;
    println!("{}", report.summary());
    println!(
        "seed {seed}; reproduce with `cargo xtask kill-trials --runs {runs} --steps {steps} --seed {seed}`"
    );
    if report.failures.is_empty() {
        let _ = std::fs::remove_dir_all(&base);
        Ok(())
    } else {
        Err(format!(
            "{} of {} runs failed (their directories are kept under {})",
            report.failures.len(),
            report.runs,
            base.display()
        ))
    }
}
