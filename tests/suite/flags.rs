//! `dsh run` flag by flag: `--workspace`, `--session`, `--policy`, `--max-parallel`, `--mode`,
//! `--demo-tools` and `--json`.

use serde_json::{Value, json};

use super::support::*;

fn echo_script(dir: &std::path::Path) -> std::path::PathBuf {
    script(
        dir,
        "echo.jsonl",
        &[
            openai("hi", &[call("c1", "echo", json!({"text": "hello"}))]),
            openai("done", &[]),
        ],
    )
}

#[test]
fn workspace_confines_the_file_tools_to_its_root() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("in.txt"), "inside text\n").unwrap();
    std::fs::write(t.path().join("out.txt"), "outside\n").unwrap();
    let sc = script(
        t.path(),
        "fs.jsonl",
        &[
            openai(
                "",
                &[
                    call("r1", "read", json!({"file_path": "in.txt"})),
                    call("r2", "read", json!({"file_path": "../out.txt"})),
                ],
            ),
            openai(
                "",
                &[
                    call(
                        "w1",
                        "write",
                        json!({"file_path": "new.txt", "content": "made"}),
                    ),
                    call(
                        "e1",
                        "edit",
                        json!({"file_path": "in.txt", "old_string": "inside", "new_string": "edited"}),
                    ),
                ],
            ),
        ],
    );
    let out = dsh_run(&["run", s(&sc), "--workspace", s(&ws)]);
    assert_eq!(out.code, 0, "{}", out.both());
    let logs = default_sessions(&ws);
    assert_eq!(logs.len(), 1);
    let ev = events(&logs[0]);
    assert!(result_of(&ev, "r1").text.contains("inside text"));
    let outside = result_of(&ev, "r2");
    assert_eq!(outside.code.as_deref(), Some("FS_OUTSIDE_WORKSPACE"));
    assert!(!outside.text.contains("outside\n"));
    assert!(!result_of(&ev, "w1").is_error);
    assert!(!result_of(&ev, "e1").is_error);
    assert_eq!(std::fs::read_to_string(ws.join("new.txt")).unwrap(), "made");
    assert_eq!(
        std::fs::read_to_string(ws.join("in.txt")).unwrap(),
        "edited text\n"
    );
    assert_eq!(
        std::fs::read_to_string(t.path().join("out.txt")).unwrap(),
        "outside\n"
    );
}

#[test]
fn workspace_defaults_to_the_current_directory() {
    let t = tmp();
    std::fs::write(t.path().join("here.txt"), "right here\n").unwrap();
    script(
        t.path(),
        "s.jsonl",
        &[openai(
            "",
            &[call("r", "read", json!({"file_path": "here.txt"}))],
        )],
    );
    let out = run(dsh().args(["run", "s.jsonl"]).current_dir(t.path()));
    assert_eq!(out.code, 0, "{}", out.both());
    let logs = default_sessions(t.path());
    assert_eq!(logs.len(), 1, "{}", out.both());
    let ev = events(&logs[0]);
    assert!(result_of(&ev, "r").text.contains("right here"));
    let cwd = t.path().canonicalize().unwrap();
    assert_eq!(header(&logs[0])["cwd"], cwd.to_str().unwrap());
}

#[test]
fn session_defaults_to_workspace_dsh_sessions_id_jsonl() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let sc = echo_script(t.path());
    // Run from elsewhere: the default is under the workspace, not the current directory.
    let out = run(dsh()
        .args(["run", s(&sc), "--workspace", s(&ws), "--demo-tools"])
        .current_dir(t.path()));
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(default_sessions(t.path()).is_empty());
    let logs = default_sessions(&ws);
    assert_eq!(logs.len(), 1);
    let log = &logs[0];
    let id = header(log)["id"].as_str().unwrap().to_owned();
    assert_eq!(
        log.file_name().unwrap().to_str().unwrap(),
        format!("{id}.jsonl")
    );
    assert!(
        out.stderr.contains(&format!("log: {}", log.display())),
        "{}",
        out.both()
    );
    assert_checks_clean(log);
    assert_eq!(result_of(&events(log), "c1").text, "hello");

    // A second run makes a second session with its own id.
    let again = run(dsh()
        .args(["run", s(&sc), "--workspace", s(&ws), "--demo-tools"])
        .current_dir(t.path()));
    assert_eq!(again.code, 0, "{}", again.both());
    assert_eq!(default_sessions(&ws).len(), 2);
}

#[test]
fn session_explicit_path_is_used_and_its_folders_created() {
    let t = tmp();
    let sc = echo_script(t.path());
    let log = t.path().join("deep").join("er").join("mine.jsonl");
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
    assert!(log.is_file());
    assert!(default_sessions(t.path()).is_empty());
    assert_checks_clean(&log);
    assert_eq!(header(&log)["type"], "session");
}

