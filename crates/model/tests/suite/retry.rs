//! The backoff and `Retry-After` arithmetic.

use std::time::{Duration, SystemTime};

use dsh_model::RetryPolicy;
use dsh_model::retry_after;
use proptest::prelude::*;
use reqwest::header::{HeaderMap, HeaderValue};

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (n, v) in pairs {
        h.insert(*n, HeaderValue::from_str(v).unwrap());
    }
    h
}

#[test]
fn retry_after_reads_seconds_milliseconds_and_http_dates() {
    let now = SystemTime::now();
    assert_eq!(
        retry_after(&headers(&[("retry-after", "3")]), now),
        Some(Duration::from_secs(3))
    );
    assert_eq!(
        retry_after(
            &headers(&[("retry-after-ms", "250"), ("retry-after", "9")]),
            now
        ),
        Some(Duration::from_millis(250))
    );
    let at = now + Duration::from_secs(30);
    let date = httpdate::fmt_http_date(at);
    let wait = retry_after(&headers(&[("retry-after", &date)]), now).unwrap();
    assert!(
        wait <= Duration::from_secs(30) && wait >= Duration::from_secs(29),
        "{wait:?}"
    );
    let past = httpdate::fmt_http_date(now - Duration::from_secs(60));
    assert_eq!(
        retry_after(&headers(&[("retry-after", &past)]), now),
        Some(Duration::ZERO)
    );
    assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
    assert_eq!(retry_after(&HeaderMap::new(), now), None);
}

#[test]
fn a_server_retry_after_is_used_as_given() {
    let policy = RetryPolicy::default();
    assert_eq!(
        policy.delay(1, Some(Duration::from_secs(90))),
        Duration::from_secs(90)
    );
}

proptest! {
    #[test]
    fn backoff_doubles_within_the_jitter_band_and_the_cap(retry in 1u32..40, jitter in 0.0f64..=1.0) {
        let policy = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
        };
        let full = Duration::from_millis(100)
            .saturating_mul(1u32 << (retry - 1).min(31))
            .min(Duration::from_secs(5));
        let d = policy.backoff(retry, jitter);
        prop_assert!(d >= full / 2 && d <= full, "{d:?} for {full:?}");
    }
}
