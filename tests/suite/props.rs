//! Property tests through the binary: for generated scripts (either shape, any pool size) the
//! log checks clean, every call is paired in its step, `--json` mirrors the log, echoes come back
//! verbatim; and for any cancel time the log still checks clean with only abort codes added.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::support::*;

#[derive(Clone, Debug)]
enum Tool {
    Echo(String),
    Sleep(u64),
    Fail(String),
}

fn tool() -> impl Strategy<Value = Tool> {
    prop_oneof![
        "\\PC{0,12}".prop_map(Tool::Echo),
        (0u64..25).prop_map(Tool::Sleep),
        "[a-z ]{1,10}".prop_map(Tool::Fail),
    ]
}

/// Steps of calls, each step written in the OpenAI (true) or Anthropic (false) shape; only the
/// last may have no calls (a message without calls ends the turn).
fn steps() -> impl Strategy<Value = Vec<(bool, Vec<Tool>)>> {
    (
        prop::collection::vec((any::<bool>(), prop::collection::vec(tool(), 1..4)), 0..3),
        (any::<bool>(), prop::collection::vec(tool(), 0..4)),
    )
        .prop_map(|(mut steps, last)| {
            steps.push(last);
            steps
        })
}

fn write(dir: &std::path::Path, steps: &[(bool, Vec<Tool>)]) -> std::path::PathBuf {
    let lines: Vec<String> = steps
        .iter()
        .enumerate()
        .map(|(k, (oa, tools))| {
            let calls: Vec<Call> = tools
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let id = format!("c{k}_{i}");
                    match t {
                        Tool::Echo(text) => call(&id, "echo", json!({"text": text})),
                        Tool::Sleep(ms) => call(&id, "sleep", json!({"ms": ms})),
                        Tool::Fail(m) => call(&id, "fail", json!({"message": m})),
                    }
                })
                .collect();
            let text = format!("step {k}");
            if *oa {
                openai(&text, &calls)
            } else {
                anthropic(&text, &calls)
            }
        })
        .collect();
    script(dir, "s.jsonl", &lines)
}

/// Every tool/result is in the same turn and step as the tool/call its seq points at.
fn assert_same_step(ev: &[Value]) {
    for r in of_type(ev, "tool/result") {
        let seq = r["sourceEventSeqs"][0].as_u64().unwrap() as usize;
        let c = &ev[seq];
        assert_eq!(c["type"], "tool/call");
        assert_eq!(c["data"]["step"], r["data"]["step"]);
        assert_eq!(c["data"]["turn"], r["data"]["turn"]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn any_script_runs_to_a_clean_paired_log_mirrored_by_json(
        steps in steps(),
        pool in 1usize..4,
    ) {
        let t = tmp();
        let sc = write(t.path(), &steps);
        let log = t.path().join("log.jsonl");
        let out = dsh_run(&[
            "run", s(&sc), "--workspace", s(t.path()), "--session", s(&log), "--demo-tools",
            "--json", "--max-parallel", &pool.to_string(),
        ]);
        prop_assert_eq!(out.code, 0, "{}", out.both());
        assert_checks_clean(&log);
        let ev = events(&log);
        assert_paired(&ev);
        assert_same_step(&ev);

        let lines = json_lines(&out.stdout);
        prop_assert_eq!(lines.len(), ev.len());
        for (i, (mut line, logged)) in lines.into_iter().zip(ev.iter()).enumerate() {
            let seq = line.as_object_mut().unwrap().remove("seq");
            prop_assert_eq!(seq, Some(json!(i)));
            prop_assert_eq!(&line, logged);
        }

        let expected: Vec<String> = steps
            .iter()
            .enumerate()
            .flat_map(|(k, (_, tools))| (0..tools.len()).map(move |i| format!("c{k}_{i}")))
            .collect();
        let mut got = call_ids(&ev);
        got.sort();
        let mut want = expected.clone();
        want.sort();
        prop_assert_eq!(got, want);
        for (k, (_, tools)) in steps.iter().enumerate() {
            for (i, tool) in tools.iter().enumerate() {
                let r = result_of(&ev, &format!("c{k}_{i}"));
                match tool {
                    Tool::Echo(text) => prop_assert_eq!(&r.text, text),
                    Tool::Sleep(_) => prop_assert!(!r.is_error, "{:?}", r),
                    Tool::Fail(m) => prop_assert_eq!(r.text, format!("Error: {m}")),
                }
            }
        }
        prop_assert_eq!(of_type(&ev, "step/start").len(), steps.len());
    }

    #[test]
    fn any_cancel_time_leaves_a_clean_log_with_only_abort_codes_added(
        sleeps in prop::collection::vec(prop::collection::vec(0u64..120, 1..4), 1..3),
        cancel in 0u64..150,
        pool in 1usize..3,
    ) {
        let t = tmp();
        let steps: Vec<(bool, Vec<Tool>)> = sleeps
            .iter()
            .map(|ms| (false, ms.iter().map(|m| Tool::Sleep(*m)).collect()))
            .collect();
        let sc = write(t.path(), &steps);
        let log = t.path().join("log.jsonl");
        let out = dsh_run(&[
            "run", s(&sc), "--workspace", s(t.path()), "--session", s(&log), "--demo-tools",
            "--cancel-after-ms", &cancel.to_string(), "--max-parallel", &pool.to_string(),
        ]);
        prop_assert!(out.code == 0 || out.code == 130, "{}", out.both());
        assert_checks_clean(&log);
        let ev = events(&log);
        assert_paired(&ev);
        assert_same_step(&ev);
        let end = of_type(&ev, "turn/end");
        prop_assert_eq!(end.len(), 1);
        let aborted = end[0]["data"]["reason"]["kind"] == "aborted";
        prop_assert_eq!(aborted, out.code == 130);
        for r in results(&ev) {
            if r.is_error {
                prop_assert!(aborted);
                let code = r.code.as_deref().unwrap_or_default();
                prop_assert!(
                    code == "ABORTED" || code == "ABORTED_BEFORE_DISPATCH",
                    "{:?}", r
                );
            }
        }
    }
}