#[test]
fn policy_file_sets_pool_size_permissions_and_tool_timeouts() {
    let t = tmp();
    let policy = t.path().join("policy.toml");
    std::fs::write(
        &policy,
        "max_parallel_tool_calls = 1\n\n[permissions]\nallow = [\"sleep\"]\ndeny = [\"echo\"]\n\n[tools.sleep]\ntimeout_ms = 250\n",
    )
    .unwrap();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[anthropic(
            "",
            &[
                call("a", "sleep", json!({"ms": 1})),
                call("b", "sleep", json!({"ms": 1})),
                call("slow", "sleep", json!({"ms": 5000})),
                call("e", "echo", json!({"text": "no"})),
            ],
        )],
    );
    let log = t.path().join("log.jsonl");
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&log),
        "--policy",
        s(&policy),
        "--demo-tools",
        "--json",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    // Pool of one: each call's result comes before the next call starts.
    let order: Vec<String> = ev
        .iter()
        .filter(|e| e["type"] == "tool/call" || e["type"] == "tool/result")
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        order,
        ["tool/call", "tool/result"].repeat(4),
        "pool of one must not overlap"
    );
    assert_eq!(result_of(&ev, "slow").code.as_deref(), Some("TOOL_TIMEOUT"));
    assert!(result_of(&ev, "slow").text.contains("250ms"));
    let denied = result_of(&ev, "e");
    assert!(
        denied.is_error && denied.text.contains("denied"),
        "{denied:?}"
    );
    assert!(!result_of(&ev, "a").is_error);
}

/// Each bad policy file: exit 2, the message names the key and its line, nothing is written.
#[test]
fn bad_policy_exits_2_naming_the_key_and_line() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "max_parallel_tool_calls = 4\nmode = \"fast\"\n",
            "mode",
            "line 2",
        ),
        (
            "max_parallel_tool_calls = 0\n",
            "max_parallel_tool_calls",
            "line 1",
        ),
        (
            "\n\nmax_parallel_tool_calls = \"x\"\n",
            "max_parallel_tool_calls",
            "line 3",
        ),
        ("approval = \"ask\"\nbogus = 1\n", "bogus", "line 2"),
        ("approval = \"sometimes\"\n", "approval", "line 1"),
        (
            "\n[tools.sleep]\ntimeout_ms = -5\n",
            "tools.sleep.timeout_ms",
            "line 3",
        ),
        (
            "[permissions]\nallow = [\"read\"]\ndeny = [\"((\"]\n",
            "permissions.deny",
            "line 3",
        ),
    ];
    let t = tmp();
    let sc = echo_script(t.path());
    for (i, (text, key, line)) in cases.iter().enumerate() {
        let policy = t.path().join(format!("bad{i}.toml"));
        std::fs::write(&policy, text).unwrap();
        let ws = t.path().join(format!("ws{i}"));
        std::fs::create_dir(&ws).unwrap();
        let out = dsh_run(&[
            "run",
            s(&sc),
            "--workspace",
            s(&ws),
            "--policy",
            s(&policy),
            "--demo-tools",
        ]);
        assert_eq!(out.code, 2, "{text:?}\n{}", out.both());
        let first = out.stderr.lines().next().unwrap_or_default();
        assert!(first.contains(s(&policy)), "{text:?}: {first}");
        assert!(first.contains(key), "{text:?} should name {key}: {first}");
        assert!(first.contains(line), "{text:?} should say {line}: {first}");
        assert!(out.stdout.is_empty(), "{}", out.both());
        assert!(
            default_sessions(&ws).is_empty(),
            "{text:?}: a session was written"
        );
    }
    let missing = dsh_run(&["run", s(&sc), "--policy", s(&t.path().join("nope.toml"))]);
    assert_eq!(missing.code, 2, "{}", missing.both());
    assert!(missing.stderr.contains("nope.toml"), "{}", missing.both());
}

fn two_sleeps(dir: &std::path::Path, ms: u64) -> std::path::PathBuf {
    script(
        dir,
        "sleeps.jsonl",
        &[anthropic(
            "",
            &[
                call("a", "sleep", json!({"ms": ms})),
                call("b", "sleep", json!({"ms": ms})),
            ],
        )],
    )
}

