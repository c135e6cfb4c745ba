//! Reading a run's figures: criterion's estimates (`<id>/new/benchmark.json` and
//! `estimates.json` under `CRITERION_HOME`) and the `DSH-BENCH {json}` lines that the
//! non-criterion benchmarks print.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;

/// One criterion benchmark: the median time of one iteration and its spread.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Median of the samples' mean iteration time, in nanoseconds.
    pub median_ns: f64,
    /// Median absolute deviation over the median (0.05 is 5 %).
    pub spread: f64,
}

/// Every figure of a run.
#[derive(Debug, Default, Clone)]
pub struct Results {
    /// Criterion estimates by full id (`group/function`).
    pub criterion: BTreeMap<String, Estimate>,
    /// `DSH-BENCH` records, in the order printed.
    pub records: Vec<Value>,
}

impl Results {
    /// The estimate of `id`, if that benchmark ran.
    pub fn get(&self, id: &str) -> Option<Estimate> {
        self.criterion.get(id).copied()
    }

    /// The first record of `bench` whose `key` equals `value`.
    pub fn record(&self, bench: &str, key: &str, value: &Value) -> Option<&Value> {
        self.records.iter().find(|r| {
            r.get("bench").and_then(Value::as_str) == Some(bench) && r.get(key) == Some(value)
        })
    }
}

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))
}

fn point(estimates: &Value, which: &str) -> Option<f64> {
    estimates.get(which)?.get("point_estimate")?.as_f64()
}

/// Walks `dir` for criterion's `new/benchmark.json` files.
fn walk(dir: &Path, out: &mut BTreeMap<String, Estimate>) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries {
        let path = entry?.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|n| n == "new") {
            let meta = path.join("benchmark.json");
            let est = path.join("estimates.json");
            if meta.exists() && est.exists() {
                let meta = read_json(&meta)?;
                let est = read_json(&est)?;
                let id = meta.get("full_id").and_then(Value::as_str);
                if let (Some(id), Some(median), Some(mad)) =
                    (id, point(&est, "median"), point(&est, "median_abs_dev"))
                {
                    let spread = if median > 0.0 { mad / median } else { 0.0 };
                    out.insert(
                        id.to_owned(),
                        Estimate {
                            median_ns: median,
                            spread,
                        },
                    );
                }
            }
        } else {
            walk(&path, out)?;
        }
    }
    Ok(())
}

/// Reads criterion's estimates under `criterion_home`.
pub fn read_criterion(criterion_home: &Path) -> Result<BTreeMap<String, Estimate>> {
    let mut out = BTreeMap::new();
    walk(criterion_home, &mut out)?;
    Ok(out)
}

/// The `DSH-BENCH {json}` records of a benchmark's standard output.
pub fn records_of(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("DSH-BENCH "))
        .filter_map(|j| serde_json::from_str(j).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_read_from_marked_lines_only() {
        let out = "noise\nDSH-BENCH {\"bench\":\"m\",\"events\":3}\nDSH-BENCH not json\n";
        let records = records_of(out);
        assert_eq!(
            records,
            vec![serde_json::json!({"bench": "m", "events": 3})]
        );
    }

    #[test]
    fn criterion_estimates_are_found_by_full_id() {
        let dir = std::env::temp_dir().join(format!("xtask-results-{}", std::process::id()));
        let new = dir.join("pipeline").join("full").join("new");
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(
            new.join("benchmark.json"),
            r#"{"group_id":"pipeline","function_id":"full","full_id":"pipeline/full"}"#,
        )
        .unwrap();
        std::fs::write(
            new.join("estimates.json"),
            r#"{"median":{"point_estimate":2000.0},"median_abs_dev":{"point_estimate":100.0}}"#,
        )
        .unwrap();
        let found = read_criterion(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            found.get("pipeline/full"),
            Some(&Estimate {
                median_ns: 2000.0,
                spread: 0.05
            })
        );
    }
}
