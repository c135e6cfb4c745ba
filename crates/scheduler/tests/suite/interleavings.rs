//! Many-schedule interleaving tests of the step scheduler (issue 4, item 5): the same batches
//! run under hundreds of seeded schedules, and every run must keep the invariants checked by
//! `props::check` (pairing, model order, barriers, pool bound, context placement); without a
//! cancel, every schedule must also give the very same committed results.
//!
//! Why seeded exploration rather than `shuttle`: shuttle controls only code written against its
//! own primitives (`shuttle::sync`, `shuttle::thread`, `shuttle::future`). The scheduler runs on
//! tokio — spawned dispatch tasks, `tokio::sync::mpsc`, tokio timers, the `Notify` inside
//! `Signal` — and shuttle has no tokio shim, so it could only explore a model of the scheduler,
//! not the scheduler itself. Instead each schedule is fixed by a seed that gives every body,
//! pre-execute and post-execute listener its own delay (virtual milliseconds on a paused clock)
//! and its own number of cooperative yields, which reorders completions, prepares and commits
//! deterministically and reproducibly (a failing seed is printed); one more set runs on two
//! real worker threads with real sub-millisecond jitter.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::HashSet;

use super::props::{Batch, CallSpec, Outcome, Post, Pre, check, paused_runtime, run_batch};
use super::support::{log, result_code, result_is_error, result_text};

/// A small seeded generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

fn spec(parallel: bool, pre: Pre, post: Post) -> CallSpec {
    CallSpec {
        parallel,
        pre,
        post,
        body_ms: 0,
        body_yields: 0,
        pre_ms: 0,
        pre_yields: 0,
        post_ms: 0,
        post_yields: 0,
    }
}

/// The same calls with timings drawn from `rng` (modes and hook outcomes unchanged).
fn retime(batch: &Batch, rng: &mut Rng, max_ms: u64) -> Batch {
    let calls = batch
        .calls
        .iter()
        .map(|c| CallSpec {
            body_ms: rng.below(max_ms + 1),
            body_yields: rng.below(6) as u32,
            pre_ms: rng.below(max_ms / 2 + 1),
            pre_yields: rng.below(4) as u32,
            post_ms: rng.below(max_ms / 2 + 1),
            post_yields: rng.below(4) as u32,
            ..c.clone()
        })
        .collect();
    Batch {
        calls,
        ..batch.clone()
    }
}

/// A whole random batch from `rng`.
fn random_batch(rng: &mut Rng, max_ms: u64) -> Batch {
    let n = 1 + rng.below(8) as usize;
    let calls = (0..n)
        .map(|_| {
            let pre = match rng.below(6) {
                0 => Pre::Deny,
                1 => Pre::Throw,
                _ => Pre::Allow,
            };
            let post = if rng.percent(25) {
                Post::Block
            } else {
                Post::Accept
            };
            spec(rng.percent(65), pre, post)
        })
        .collect();
    let cancel_at_ms = rng.percent(70).then(|| rng.below(max_ms * 3 + 1));
    let batch = Batch {
        calls,
        cap: 1 + rng.below(4) as usize,
        cancel_at_ms,
    };
    retime(&batch, rng, max_ms)
}

/// Four hand-picked batch shapes: a pure pool, mixed modes with every hook outcome, barriers
/// between parallel groups, and a wide pool with blocks.
fn fixed_batches() -> Vec<Batch> {
    use Post::{Accept as A, Block as B};
    use Pre::{Allow, Deny, Throw};
    vec![
        Batch {
            calls: (0..5).map(|_| spec(true, Allow, A)).collect(),
            cap: 3,
            cancel_at_ms: None,
        },
        Batch {
            calls: vec![
                spec(true, Allow, A),
                spec(true, Deny, A),
                spec(false, Allow, A),
                spec(true, Allow, B),
                spec(true, Throw, A),
                spec(true, Allow, A),
            ],
            cap: 2,
            cancel_at_ms: None,
        },
        Batch {
            calls: vec![
                spec(false, Allow, A),
                spec(true, Allow, A),
                spec(true, Deny, B),
                spec(false, Allow, B),
                spec(true, Allow, A),
                spec(true, Allow, A),
            ],
            cap: 4,
            cancel_at_ms: None,
        },
        Batch {
            calls: (0..6)
                .map(|i| spec(true, Allow, if i % 3 == 1 { B } else { A }))
                .collect(),
            cap: 6,
            cancel_at_ms: None,
        },
    ]
}

/// What the model will see of a finished batch: each result and the contexts, in order.
fn fingerprint(out: &Outcome) -> Vec<String> {
    let mut f: Vec<String> = log(&out.session)
        .iter()
        .filter(|(_, e)| e.event_type() == "tool/result" || e.event_type() == "user/message")
        .map(|(_, e)| {
            if e.event_type() == "user/message" {
                format!("ctx {}", super::support::message_text(e))
            } else {
                let r = e.as_tool_result().expect("result");
                format!(
                    "{} err={} {:?} {}",
                    r.call_id,
                    result_is_error(e),
                    result_code(e),
                    result_text(e)
                )
            }
        })
        .collect();
    f.extend(out.inbox.iter().map(|t| format!("inbox {t}")));
    f
}

#[test]
fn interleavings_fixed_batches_give_one_outcome_under_256_schedules() {
    for (b, base) in fixed_batches().iter().enumerate() {
        let mut reference: Option<Vec<String>> = None;
        let mut orders = HashSet::new();
        for seed in 0..64u64 {
            let mut rng = Rng(seed * 7919 + b as u64);
            let batch = retime(base, &mut rng, 4);
            let out = paused_runtime().block_on(run_batch(&batch));
            let caught =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&batch, &out)));
            assert!(caught.is_ok(), "batch {b}, seed {seed}: {batch:?}");
            let fp = fingerprint(&out);
            match &reference {
                None => reference = Some(fp),
                Some(r) => assert_eq!(
                    &fp, r,
                    "batch {b}, seed {seed}: the outcome depends on timing"
                ),
            }
            orders.insert(out.trace.body_ended.clone());
        }
        // The schedules really differ: the pool batches saw many body completion orders.
        if base
            .calls
            .iter()
            .filter(|c| c.parallel && c.pre == Pre::Allow)
            .count()
            >= 5
        {
            assert!(
                orders.len() >= 8,
                "batch {b}: only {} completion orders",
                orders.len()
            );
        }
    }
}

#[test]
fn interleavings_random_batches_with_cancel_hold_under_200_schedules() {
    let mut cancelled = 0;
    for seed in 0..200u64 {
        let mut rng = Rng(0xC0FFEE ^ seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let batch = random_batch(&mut rng, 6);
        let out = paused_runtime().block_on(run_batch(&batch));
        if out.report.end != dsh_scheduler::TurnEnd::Completed {
            cancelled += 1;
        }
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&batch, &out)));
        assert!(caught.is_ok(), "seed {seed}: {batch:?}");
    }
    // The cancel instants land inside batches often enough to matter.
    assert!(
        cancelled >= 40,
        "only {cancelled} of 200 schedules were cancelled mid-turn"
    );
}

#[test]
fn interleavings_two_worker_threads_real_jitter_64_schedules() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for seed in 0..64u64 {
        let mut rng = Rng(0xBADC0DE + seed);
        let batch = random_batch(&mut rng, 2);
        let out = rt.block_on(run_batch(&batch));
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&batch, &out)));
        assert!(caught.is_ok(), "seed {seed}: {batch:?}");
    }
}