/// The kinds of the tool events in `--json` output, in order, as `call:a`, `result:b`, ...
fn tool_order(stdout: &str) -> Vec<String> {
    json_lines(stdout)
        .into_iter()
        .filter_map(|v| match v["type"].as_str() {
            Some("tool/call") => Some(format!("call:{}", v["data"]["callId"].as_str()?)),
            Some("tool/result") => Some(format!(
                "result:{}",
                v["data"]["message"]["source"]["callId"].as_str()?
            )),
            _ => None,
        })
        .collect()
}

fn sleep_elapsed(stdout: &str) -> Vec<u64> {
    json_lines(stdout)
        .into_iter()
        .filter(|v| v["type"] == "tool/result")
        .map(|v| {
            let text = v["data"]["message"]["content"][0]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned();
            let out: Value = serde_json::from_str(&text).unwrap();
            assert!(out["elapsed_ms"].as_u64().unwrap() >= out["requested_ms"].as_u64().unwrap());
            out["elapsed_ms"].as_u64().unwrap()
        })
        .collect()
}

#[test]
fn max_parallel_bounds_how_many_sleeps_overlap() {
    let t = tmp();
    let sc = two_sleeps(t.path(), 300);
    let one = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--demo-tools",
        "--json",
        "--max-parallel",
        "1",
    ]);
    assert_eq!(one.code, 0, "{}", one.both());
    assert_eq!(
        tool_order(&one.stdout),
        ["call:a", "result:a", "call:b", "result:b"]
    );
    assert_eq!(sleep_elapsed(&one.stdout).len(), 2);

    let two = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--demo-tools",
        "--json",
        "--max-parallel",
        "2",
    ]);
    assert_eq!(two.code, 0, "{}", two.both());
    let order = tool_order(&two.stdout);
    assert_eq!(
        &order[..2],
        ["call:a", "call:b"],
        "both started before either ended"
    );
    assert_eq!(sleep_elapsed(&two.stdout).len(), 2);
}

#[test]
fn max_parallel_flag_overrides_the_policy_and_rejects_zero() {
    let t = tmp();
    let policy = t.path().join("p.toml");
    std::fs::write(&policy, "max_parallel_tool_calls = 1\n").unwrap();
    let sc = two_sleeps(t.path(), 300);
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--demo-tools",
        "--json",
        "--policy",
        s(&policy),
        "--max-parallel",
        "2",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert_eq!(&tool_order(&out.stdout)[..2], ["call:a", "call:b"]);

    let zero = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--max-parallel",
        "0",
    ]);
    assert_eq!(zero.code, 2, "{}", zero.both());
    assert!(zero.stderr.contains("--max-parallel"), "{}", zero.both());
    let junk = dsh_run(&["run", s(&sc), "--max-parallel", "many"]);
    assert_eq!(junk.code, 2, "{}", junk.both());
}

/// `--mode native` runs; `code` and `both` need Code Mode. Without it they fail with exit 2
/// before any session is written; with it, a direct native call is refused in `code` only and
/// a `run_code` program reaches the tools in both.
#[test]
fn mode_native_runs_and_code_modes_need_code_mode() {
    let t = tmp();
    let sc = echo_script(t.path());
    let native = t.path().join("native");
    std::fs::create_dir(&native).unwrap();
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(&native),
        "--demo-tools",
        "--mode",
        "native",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert_eq!(default_sessions(&native).len(), 1);

    let policy = t.path().join("code.toml");
    std::fs::write(&policy, "mode = \"code\"\n").unwrap();
    let runs: [(&str, Vec<&str>); 3] = [
        ("code", vec!["--mode", "code"]),
        ("both", vec!["--mode", "both"]),
        ("code", vec!["--policy", s(&policy)]),
    ];
    for (i, (mode, extra)) in runs.iter().enumerate() {
        let ws = t.path().join(format!("m{i}"));
        std::fs::create_dir(&ws).unwrap();
        let mut args = vec!["run", s(&sc), "--workspace", s(&ws), "--demo-tools"];
        args.extend(extra);
        let out = dsh_run(&args);
        if out.code == 2 {
            assert!(out.stderr.contains("Code Mode"), "{}", out.both());
            assert!(
                out.stderr.contains(&format!("\"{mode}\"")),
                "{}",
                out.both()
            );
            assert!(
                default_sessions(&ws).is_empty(),
                "mode {mode}: a session was written"
            );
        } else {
            assert_eq!(out.code, 0, "{}", out.both());
            let log = &default_sessions(&ws)[0];
            assert_checks_clean(log);
            let echo = result_of(&events(log), "c1");
            if *mode == "code" {
                assert_eq!(echo.code.as_deref(), Some("UNKNOWN_TOOL"), "{echo:?}");
                assert!(echo.text.contains("run_code"), "{echo:?}");
            } else {
                assert_eq!(echo.text, "hello");
            }
            run_code_reaches_the_tools(&ws, extra);
        }
    }
}

