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
        // Issue 17 item 1: nothing that is not an assistant message runs as zero calls.
        (vec![good.clone(), r#"{"foo":1}"#.into()], 2, "unknown key \"foo\""),
        (vec![r#"{}"#.into()], 1, "neither"),
        (
            vec![r#"{"role":"assistant","tool_call":[{"id":"x","type":"function","function":{"name":"echo","arguments":"{}"}}]}"#.into()],
            1,
            "unknown key \"tool_call\" (did you mean \"tool_calls\"?)",
        ),
        (
            vec![r#"{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"echo","inputs":{"text":"a"}}]}"#.into()],
            1,
            "content[0]: unknown key \"inputs\" (did you mean \"input\"?)",
        ),
        (
            vec![r#"{"role":"assistant","content":"x","tool_calls":[{"id":"x","function":{"name":"echo","argument":"{}"}}]}"#.into()],
            1,
            "tool_calls[0].function: unknown key \"argument\"",
        ),
        (
            vec![r#"{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":"a"}},{"message":{"role":"assistant","content":"b"}}]}"#.into()],
            1,
            "2 choices",
        ),
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

/// Issue 17 item 1: a whole Chat Completions response is accepted by taking its one message.
#[test]
fn a_chat_completions_response_runs_its_message() {
    let t = tmp();
    let message = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{\"text\":\"hi\"}"}}
    ]});
    let response = json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
        "model": "m", "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 1}});
    let sc = script(t.path(), "resp.jsonl", &[response.to_string()]);
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--demo-tools",
        "--json",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    let events = json_lines(&out.stdout);
    assert_eq!(call_ids(&events), vec!["c1".to_owned()], "{}", out.both());
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

mod unknown_keys {
    use proptest::prelude::*;
    use serde_json::json;

    const KNOWN: &[&str] = &[
        "role",
        "content",
        "tool_calls",
        "refusal",
        "annotations",
        "audio",
        "name",
        "reasoning_content",
        "id",
        "type",
        "model",
        "stop_reason",
        "stop_sequence",
        "usage",
        "choices",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Issue 17 item 1: any message-level key outside the two shapes refuses the line,
        /// naming the key, whatever else the message holds; nothing runs as zero calls.
        #[test]
        fn any_unknown_message_key_is_refused_naming_it(
            key in "[a-zA-Z_]{1,12}",
            calls in any::<bool>(),
        ) {
            prop_assume!(!KNOWN.contains(&key.as_str()));
            let mut m = json!({"role": "assistant", "content": "x"});
            if calls {
                m["tool_calls"] = json!([{"id": "c", "type": "function",
                    "function": {"name": "echo", "arguments": "{}"}}]);
            }
            m[&key] = json!(1);
            let err = dsh::parse_script(&m.to_string()).unwrap_err();
            prop_assert_eq!(err.line, 1);
            let expected = format!("unknown key \"{key}\"");
            prop_assert!(err.message.contains(&expected), "{}", err.message);
        }
    }
}

/// Issue 17 item 1, through the binary: `grep`/`glob` on a missing path fail with
/// `FS_NOT_FOUND` on the terminal line, and a search that skipped files says so to the model.
#[test]
fn grep_and_glob_say_not_found_and_what_they_skipped() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::create_dir_all(ws.join("target")).unwrap();
    std::fs::write(ws.join(".gitignore"), "target/\n").unwrap();
    std::fs::write(ws.join("target/a.txt"), "needle\n").unwrap();
    std::fs::write(ws.join("blob.bin"), b"needle\0").unwrap();
    let log = t.path().join("log.jsonl");
    let sc = script(
        t.path(),
        "s.jsonl",
        &[
            openai(
                "",
                &[
                    call("g1", "grep", json!({"pattern": "needle", "path": "nope"})),
                    call("g2", "glob", json!({"pattern": "*", "path": "missing"})),
                    call("g3", "grep", json!({"pattern": "needle"})),
                ],
            ),
            openai("done", &[]),
        ],
    );
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(&ws),
        "--session",
        s(&log),
        "--approve",
        "always",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    for id in ["g1", "g2"] {
        let r = result_of(&events(&log), id);
        assert_eq!(r.code.as_deref(), Some("FS_NOT_FOUND"), "{r:?}");
    }
    assert!(out.stdout.contains("✗ grep needle"), "{}", out.stdout);
    assert!(out.stdout.contains("FS_NOT_FOUND"), "{}", out.stdout);
    let g3 = result_of(&events(&log), "g3");
    assert!(g3.text.starts_with("No matches found"), "{g3:?}");
    assert!(g3.text.contains("Skipped 1 binary file"), "{g3:?}");
    assert!(g3.text.contains("(target/)"), "{g3:?}");
}

#[test]
fn a_run_of_one_call_says_1_call() {
    let t = tmp();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai("", &[call("e1", "echo", json!({"text": "hi"}))])],
    );
    let out = run_script(&sc, t.path(), &t.path().join("l.jsonl"), &["--demo-tools"]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(out.stderr.contains("1 call, 0 failed"), "{}", out.both());
}
