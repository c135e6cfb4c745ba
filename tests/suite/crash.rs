//! Crashes and resumption: a `kill -9` mid-call leaves an unpaired `tool/call` that `dsh check`
//! reports and `dsh repair` closes (I4); a later run on the same log repairs it, resumes it and
//! continues the turn numbering.

use std::io::Write;
use std::path::Path;

use serde_json::json;

use super::support::*;

/// Starts a long sleep with `--json`, and kills the process with SIGKILL once its call is logged.
fn crash_mid_call(t: &Path, log: &Path) {
    let sc = script(
        t,
        "long.jsonl",
        &[anthropic(
            "",
            &[call("long", "sleep", json!({"ms": 20_000}))],
        )],
    );
    let mut live = Live::spawn(dsh().args([
        "run",
        s(&sc),
        "--workspace",
        s(t),
        "--session",
        s(log),
        "--demo-tools",
        "--json",
    ]));
    live.until(|l| l.contains("\"tool/call\""));
    live.child.kill().unwrap();
    live.child.wait().unwrap();
}

#[test]
fn kill_9_mid_call_then_check_repair_check() {
    let t = tmp();
    let log = t.path().join("log.jsonl");
    crash_mid_call(t.path(), &log);

    let before = dsh_run(&["check", s(&log)]);
    assert_eq!(before.code, 1, "{}", before.both());
    // The unpaired call is reported with the file and the line of its tool/call.
    let call_line = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .position(|l| l.contains("\"tool/call\""))
        .unwrap()
        + 1;
    assert!(
        before.stdout.contains(&format!(
            "{}:{call_line}: tool/call \"long\"",
            log.display()
        )),
        "{}",
        before.both()
    );
    assert!(
        before.stdout.contains("has no tool/result"),
        "{}",
        before.both()
    );

    let repair = dsh_run(&["repair", s(&log)]);
    assert_eq!(repair.code, 0, "{}", repair.both());
    assert!(repair.stdout.contains("repaired"), "{}", repair.both());
    assert!(
        repair.stdout.contains("closed call long") && repair.stdout.contains("INTERRUPTED"),
        "{}",
        repair.both()
    );
    assert!(repair.stdout.contains("closed turn 1"), "{}", repair.both());

    assert_checks_clean(&log);
    let ev = events(&log);
    assert_paired(&ev);
    assert_eq!(result_of(&ev, "long").code.as_deref(), Some("INTERRUPTED"));
    assert_eq!(
        of_type(&ev, "turn/end")[0]["data"]["reason"]["kind"],
        "interrupted"
    );

    // Repair is idempotent: a second one has nothing to do and leaves the bytes alone.
    let bytes = std::fs::read(&log).unwrap();
    let again = dsh_run(&["repair", s(&log)]);
    assert_eq!(again.code, 0);
    assert!(
        again.stdout.contains("nothing to repair"),
        "{}",
        again.both()
    );
    assert_eq!(std::fs::read(&log).unwrap(), bytes);
}

