//! Rendering properties: the shown output never exceeds the cap, keeps each stream's tail,
//! never splits a character, and is exactly the reference shape when nothing is cut; denial
//! lines are classified as file or network. Unit tests: rendering is private to the crate.

use crate::mode::SandboxMode;
use crate::render::{Stream, assemble, denial_notes, denials, tail_text};
use proptest::prelude::*;

fn assembled(out: &[u8], err: &[u8], cap: usize) -> crate::render::Assembled {
    assemble(
        Stream {
            tail: out,
            total: out.len() as u64,
        },
        Stream {
            tail: err,
            total: err.len() as u64,
        },
        &[],
        cap,
        Some("/full"),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn output_within_the_cap_is_shown_whole_in_the_reference_shape(
        out in "[a-z\n]{0,40}", err in "[a-z\n]{0,40}",
    ) {
        let a = assembled(out.as_bytes(), err.as_bytes(), 100);
        prop_assert!(!a.truncated);
        let mut want = out.clone();
        if !err.is_empty() {
            if !want.is_empty() && !want.ends_with('\n') { want.push('\n'); }
            want.push_str("[stderr]\n");
            want.push_str(&err);
        }
        if want.is_empty() { want = "(no output)".to_owned(); }
        prop_assert_eq!(a.text, want);
    }

    #[test]
    fn cut_output_shows_at_most_the_cap_and_keeps_each_tail(
        out in prop::collection::vec(any::<u8>(), 0..400),
        err in prop::collection::vec(any::<u8>(), 0..400),
        cap in 1usize..300,
    ) {
        prop_assume!(out.len() + err.len() > cap);
        let a = assembled(&out, &err, cap);
        prop_assert!(a.truncated);
        let first = a.text.lines().next().unwrap_or_default().to_owned();
        prop_assert!(first.starts_with("[output truncated: showing the last "), "{}", first);
        prop_assert!(first.ends_with("; full output: /full]"), "{}", first);
        let shown: usize = first["[output truncated: showing the last ".len()..]
            .split(' ').next().unwrap().parse().unwrap();
        // What is shown, counted in the command's own bytes, never exceeds the cap, and at most
        // three bytes per stream are lost to a cut character.
        prop_assert!(shown <= cap, "{} > {}", shown, cap);
        prop_assert!(shown + 6 >= cap, "{} shown for a cap of {}", shown, cap);
        // stdout's last complete characters are kept when stdout got any budget.
        if let Some(last) = std::str::from_utf8(&out).ok().and_then(|s| s.chars().last())
            && err.len() < cap / 2
        {
            let body = &a.text[first.len() + 1..];
            prop_assert!(body.contains(last), "{:?} lost its last char", body);
        }
    }

    #[test]
    fn a_tail_never_splits_a_character(s in "\\PC{0,40}", budget in 0usize..60) {
        let t = tail_text(s.as_bytes(), budget);
        prop_assert!(s.ends_with(&t), "{:?} is not a tail of {:?}", t, s);
        prop_assert!(t.len() <= budget);
    }
}

#[test]
fn an_exact_cut_prefers_stderr_up_to_half() {
    let a = assembled(b"0123456789", b"abcdefghij", 10);
    assert_eq!(
        a.text,
        "[output truncated: showing the last 10 of 20 bytes; full output: /full]\n56789\n[stderr]\nfghij"
    );
    let a = assembled(b"0123456789", b"ab", 6);
    assert_eq!(
        a.text,
        "[output truncated: showing the last 6 of 12 bytes; full output: /full]\n6789\n[stderr]\nab"
    );
}

#[test]
fn denial_lines_are_classified() {
    let d = denials("bash: /etc/x: Permission denied\nbash: socket: Operation not permitted\n");
    assert!(d.file && d.network);
    let d = denials("bash: line 1: notes.txt: Read-only file system");
    assert!(d.file && !d.network);
    let d = denials("all good\n");
    assert!(!d.file && !d.network);
    assert_eq!(
        denial_notes(
            denials("x: Operation not permitted"),
            SandboxMode::ReadOnly,
            false
        ),
        vec!["[sandbox: file access denied under read-only mode]".to_owned()]
    );
    assert!(denial_notes(denials("fine"), SandboxMode::ReadOnly, true).is_empty());
}
