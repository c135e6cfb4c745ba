//! `cargo xtask fuzz`: builds the cargo-fuzz targets of `fuzz/` once, runs each for a fixed
//! time (corpus in `fuzz/corpus/<target>`, seeds from `fuzz/seeds/<target>`), and reports runs,
//! coverage and crashes. Fails if any target crashed.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// What `cargo xtask fuzz` was asked to do.
struct Options {
    seconds: u64,
    targets: Vec<String>,
    sanitizer: String,
    jobs: u64,
}

fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        seconds: 60,
        targets: Vec::new(),
        sanitizer: "none".to_owned(),
        jobs: 1,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .with_context(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--seconds" => o.seconds = value("--seconds")?.parse().context("--seconds")?,
            "--target" => o.targets.push(value("--target")?),
            "--sanitizer" => o.sanitizer = value("--sanitizer")?,
            "--jobs" => o.jobs = value("--jobs")?.parse().context("--jobs")?,
            "-h" | "--help" => {
                println!(
                    "usage: cargo xtask fuzz [--seconds N (60)] [--target NAME]... [--sanitizer none|address (none)] [--jobs N (1)]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown option `{other}` (see --help)"),
        }
    }
    Ok(o)
}

fn cargo_fuzz(args: &[&str]) -> Command {
    let mut c = Command::new("cargo");
    c.arg("+nightly").arg("fuzz").args(args);
    c
}

/// The last libFuzzer status line's `cov:` and `corp:` fields, and the `Done N runs` count.
fn figures(log: &str) -> (String, String, String) {
    let mut cov = String::from("?");
    let mut corp = String::from("?");
    let mut runs = String::from("?");
    for line in log.lines() {
        let mut words = line.split_whitespace();
        while let Some(w) = words.next() {
            match w {
                "cov:" => cov = words.next().unwrap_or("?").to_owned(),
                "corp:" => corp = words.next().unwrap_or("?").to_owned(),
                "Done" => runs = words.next().unwrap_or("?").to_owned(),
                _ => {}
            }
        }
    }
    (runs, cov, corp)
}

/// Runs every fuzz target for the given time and reports.
pub fn fuzz(args: &[String]) -> Result<()> {
    let o = parse(args)?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask has no parent folder")?
        .to_path_buf();
    std::env::set_current_dir(&root)?;
    let ok = cargo_fuzz(&["--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        bail!(
            "cargo-fuzz with a nightly toolchain is needed: `rustup toolchain install nightly` and `cargo install cargo-fuzz`"
        );
    }
    let san = ["-s", o.sanitizer.as_str(), "--debug-assertions"];
    let targets = if o.targets.is_empty() {
        let out = cargo_fuzz(&["list"]).output().context("cargo fuzz list")?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    } else {
        o.targets.clone()
    };
    eprintln!("$ cargo +nightly fuzz build {}", san.join(" "));
    let status = cargo_fuzz(&["build"]).args(san).status()?;
    if !status.success() {
        bail!("building the fuzz targets failed");
    }
    let mut rows = Vec::new();
    let mut crashed = Vec::new();
    for t in &targets {
        let corpus = format!("fuzz/corpus/{t}");
        let seeds = format!("fuzz/seeds/{t}");
        std::fs::create_dir_all(&corpus)?;
        let mut fuzzer_args = vec![
            format!("-max_total_time={}", o.seconds),
            "-timeout=10".to_owned(),
            "-rss_limit_mb=2048".to_owned(),
        ];
        if o.jobs > 1 {
            fuzzer_args.push(format!("-fork={}", o.jobs));
        }
        eprintln!("== {t}: {} s", o.seconds);
        let mut cmd = cargo_fuzz(&["run"]);
        cmd.args(san).arg(t).arg(&corpus);
        if Path::new(&seeds).is_dir() {
            cmd.arg(&seeds);
        }
        let out = cmd
            .arg("--")
            .args(&fuzzer_args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .with_context(|| format!("running target {t}"))?;
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::create_dir_all("fuzz/artifacts")?;
        std::fs::write(format!("fuzz/artifacts/{t}.log"), &log)?;
        let (runs, cov, corp) = figures(&log);
        let result = if out.status.success() {
            "ok".to_owned()
        } else {
            let artifact = log
                .lines()
                .find_map(|l| l.split("Test unit written to ").nth(1))
                .unwrap_or("(no artifact; see the log)")
                .to_owned();
            crashed.push(t.clone());
            format!("CRASH {artifact}")
        };
        eprintln!("   {runs} runs, cov {cov}, corpus {corp}: {result}");
        rows.push(format!(
            "| {t} | {} | {runs} | {cov} | {corp} | {result} |",
            o.seconds
        ));
    }
    println!("| target | seconds | runs | coverage | corpus | result |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for r in &rows {
        println!("{r}");
    }
    println!("(logs in fuzz/artifacts/<target>.log)");
    if !crashed.is_empty() {
        bail!(
            "{} target(s) crashed: {}",
            crashed.len(),
            crashed.join(", ")
        );
    }
    Ok(())
}
