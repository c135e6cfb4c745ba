//! Property tests: the fold is order-independent and most restrictive; interpretation is total
//! and an error never weakens a decision; a decision written by a hook reads back exactly;
//! plain matchers match exactly the names they list. Unit tests: the fold and the protocol are
//! private to the crate.

use crate::fold::{Answer, fold};
use crate::matcher::Matcher;
use crate::protocol::{Exit, Verdict, interpret};
use crate::settings::HookEvent;
use proptest::prelude::*;
use serde_json::json;

fn verdict() -> impl Strategy<Value = Option<Verdict>> {
    prop_oneof![
        Just(None),
        Just(Some(Verdict::Pass)),
        Just(Some(Verdict::Allow)),
        Just(Some(Verdict::Ask)),
        Just(Some(Verdict::Deny)),
    ]
}

fn answer() -> impl Strategy<Value = Answer> {
    (
        verdict(),
        proptest::option::of("[a-z]{1,6}"),
        proptest::collection::vec("[a-z]{1,6}", 0..3),
    )
        .prop_map(|(verdict, reason, contexts)| Answer {
            verdict,
            reason,
            contexts,
        })
}

fn event() -> impl Strategy<Value = HookEvent> {
    prop_oneof![Just(HookEvent::PreToolUse), Just(HookEvent::PostToolUse)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn cc_40_fold_is_the_most_restrictive_whatever_the_order(
        answers in proptest::collection::vec(answer(), 0..6),
        rotate in 0usize..6,
    ) {
        let folded = fold(&answers);
        let strongest = answers.iter().filter_map(|a| a.verdict).max().unwrap_or(Verdict::Pass);
        prop_assert_eq!(folded.verdict, strongest);
        // Contexts are every hook's, in configuration order.
        let all: Vec<String> = answers.iter().flat_map(|a| a.contexts.clone()).collect();
        prop_assert_eq!(&folded.contexts, &all);
        // Reasons come only from hooks that gave the folded verdict.
        let expected: Vec<String> = answers
            .iter()
            .filter(|a| a.verdict == Some(strongest))
            .filter_map(|a| a.reason.clone())
            .collect();
        prop_assert_eq!(&folded.reasons, &expected);
        // Reordering never changes the verdict.
        let mut turned = answers.clone();
        if !turned.is_empty() {
            let k = rotate % turned.len();
            turned.rotate_left(k);
        }
        prop_assert_eq!(fold(&turned).verdict, strongest);
    }

    #[test]
    fn cc_41_interpretation_is_total_and_errors_never_weaken(
        ev in event(),
        code in prop_oneof![Just(0i32), Just(1), Just(2), -1i32..300],
        stdout in prop_oneof![
            ".{0,40}",
            Just("{\"hookSpecificOutput\": {\"permissionDecision\": \"allow\", \"updatedInput\": {}}}".to_owned()),
            Just("{\"decision\": \"maybe\"}".to_owned()),
            Just("[1, 2]".to_owned()),
            Just("{\"continue\": false}".to_owned()),
        ],
        stderr in ".{0,20}",
    ) {
        let r = interpret(ev, &Exit::Code(code), &stdout, &stderr);
        if r.error.is_some() {
            prop_assert_ne!(r.verdict, Some(Verdict::Allow));
        }
        match code {
            2 => {
                prop_assert_eq!(r.verdict, Some(Verdict::Deny));
                prop_assert!(r.reason.as_deref().is_some_and(|s| !s.is_empty()));
                prop_assert!(r.error.is_none());
            }
            0 => {}
            _ => {
                prop_assert!(r.error.is_some());
                prop_assert_eq!(r.verdict, None);
            }
        }
        if r.verdict == Some(Verdict::Deny) {
            prop_assert!(r.reason.is_some());
        }
    }

    #[test]
    fn cc_42_a_written_decision_reads_back(
        decision in prop_oneof![Just("allow"), Just("deny"), Just("ask")],
        reason in "[ -~]{1,30}",
        ctx in proptest::option::of("[a-z ]{1,20}"),
    ) {
        let mut out = json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }});
        if let Some(c) = &ctx {
            out["additionalContext"] = json!(c);
        }
        let r = interpret(HookEvent::PreToolUse, &Exit::Code(0), &out.to_string(), "");
        let expected = match decision {
            "allow" => Verdict::Allow,
            "deny" => Verdict::Deny,
            _ => Verdict::Ask,
        };
        prop_assert_eq!(r.error, None);
        prop_assert_eq!(r.verdict, Some(expected));
        prop_assert_eq!(r.reason, Some(reason));
        let want: Vec<String> = ctx.into_iter().filter(|c| !c.trim().is_empty()).collect();
        prop_assert_eq!(r.contexts, want);
    }

    #[test]
    fn cc_43_plain_matchers_match_exactly_the_listed_names(
        names in proptest::collection::vec("[A-Za-z_][A-Za-z0-9_]{0,8}", 1..4),
        probe in "[A-Za-z_][A-Za-z0-9_]{0,8}",
    ) {
        let m = Matcher::new(&names.join("|")).expect("plain matcher");
        prop_assert_eq!(m.matches_name(&probe), names.contains(&probe));
        for n in &names {
            prop_assert!(m.matches_name(n));
        }
        prop_assert!(Matcher::new("*").expect("star").matches_name(&probe));
        prop_assert!(Matcher::new("").expect("empty").matches_name(&probe));
    }
}