/// With Code Mode: a `run_code` program calls the tools; each sub-call is logged as a
/// `tool/code-dispatch` pair and the program's value is the one result (CODE-34).
fn run_code_reaches_the_tools(ws: &std::path::Path, extra: &[&str]) {
    let sc = script(
        ws,
        "code.jsonl",
        &[anthropic(
            "",
            &[call(
                "rc",
                "run_code",
                json!({
                    "description": "echo twice",
                    "code": "const a = await tools.echo({text: 'one'}); \
                             const b = await tools.echo({text: 'two'}); return a + '+' + b;"
                }),
            )],
        )],
    );
    let log = ws.join("code.log");
    let mut args = vec![
        "run",
        s(&sc),
        "--workspace",
        s(ws),
        "--session",
        s(&log),
        "--demo-tools",
    ];
    args.extend(extra);
    let out = dsh_run(&args);
    assert_eq!(out.code, 0, "{}", out.both());
    assert_checks_clean(&log);
    let ev = events(&log);
    assert_eq!(result_of(&ev, "rc").text, "one+two");
    let subs: Vec<&str> = of_type(&ev, "tool/code-dispatch")
        .into_iter()
        .map(|e| e["data"]["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(subs, ["one", "two"]);
    assert_eq!(of_type(&ev, "tool/code-dispatch-start").len(), 2);
}

#[test]
fn demo_tools_are_absent_unless_asked_for() {
    let t = tmp();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai(
            "",
            &[
                call("e", "echo", json!({"text": "hi there"})),
                call("s", "sleep", json!({"ms": 30})),
                call("f", "fail", json!({"message": "kaboom"})),
            ],
        )],
    );
    let without = t.path().join("without.jsonl");
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&without),
    ]);
    assert_eq!(out.code, 0, "tool failures are results: {}", out.both());
    for r in results(&events(&without)) {
        assert_eq!(r.code.as_deref(), Some("UNKNOWN_TOOL"), "{r:?}");
    }

    let with = t.path().join("with.jsonl");
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&with),
        "--demo-tools",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&with);
    assert_eq!(result_of(&ev, "e").text, "hi there");
    let slept: Value = serde_json::from_str(&result_of(&ev, "s").text).unwrap();
    assert_eq!(slept["requested_ms"], 30);
    assert!(slept["elapsed_ms"].as_u64().unwrap() >= 30, "{slept}");
    let failed = result_of(&ev, "f");
    assert!(failed.is_error);
    assert_eq!(failed.text, "Error: kaboom");
    assert_eq!(failed.code, None);
    assert!(out.stdout.contains("✗ fail kaboom"), "{}", out.stdout);
    assert!(out.stdout.contains("✓ echo hi there"), "{}", out.stdout);
    assert!(out.stderr.contains("3 calls, 1 failed"), "{}", out.stderr);
}

/// `--json`: one object per line, each a durable event with its seq, exactly the log's events.
#[test]
fn json_lines_are_the_logs_events_with_their_seqs() {
    let t = tmp();
    let policy = t.path().join("p.toml");
    std::fs::write(&policy, ASK_ECHO).unwrap();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[
            openai("first", &[call("c1", "echo", json!({"text": "one"}))]),
            anthropic(
                "second",
                &[
                    call("c2", "echo", json!({"text": "two"})),
                    call("c3", "sleep", json!({"ms": 10})),
                    call("c4", "fail", json!({"message": "x"})),
                ],
            ),
            openai("bye", &[]),
        ],
    );
    let log = t.path().join("log.jsonl");
    let out = run_with(
        dsh().args([
            "run",
            s(&sc),
            "--workspace",
            s(t.path()),
            "--session",
            s(&log),
            "--policy",
            s(&policy),
            "--approve",
            "ask",
            "--demo-tools",
            "--json",
        ]),
        Some("y\nn\n"),
    );
    assert_eq!(out.code, 0, "{}", out.both());
    let lines = json_lines(&out.stdout);
    let logged = events(&log);
    assert_eq!(lines.len(), logged.len());
    for (i, (mut line, logged)) in lines.into_iter().zip(logged).enumerate() {
        let seq = line.as_object_mut().unwrap().remove("seq");
        assert_eq!(seq, Some(json!(i)), "{line}");
        assert_eq!(line, logged, "event {i}");
    }
    // The approval audit pair is among them.
    let ev = events(&log);
    assert_eq!(of_type(&ev, "approval/asked").len(), 2);
    assert!(
        !out.stdout.contains(" calls, "),
        "no human summary on stdout"
    );
}