#[test]
fn a_run_on_a_crashed_log_repairs_resumes_and_keeps_stdout_json() {
    let t = tmp();
    let log = t.path().join("log.jsonl");
    crash_mid_call(t.path(), &log);
    let sc = script(
        t.path(),
        "next.jsonl",
        &[openai("", &[call("c1", "echo", json!({"text": "after"}))])],
    );
    let out = run_script(&sc, t.path(), &log, &["--demo-tools", "--json"]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(
        out.stderr.contains("repaired before resuming"),
        "{}",
        out.both()
    );
    assert!(out.stderr.contains("closed call long"), "{}", out.both());
    // Every stdout line is still one JSON event.
    let lines = json_lines(&out.stdout);
    assert_eq!(lines[0]["type"], "turn/start");
    assert_eq!(lines[0]["data"]["turn"], 2);
    assert_checks_clean(&log);
    let ev = events(&log);
    assert_eq!(result_of(&ev, "long").code.as_deref(), Some("INTERRUPTED"));
    assert_eq!(result_of(&ev, "c1").text, "after");
}

#[test]
fn resuming_continues_turn_numbering_seqs_and_what_was_read() {
    let t = tmp();
    std::fs::write(t.path().join("f.txt"), "alpha beta\n").unwrap();
    let log = t.path().join("log.jsonl");
    let read = script(
        t.path(),
        "read.jsonl",
        &[
            openai("", &[call("r", "read", json!({"file_path": "f.txt"}))]),
            openai("read it", &[]),
        ],
    );
    let edit = script(
        t.path(),
        "edit.jsonl",
        &[anthropic(
            "",
            &[call(
                "e",
                "edit",
                json!({"file_path": "f.txt", "old_string": "alpha", "new_string": "gamma"}),
            )],
        )],
    );
    let args = |sc: &Path| {
        vec![
            "run".to_owned(),
            s(sc).to_owned(),
            "--workspace".into(),
            s(t.path()).into(),
            "--session".into(),
            s(&log).into(),
            "--json".into(),
        ]
    };
    let first = run(dsh().args(args(&read)));
    assert_eq!(first.code, 0, "{}", first.both());
    let n_first = events(&log).len();
    let id = header(&log)["id"].clone();

    let second = run(dsh().args(args(&edit)));
    assert_eq!(second.code, 0, "{}", second.both());
    let lines = json_lines(&second.stdout);
    assert_eq!(lines[0]["seq"], n_first, "seqs continue");
    assert_eq!(lines[0]["data"]["turn"], 2, "turns continue");
    assert_eq!(header(&log)["id"], id, "the same session");
    assert_checks_clean(&log);

    // The read of the first run counts for the edit of the second (FS3 across a resume).
    let ev = events(&log);
    assert!(!result_of(&ev, "e").is_error, "{:?}", result_of(&ev, "e"));
    assert_eq!(
        std::fs::read_to_string(t.path().join("f.txt")).unwrap(),
        "gamma beta\n"
    );
    let turns: Vec<_> = of_type(&ev, "turn/start")
        .into_iter()
        .map(|e| e["data"]["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [1, 2]);
}

#[test]
fn a_torn_last_line_is_reported_then_cut_by_repair() {
    let t = tmp();
    let log = t.path().join("log.jsonl");
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai("", &[call("c", "echo", json!({"text": "x"}))])],
    );
    let out = run_script(&sc, t.path(), &log, &["--demo-tools"]);
    assert_eq!(out.code, 0, "{}", out.both());
    let lines = std::fs::read_to_string(&log).unwrap().lines().count();
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(b"{\"type\":\"turn/start\",\"da").unwrap();
    drop(f);

    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 1, "{}", check.both());
    assert!(
        check
            .stdout
            .contains(&format!("{}:{}:", log.display(), lines + 1)),
        "{}",
        check.both()
    );
    let repair = dsh_run(&["repair", s(&log)]);
    assert_eq!(repair.code, 0, "{}", repair.both());
    assert!(
        repair.stdout.contains("cut a torn last line"),
        "{}",
        repair.both()
    );
    assert_checks_clean(&log);
    assert_eq!(
        std::fs::read_to_string(&log).unwrap().lines().count(),
        lines
    );
}

/// A crash right after the assistant message: its calls were never recorded. `dsh check` tells a
/// running session from a dead one, and `dsh repair` answers every call the model made.
#[test]
fn i4_check_tells_a_live_session_from_a_dead_one_and_repair_answers_unrecorded_calls() {
    let t = tmp();
    let log = t.path().join("log.jsonl");
    crash_mid_call(t.path(), &log);
    // While a writer holds the log, the unanswered call is in flight, not a failure.
    let sc = script(
        t.path(),
        "again.jsonl",
        &[anthropic(
            "",
            &[call("later", "sleep", json!({"ms": 20_000}))],
        )],
    );
    let mut live = Live::spawn(dsh().args([
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&log),
        "--demo-tools",
        "--json",
    ]));
    live.until(|l| l.contains("\"tool/call\""));
    let running = dsh_run(&["check", s(&log)]);
    assert_eq!(running.code, 0, "{}", running.both());
    assert!(
        running.stdout.contains("still being written") && running.stdout.contains("in flight"),
        "{}",
        running.both()
    );
    // Its transcript says so too, and does not advise a repair the lock would refuse.
    let shown = dsh_run(&["transcript", s(&log)]);
    assert_eq!(shown.code, 0, "{}", shown.both());
    assert!(
        shown.stderr.contains(
            "is still being written (a running dsh holds its lock): 1 call(s) not answered yet"
        ) && !shown.stderr.contains("dsh repair"),
        "{}",
        shown.both()
    );
    live.child.kill().unwrap();
    live.child.wait().unwrap();
    let dead = dsh_run(&["check", s(&log)]);
    assert_eq!(dead.code, 1, "{}", dead.both());
    assert!(
        dead.stdout.contains("not being written") && dead.stdout.contains("dsh repair"),
        "{}",
        dead.both()
    );

    // Cut the log right after the second turn's assistant message: `later` was never recorded.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let message = lines
        .iter()
        .rposition(|l| l.contains("\"assistant/message\""))
        .unwrap();
    let cut = lines[..=message].join("\n") + "\n";
    std::fs::write(&log, cut).unwrap();
    let before = dsh_run(&["check", s(&log)]);
    assert_eq!(before.code, 1, "{}", before.both());
    assert!(
        before
            .stdout
            .contains("the model's call \"later\" (sleep) has no tool/call"),
        "{}",
        before.both()
    );
    let unrepaired = dsh_run(&["transcript", s(&log), "--format", "openai"]);
    assert_eq!(unrepaired.code, 0, "{}", unrepaired.both());
    assert!(
        unrepaired
            .stderr
            .contains("a provider may refuse this history")
            && unrepaired
                .stderr
                .contains(&format!("`dsh repair {}` answers the calls", log.display())),
        "{}",
        unrepaired.both()
    );
    let repair = dsh_run(&["repair", s(&log)]);
    assert_eq!(repair.code, 0, "{}", repair.both());
    assert!(
        repair.stdout.contains("answered call later") && repair.stdout.contains("never ran"),
        "{}",
        repair.both()
    );
    assert_checks_clean(&log);
    let ev = events(&log);
    assert_paired(&ev);
    assert_eq!(result_of(&ev, "later").code.as_deref(), Some("INTERRUPTED"));
    // The history a model would be sent answers every call it made.
    for format in ["openai", "anthropic"] {
        let out = dsh_run(&["transcript", s(&log), "--format", format]);
        assert_eq!(out.code, 0, "{}", out.both());
        let history: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        let check = if format == "openai" {
            dsh_test_support::api_history::openai_accepts(&history)
        } else {
            dsh_test_support::api_history::anthropic_accepts(&history)
        };
        check.unwrap_or_else(|e| panic!("{format} would refuse: {e}\n{}", out.stdout));
    }
}

