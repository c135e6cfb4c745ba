//! The single-decision waterfalls (`fs/write-intent`, `fs/edit-intent`,
//! `tools/code-dispatch-log`): first decider wins, default innermost, panics contained.

use dsh_guard::{DecideNext, Waterfall};

type W = Waterfall<u32, Result<&'static str, String>>;

fn panics(
    _: &u32,
    _: DecideNext<'_, u32, Result<&'static str, String>>,
) -> Result<&'static str, String> {
    panic!("listener broke")
}

#[test]
fn the_first_decider_owns_the_answer_and_the_default_is_innermost() {
    let w: W = Waterfall::new();
    assert_eq!(w.decide(&1, &|_| Ok("default")), Ok("default"));
    let _a = w.on(|q, next| if *q == 2 { Ok("outer") } else { next.run(q) });
    let _b = w.on(|_, _| Ok("inner"));
    assert_eq!(w.decide(&2, &|_| Ok("default")), Ok("outer"));
    assert_eq!(w.decide(&1, &|_| Ok("default")), Ok("inner"));
    assert_eq!(w.len(), 2);
    drop(_b);
    assert_eq!(w.decide(&1, &|_| Ok("default")), Ok("default"));
}

#[test]
fn a_panicking_listener_is_skipped_by_decide_but_fails_closed_with_decide_or() {
    let w: W = Waterfall::new();
    let _p = w.on(panics);
    let _q = w.on(|_, _| Ok("after"));
    assert_eq!(w.decide(&1, &|_| Ok("default")), Ok("after"));
    let refused = w.decide_or(&1, &|_| Ok("default"), &|_, f| Err(f.message().to_owned()));
    let msg = refused.unwrap_err();
    assert!(msg.contains("listener broke"), "{msg}");
}

#[test]
fn a_panic_further_in_reaches_the_outer_listener_as_the_fail_closed_answer() {
    let w: W = Waterfall::new();
    let _outer = w.on(|q, next| next.run(q).map(|_| "outer saw ok"));
    let _inner = w.on(panics);
    assert!(
        w.decide_or(&1, &|_| Ok("default"), &|_, _| Err("refused".into()))
            .is_err()
    );
}
