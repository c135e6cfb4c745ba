//! Durations as people write them on the command line and in `config.toml`: a number and a
//! unit (`1500ms`, `90s`, `5m`, `1h`; a bare number is seconds), for `--idle-timeout`.
//!
//! Guarantees: a value that is not a number with a known unit, is 0, or is longer than a
//! timer can wait (`dsh::core::MAX_TIMEOUT_MS`) is refused with a sentence saying which and
//! what a right value looks like; the caller names the option or key.

use std::time::Duration;

/// `text` as a duration: a non-negative number (decimals allowed) and an optional unit, `ms`,
/// `s` (the default), `m` or `h`.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let seconds_per_unit = match unit.trim() {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => f64::NAN,
    };
    let value: Option<f64> = number.parse().ok();
    match value {
        Some(v) if v.is_finite() && !seconds_per_unit.is_nan() => {
            Duration::try_from_secs_f64(v * seconds_per_unit).map_err(|_| too_long())
        }
        _ => Err(format!(
            "{text:?} is not a duration: write a number and a unit, such as 90s, 5m or 1500ms"
        )),
    }
}

fn too_long() -> String {
    format!(
        "it is longer than a timer can wait ({} ms, about 24 days)",
        dsh::core::MAX_TIMEOUT_MS
    )
}

/// `text` as a stream idle timeout: a duration more than 0 and at most
/// `dsh::core::MAX_TIMEOUT_MS` (what the watchdog accepts, TMO-38).
pub fn idle_timeout(text: &str) -> Result<Duration, String> {
    let timeout = parse(text)?;
    check_idle_timeout(timeout)
}

/// `timeout` if the stream idle watchdog takes it (TMO-38: more than 0, at most
/// `dsh::core::MAX_TIMEOUT_MS`).
pub fn check_idle_timeout(timeout: Duration) -> Result<Duration, String> {
    if timeout.is_zero() {
        return Err(
            "0 would fail every answer at once: give the time the model may send nothing, such as 90s or 10m"
                .to_owned(),
        );
    }
    if timeout.as_nanos().div_ceil(1_000_000) > u128::from(dsh::core::MAX_TIMEOUT_MS) {
        return Err(too_long());
    }
    Ok(timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmo_38_units_bounds_and_refusals() {
        let ok = |t: &str| idle_timeout(t).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert_eq!(ok("90s"), Duration::from_secs(90));
        assert_eq!(ok("90"), Duration::from_secs(90));
        assert_eq!(ok("5m"), Duration::from_secs(300));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("1500ms"), Duration::from_millis(1500));
        assert_eq!(ok(" 2 s "), Duration::from_secs(2));
        for zero in ["0", "0s", "0.0m", "0ms"] {
            let e = idle_timeout(zero).expect_err(zero);
            assert!(e.starts_with("0 would fail"), "{zero}: {e}");
        }
        for bad in ["", "s", "ten", "5 minutes", "-1s", "1e3", "1..2s", "NaN"] {
            let e = idle_timeout(bad).expect_err(bad);
            assert!(e.contains("is not a duration"), "{bad}: {e}");
        }
        assert!(idle_timeout("2147483647ms").is_ok());
        for long in ["2147483648ms", "25d", "9999999999h", "1e400"] {
            let e = idle_timeout(long).expect_err(long);
            assert!(
                e.contains("longer than a timer can wait") || e.contains("is not a duration"),
                "{long}: {e}"
            );
        }
        assert!(idle_timeout("9999999999h").unwrap_err().contains("longer"));
    }
}