#[test]
fn l5_a_script_reusing_a_call_id_is_refused_with_its_line_and_so_is_a_resume_reusing_one() {
    let t = tmp();
    let log = t.path().join("log.jsonl");
    let sc = script(
        t.path(),
        "dup.jsonl",
        &[
            anthropic("", &[call("c1", "echo", json!({"text": "a"}))]),
            anthropic("", &[call("c1", "echo", json!({"text": "b"}))]),
            anthropic("done", &[]),
        ],
    );
    let out = run_script(&sc, t.path(), &log, &["--demo-tools"]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(
        out.stderr.contains("script line 2") && out.stderr.contains("already used on line 1"),
        "{}",
        out.both()
    );
    assert!(!log.exists(), "nothing ran");

    let first = script(
        t.path(),
        "first.jsonl",
        &[
            anthropic("", &[call("c1", "echo", json!({}))]),
            anthropic("ok", &[]),
        ],
    );
    let ok = run_script(&first, t.path(), &log, &["--demo-tools"]);
    assert_eq!(ok.code, 0, "{}", ok.both());
    let resumed = run_script(&first, t.path(), &log, &["--demo-tools"]);
    assert_eq!(resumed.code, 2, "{}", resumed.both());
    assert!(
        resumed.stderr.contains("script line 1")
            && resumed.stderr.contains("already used in the session"),
        "{}",
        resumed.both()
    );
    assert_checks_clean(&log);
}

#[test]
fn i4_resuming_a_log_cut_after_an_assistant_message_answers_its_calls_before_going_on() {
    let t = tmp();
    let log = t.path().join("log.jsonl");
    let first = script(
        t.path(),
        "first.jsonl",
        &[
            anthropic(
                "",
                &[call("a1", "echo", json!({})), call("a2", "echo", json!({}))],
            ),
            anthropic("ok", &[]),
        ],
    );
    let ok = run_script(&first, t.path(), &log, &["--demo-tools"]);
    assert_eq!(ok.code, 0, "{}", ok.both());
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let message = lines
        .iter()
        .position(|l| l.contains("\"assistant/message\""))
        .unwrap();
    std::fs::write(&log, lines[..=message].join("\n") + "\n").unwrap();
    let next = script(
        t.path(),
        "next.jsonl",
        &[
            anthropic("", &[call("b1", "echo", json!({}))]),
            anthropic("ok", &[]),
        ],
    );
    let resumed = run_script(&next, t.path(), &log, &["--demo-tools"]);
    assert_eq!(resumed.code, 0, "{}", resumed.both());
    assert!(
        resumed.stderr.contains("answered call a1") && resumed.stderr.contains("answered call a2"),
        "{}",
        resumed.both()
    );
    assert_checks_clean(&log);
    let ev = events(&log);
    assert_paired(&ev);
    assert_eq!(call_ids(&ev), ["a1", "a2", "b1"]);
}
