//! Scripts: the OpenAI and Anthropic shapes run alike; a bad line stops everything before any
//! session is written (exit 2, `script line N: ...`).

use serde_json::{Value, json};

use super::support::*;

#[test]
fn bad_script_line_exits_2_naming_the_line_and_writes_no_session() {
    let good = openai("fine", &[call("c1", "echo", json!({"text": "a"}))]);
    let cases: Vec<(Vec<String>, usize, &str)> = vec![
        (vec![good.clone(), "not json".into()], 2, "invalid JSON"),
        (
            vec![
                good.clone(),
                String::new(),
                r#"{"role":"assistant","tool_calls":[{"id":"x","function":{"name":"echo","arguments":{"text":"a"}}}]}"#.into(),
            ],
            3,
            "arguments must be a string",
        ),
        (vec![r#"{"role":"user","content":"hi"}"#.into()], 1, "role"),
        (vec![good.clone(), "[1,2]".into()], 2, "JSON object"),
        (
            vec![r#"{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"echo","input":{}},{"type":"tool_use","id":"a","name":"echo","input":{}}]}"#.into()],
            1,
            "duplicate tool call id",
        ),
        (
            vec![r#"{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"echo","input":[1]}]}"#.into()],
            1,
            "input must be a JSON object",
        ),
        (
            vec![r#"{"role":"assistant","content":[{"type":"image"}]}"#.into()],
            1,
            "unsupported block type",
        ),
        (vec![String::new(), "  ".into()], 1, "no assistant message"),
        (
            vec![good.clone(), openai("no calls", &[]), String::new(), good.clone()],
            4,
            "line 2 has no tool calls",
        ),
    ];
    let t = tmp();
    for (i, (lines, line, what)) in cases.iter().enumerate() {
        let sc = script(t.path(), &format!("bad{i}.jsonl"), lines);
        let ws = t.path().join(format!("ws{i}"));
        std::fs::create_dir(&ws).unwrap();
        let explicit = t.path().join(format!("explicit{i}.jsonl"));
        for session in [None, Some(&explicit)] {
            let mut args = vec!["run", s(&sc), "--workspace", s(&ws), "--demo-tools"];
            if let Some(p) = session {
                args.extend(["--session", s(p)]);
            }
            let out = dsh_run(&args);
            assert_eq!(out.code, 2, "case {i}: {}", out.both());
            let msg = out.stderr.trim();
            assert!(
                msg.starts_with(&format!("dsh: script line {line}: ")),
                "case {i}: {msg}"
            );
            assert!(msg.contains(what), "case {i} should say {what:?}: {msg}");
            assert!(out.stdout.is_empty(), "case {i}: {}", out.both());
            assert!(
                default_sessions(&ws).is_empty(),
                "case {i}: a session was written"
            );
            assert!(!explicit.exists(), "case {i}: a session was written");
        }
    }
}

#[test]
fn a_missing_script_exits_2() {
    let t = tmp();
    let out = dsh_run(&[
        "run",
        s(&t.path().join("nope.jsonl")),
        "--workspace",
        s(t.path()),
    ]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("nope.jsonl"), "{}", out.both());
    assert!(default_sessions(t.path()).is_empty());
}

/// The tool calls and results of a log, without ids that differ per run.
fn calls_and_results(log: &std::path::Path) -> (Vec<(String, String, Value)>, Vec<Res>) {
    let ev = events(log);
    let calls = of_type(&ev, "tool/call")
        .into_iter()
        .map(|e| {
            let d = &e["data"];
            (
                d["callId"].as_str().unwrap().to_owned(),
                d["name"].as_str().unwrap().to_owned(),
                serde_json::from_str(d["arguments"].as_str().unwrap()).unwrap(),
            )
        })
        .collect();
    (calls, results(&ev))
}

#[test]
fn openai_and_anthropic_shapes_run_the_same_calls() {
    let t = tmp();
    let steps = [
        (
            "reading",
            vec![
                call("c1", "echo", json!({"text": "héllo \"quoted\""})),
                call("c2", "sleep", json!({"ms": 5})),
            ],
        ),
        (
            "failing",
            vec![call("c3", "fail", json!({"message": "nope"}))],
        ),
        ("done", vec![]),
    ];
    let oa: Vec<String> = steps.iter().map(|(t, c)| openai(t, c)).collect();
    let an: Vec<String> = steps.iter().map(|(t, c)| anthropic(t, c)).collect();
    let mixed = vec![oa[0].clone(), an[1].clone(), oa[2].clone()];
    let mut seen = Vec::new();
    for (name, lines) in [("openai", oa), ("anthropic", an), ("mixed", mixed)] {
        let sc = script(t.path(), &format!("{name}.jsonl"), &lines);
        let log = t.path().join(format!("{name}.log"));
        let out = dsh_run(&[
            "run",
            s(&sc),
            "--workspace",
            s(t.path()),
            "--session",
            s(&log),
            "--demo-tools",
        ]);
        assert_eq!(out.code, 0, "{name}: {}", out.both());
        assert_checks_clean(&log);
        let ev = events(&log);
        let texts: Vec<String> = of_type(&ev, "assistant/message")
            .into_iter()
            .map(|e| {
                e["data"]["message"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(texts, ["reading", "failing", "done"], "{name}");
        let (calls, mut res) = calls_and_results(&log);
        for r in &mut res {
            if r.call_id == "c2" {
                r.text.clear(); // the measured time differs between runs
            }
        }
        seen.push((name, calls, res));
    }
    let (_, calls0, res0) = &seen[0];
    assert_eq!(calls0.len(), 3);
    assert_eq!(calls0[0].2, json!({"text": "héllo \"quoted\""}));
    for (name, calls, res) in &seen[1..] {
        assert_eq!(calls, calls0, "{name}");
        assert_eq!(res, res0, "{name}");
    }
}

#[test]
fn openai_arguments_are_kept_as_the_model_wrote_them() {
    let t = tmp();
    // Unparseable arguments are the model's mistake: a result, not a script error.
    let line = r#"{"role":"assistant","tool_calls":[{"id":"bad","type":"function","function":{"name":"echo","arguments":"{\"text\": oops"}},{"id":"raw","type":"function","function":{"name":"echo","arguments":"{ \"text\" : \"spaced\" }"}}]}"#;
    let sc = script(t.path(), "s.jsonl", &[line.to_owned()]);
    let log = t.path().join("log.jsonl");
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&log),
        "--demo-tools",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    let raw: Vec<&str> = of_type(&ev, "tool/call")
        .into_iter()
        .map(|e| e["data"]["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(raw, ["{\"text\": oops", "{ \"text\" : \"spaced\" }"]);
    assert!(result_of(&ev, "bad").is_error);
    assert_eq!(result_of(&ev, "raw").text, "spaced");
    assert_checks_clean(&log);
}
