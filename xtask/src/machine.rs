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

/// The processors' time so far, from the `cpu` line of /proc/stat (in clock ticks): all of it,
/// and the part the host gave to others while this machine wanted to run (`steal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    steal: u64,
    total: u64,
}

impl CpuTimes {
    /// Reads /proc/stat now; `None` where it is absent or unreadable.
    pub fn now() -> Option<CpuTimes> {
        parse_stat(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The fraction of the processors' time stolen by the host between `earlier` and `self`.
    pub fn stolen_since(&self, earlier: &CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total)?;
        let steal = self.steal.checked_sub(earlier.steal)?;
        (total > 0).then(|| steal as f64 / total as f64)
    }
}

/// The `cpu` line of /proc/stat: `user nice system idle iowait irq softirq steal guest
/// guest_nice` (guest time is already counted in user time, so it is left out of the total).
fn parse_stat(stat: &str) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    let steal = *fields.get(7)?;
    let total = fields.iter().take(8).sum();
    Some(CpuTimes { steal, total })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_read_from_the_cpu_line_and_compared_between_readings() {
        let before =
            parse_stat("cpu  100 0 10 500 5 0 5 20 0 0\ncpu0 50 0 5 250 2 0 2 10 0 0\n").unwrap();
        assert_eq!(
            before,
            CpuTimes {
                steal: 20,
                total: 640
            }
        );
        let after = parse_stat("cpu  160 0 20 520 5 0 5 50 7 0\n").unwrap();
        // 120 ticks passed, 30 of them stolen (the guest column is not counted twice).
        assert_eq!(after.stolen_since(&before), Some(0.25));
        assert_eq!(before.stolen_since(&after), None);
        assert_eq!(before.stolen_since(&before), None);
        assert_eq!(parse_stat("intr 1 2 3\n"), None);
        assert_eq!(parse_stat("cpu  1 2 x\n"), None);
    }
}
