//! What the benchmarks ran on: processor count, CPU model, commit and date, read from the
//! system (never assumed).

use std::path::Path;
use std::process::Command;

/// The machine and checkout a run was measured on.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    /// `nproc`.
    pub nproc: String,
    /// The `model name` line of /proc/cpuinfo.
    pub cpu: String,
    /// `git rev-parse --short HEAD` (with `+dirty` when the tree has changes).
    pub commit: String,
    /// UTC date and time of the run.
    pub date: String,
}

fn output(cmd: &str, args: &[&str], dir: &Path) -> Option<String> {
    let out = Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

impl Machine {
    /// Reads the machine now.
    pub fn current(root: &Path) -> Machine {
        let nproc = output("nproc", &[], root).unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "unknown".into())
        });
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".into());
        let mut commit = output("git", &["rev-parse", "--short", "HEAD"], root).unwrap_or_default();
        if output(
            "git",
            &["status", "--porcelain", "--untracked-files=no"],
            root,
        )
        .is_some_and(|s| !s.is_empty())
        {
            commit.push_str("+dirty");
        }
        let date = output("date", &["-u", "+%Y-%m-%d %H:%M UTC"], root).unwrap_or_default();
        Machine {
            nproc,
            cpu,
            commit,
            date,
        }
    }
}
