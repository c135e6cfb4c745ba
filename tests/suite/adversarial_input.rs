//! Adversarial inputs through the real binary: 10 MB arguments, 100k-deep JSON (in arguments, in
//! a script and in a log), invalid UTF-8 and 50 MB lines in a log, a 10k-character tool name and
//! NUL bytes in paths. Each gets a clear error or a safe result, and every log left checks clean.

use std::path::Path;

use serde_json::json;

use super::support::*;

fn run_script(t: &Path, lines: &[String], extra: &[&str]) -> (Out, std::path::PathBuf) {
    let sc = script(t, "s.jsonl", lines);
    let ws = t.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let log = t.join("log.jsonl");
    let mut args = vec![
        "run",
        s(&sc),
        "--demo-tools",
        "--workspace",
        s(&ws),
        "--session",
        s(&log),
    ];
    args.extend_from_slice(extra);
    (dsh_run(&args), log)
}

const HEADER: &str = r#"{"type":"session","version":0,"id":"adv","createdAt":0,"cwd":"/"}"#;

fn deep(levels: usize) -> String {
    let mut s = "[".repeat(levels);
    s.push_str(&"]".repeat(levels));
    s
}

/// The log's lines of one event type, parsed one by one (a 30 MB log is not parsed whole).
fn lines_of_type(log: &Path, ty: &str) -> Vec<serde_json::Value> {
    let needle = format!("{{\"type\":\"{ty}\"");
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with(&needle))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn adv_10mb_arguments_run_and_the_log_keeps_them_whole() {
    let t = tmp();
    let text = "x".repeat(10 << 20);
    let (out, log) = run_script(
        t.path(),
        &[openai("", &[call("big", "echo", json!({ "text": text }))])],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.both());
    // The terminal line summarizes the arguments; it never prints 10 MB.
    assert!(out.stdout.len() < 1000, "{} bytes", out.stdout.len());
    let calls = lines_of_type(&log, "tool/call");
    assert_eq!(
        calls[0]["data"]["arguments"].as_str().unwrap().len(),
        text.len() + r#"{"text":""}"#.len()
    );
    let result = &lines_of_type(&log, "tool/result")[0]["data"]["message"]["content"][0];
    assert_eq!(result["isError"], false, "{}", out.both());
    assert_eq!(
        result["content"][0]["text"].as_str().map(str::len),
        Some(10 << 20)
    );
    assert_checks_clean(&log);
}

#[test]
fn adv_100k_deep_arguments_fail_the_call_with_a_clear_error() {
    let t = tmp();
    // OpenAI shape: the arguments are a string; the call is logged verbatim and refused by the
    // tool's validation with the reason.
    let line = json!({"role": "assistant", "tool_calls": [
        {"id": "deep", "type": "function", "function": {"name": "echo", "arguments": deep(100_000)}}
    ]})
    .to_string();
    let (out, log) = run_script(t.path(), &[line], &["--json"]);
    assert_eq!(out.code, 0, "{}", out.both());
    let events = events(&log);
    let r = result_of(&events, "deep");
    assert!(r.is_error);
    assert_eq!(r.code.as_deref(), Some("INVALID_ARGS"), "{r:?}");
    assert!(r.text.contains("nests deeper than"), "{}", r.text);
    assert_eq!(
        of_type(&events, "tool/call")[0]["data"]["arguments"]
            .as_str()
            .unwrap()
            .len(),
        200_000
    );
    assert_checks_clean(&log);
}

#[test]
fn adv_100k_deep_input_in_a_script_is_refused_naming_its_line() {
    let t = tmp();
    // Anthropic shape: `input` is JSON inside the script line itself.
    let inner = format!("{{\"a\":{}}}", deep(100_000));
    let line = format!(
        r#"{{"role":"assistant","content":[{{"type":"tool_use","id":"d","name":"echo","input":{inner}}}]}}"#
    );
    let (out, log) = run_script(t.path(), &[line], &[]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("script line 1"), "{}", out.both());
    assert!(out.stderr.contains("deeper"), "{}", out.both());
    assert!(!log.exists(), "a refused script writes no session");
}

/// A log with a header, an open turn, then `line` as line 3, then a closed turn.
fn log_with(t: &Path, line: &[u8], then_more: bool) -> std::path::PathBuf {
    let path = t.join("bad.jsonl");
    let mut bytes =
        format!("{HEADER}\n{{\"type\":\"turn/start\",\"data\":{{\"turn\":1}}}}\n").into_bytes();
    bytes.extend_from_slice(line);
    if then_more {
        bytes.extend_from_slice(
            b"\n{\"type\":\"turn/end\",\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}\n",
        );
    }
    std::fs::write(&path, &bytes).unwrap();
    path
}

/// `check` reports line 3 (containing `what`), `repair` and `transcript` refuse with the line,
/// and nothing changes the file.
fn assert_line_3_refused(log: &Path, what: &str) {
    let before = std::fs::read(log).unwrap();
    let check = dsh_run(&["check", s(log)]);
    assert_eq!(check.code, 1, "{}", check.both());
    assert!(
        check.stdout.contains(&format!("{}:3: ", log.display())) && check.stdout.contains(what),
        "{}",
        check.both()
    );
    for cmd in ["repair", "transcript"] {
        let out = dsh_run(&[cmd, s(log)]);
        assert_eq!(out.code, 1, "{cmd}: {}", out.both());
        assert!(out.stderr.contains("line 3"), "{cmd}: {}", out.both());
    }
    assert_eq!(std::fs::read(log).unwrap(), before, "the log was changed");
}

#[test]
fn adv_100k_deep_json_in_a_log_is_reported_not_overflowed() {
    let t = tmp();
    let line = format!(
        r#"{{"type":"user/message","data":{{"x":{}}}}}"#,
        deep(100_000)
    );
    let log = log_with(t.path(), line.as_bytes(), true);
    assert_line_3_refused(&log, "deeper");
    // Resuming such a log is refused too, and leaves it as it was.
    let before = std::fs::read(&log).unwrap();
    let sc = script(t.path(), "s.jsonl", &[openai("hi", &[])]);
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&log),
    ]);
    assert_eq!(out.code, 1, "{}", out.both());
    assert!(out.stderr.contains("line 3"), "{}", out.both());
    assert_eq!(std::fs::read(&log).unwrap(), before);
    // As a torn last line, repair cuts it.
    let torn = log_with(t.path(), line.as_bytes(), false);
    let out = dsh_run(&["repair", s(&torn)]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(
        out.stdout.contains("cut a torn last line"),
        "{}",
        out.both()
    );
    assert_checks_clean(&torn);
}

#[test]
fn adv_invalid_utf8_in_a_log_is_reported_with_its_line() {
    let t = tmp();
    let line = b"{\"type\":\"user/message\",\"data\":{\"text\":\"caf\xe9 \xff\xfe\"}}";
    let log = log_with(t.path(), line, true);
    assert_line_3_refused(&log, "not valid UTF-8");
    let torn = log_with(t.path(), b"{\"type\":\"turn/e\xff", false);
    let out = dsh_run(&["repair", s(&torn)]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert_checks_clean(&torn);
}

#[test]
fn adv_a_50mb_log_line_checks_clean_and_needs_no_repair() {
    let t = tmp();
    let log = t.path().join("big.jsonl");
    let text = "y".repeat(50 << 20);
    let result = format!(
        r#"{{"type":"tool/result","data":{{"turn":1,"step":1,"message":{{"source":{{"kind":"tool","callId":"c1"}},"content":[{{"type":"tool-result","toolCallId":"c1","content":[{{"type":"text","text":"{text}"}}],"isError":false}}],"role":"user","id":"m1"}}}},"sourceEventSeqs":[2],"surfaceOp":"append"}}"#
    );
    drop(text);
    let lines = [
        HEADER,
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
        r#"{"type":"tool/call","data":{"turn":1,"step":1,"callId":"c1","name":"echo","arguments":"{}"}}"#,
        &result,
        r#"{"type":"step/end","data":{"turn":1,"step":1}}"#,
        r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ];
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    drop(result);
    assert_checks_clean(&log);
    let out = dsh_run(&["repair", s(&log)]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(out.stdout.contains("nothing to repair"), "{}", out.both());
}

#[test]
fn adv_a_50mb_log_line_that_is_not_an_event_is_one_problem_on_its_line() {
    let t = tmp();
    let garbage = t.path().join("garbage.jsonl");
    let mut bytes = format!("{HEADER}\n").into_bytes();
    bytes.extend(std::iter::repeat_n(b'7', 50 << 20));
    bytes.extend_from_slice(b"\n{\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n");
    std::fs::write(&garbage, &bytes).unwrap();
    let out = dsh_run(&["check", s(&garbage)]);
    assert_eq!(out.code, 1, "{}", out.both());
    assert!(
        out.stdout
            .starts_with(&format!("{}:2: ", garbage.display())),
        "{}",
        out.both()
    );
    // The problem does not quote the line, and it is the only one.
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.both());
    assert!(out.stdout.len() < 2000, "{} bytes", out.stdout.len());
}

#[test]
fn adv_duplicate_call_ids_in_a_script_are_refused_in_both_shapes() {
    let t = tmp();
    let twice = [
        call("same", "echo", json!({"text": "a"})),
        call("same", "echo", json!({"text": "b"})),
    ];
    for line in [openai("", &twice), anthropic("", &twice)] {
        let (out, log) = run_script(t.path(), &[line], &[]);
        assert_eq!(out.code, 2, "{}", out.both());
        assert!(
            out.stderr.contains("script line 1")
                && out.stderr.contains("duplicate tool call id \"same\""),
            "{}",
            out.both()
        );
        assert!(!log.exists());
    }
}

#[test]
fn adv_a_10k_character_tool_name_is_an_unknown_tool_shown_short() {
    let t = tmp();
    let name = "n".repeat(10_000);
    let (out, log) = run_script(
        t.path(),
        &[openai("", &[call("long", &name, json!({}))])],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.both());
    let events = events(&log);
    let r = result_of(&events, "long");
    assert!(r.is_error);
    assert_eq!(r.code.as_deref(), Some("UNKNOWN_TOOL"), "{r:?}");
    assert_eq!(
        of_type(&events, "tool/call")[0]["data"]["name"],
        name.as_str()
    );
    // The terminal line cuts the name and the message.
    let line = out.stdout.lines().next().unwrap();
    assert!(
        line.chars().count() < 400,
        "{} characters",
        line.chars().count()
    );
    assert_checks_clean(&log);
}

#[test]
fn adv_nul_bytes_in_paths_fail_the_call_and_touch_nothing() {
    let t = tmp();
    let calls = [
        call(
            "w",
            "write",
            json!({"file_path": "a\u{0}b.txt", "content": "x"}),
        ),
        call("r", "read", json!({"file_path": "notes\u{0}.txt"})),
        call(
            "e",
            "edit",
            json!({"file_path": "\u{0}", "old_string": "a", "new_string": "b"}),
        ),
        call("g", "glob", json!({"pattern": "*\u{0}*"})),
    ];
    let (out, log) = run_script(t.path(), &[anthropic("", &calls)], &[]);
    assert_eq!(out.code, 0, "{}", out.both());
    let events = events(&log);
    for id in ["w", "r", "e"] {
        let r = result_of(&events, id);
        assert!(r.is_error, "{id}: {r:?}");
        assert_eq!(r.code.as_deref(), Some("FS_INVALID_PATH"), "{id}: {r:?}");
        assert!(r.text.contains("NUL"), "{id}: {}", r.text);
    }
    // glob either refuses the pattern or finds nothing; it never fails the run.
    let _ = result_of(&events, "g");
    let left: Vec<_> = std::fs::read_dir(t.path().join("ws"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_checks_clean(&log);
}

/// Found while building this suite: a tool input nested just under the depth limit overflowed
/// the stack while the script was read (a recursive copy), while the call line was rendered
/// (a recursive print and drop on the log's writer thread) and while the transcript was printed.
#[test]
fn adv_19k_deep_input_runs_renders_and_transcribes_without_overflow() {
    let t = tmp();
    let inner = format!("{{\"a\":{}}}", deep(19_000));
    let line = format!(
        r#"{{"role":"assistant","content":[{{"type":"tool_use","id":"d","name":"echo","input":{inner}}}]}}"#
    );
    for (i, mode) in [&[][..], &["--json"][..]].into_iter().enumerate() {
        let dir = t.path().join(format!("m{i}"));
        std::fs::create_dir(&dir).unwrap();
        let (out, log) = run_script(&dir, std::slice::from_ref(&line), mode);
        assert_eq!(out.code, 0, "{mode:?}: {}", out.both());
        // The log keeps arguments as strings, so its lines parse shallow.
        let events = events(&log);
        let r = result_of(&events, "d");
        assert_eq!(r.code.as_deref(), Some("INVALID_ARGS"), "{r:?}");
        assert_checks_clean(&log);
        for format in ["dsh", "openai", "anthropic"] {
            let tr = dsh_run(&["transcript", s(&log), "--format", format]);
            assert_eq!(tr.code, 0, "{format}: {}", tr.both());
            assert!(tr.stdout.len() > 19_000 * 2, "{format}");
        }
    }
}

#[test]
fn adv_a_deep_role_or_content_is_refused_without_printing_it() {
    let t = tmp();
    for (key, what) in [("role", "role must be"), ("content", "content must be")] {
        let line = format!(r#"{{"{key}":{{"a":{}}}}}"#, deep(19_000));
        let (out, _) = run_script(t.path(), &[line], &[]);
        assert_eq!(out.code, 2, "{}", out.both());
        assert!(
            out.stderr.contains(what) && out.stderr.contains("a deeply nested object"),
            "{}",
            out.both()
        );
        assert!(out.stderr.len() < 500, "{} bytes", out.stderr.len());
    }
}

#[test]
fn adv_a_torn_last_line_leaves_the_transcript_of_the_complete_lines_with_a_warning() {
    // A crash mid-append tears the last line: the history is that of the lines before it (what
    // a resume sends the model), with a warning, not a refusal.
    let t = tmp();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[
            openai("", &[call("e", "echo", serde_json::json!({"text": "hi"}))]),
            openai("done", &[]),
        ],
    );
    let log = t.path().join("run.jsonl");
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--demo-tools",
        "--session",
        s(&log),
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    let bytes = std::fs::read(&log).unwrap();
    let body = &bytes[..bytes.len() - 1];
    let last = body.iter().rposition(|&b| b == b'\n').unwrap() + 1;
    let whole = t.path().join("whole.jsonl");
    std::fs::write(&whole, &bytes[..last]).unwrap();
    let torn = t.path().join("torn.jsonl");
    std::fs::write(&torn, &bytes[..last + (bytes.len() - last) / 2]).unwrap();
    for format in ["openai", "anthropic", "dsh"] {
        let expected = dsh_run(&["transcript", s(&whole), "--format", format]);
        assert_eq!(expected.code, 0, "{}", expected.both());
        let got = dsh_run(&["transcript", s(&torn), "--format", format]);
        assert_eq!(got.code, 0, "{}", got.both());
        assert_eq!(got.stdout, expected.stdout, "{format}");
        assert!(got.stdout.contains("hi"), "{}", got.stdout);
        let line = bytes[..last].iter().filter(|&&b| b == b'\n').count() + 1;
        assert!(
            got.stderr.contains("warning") && got.stderr.contains(&format!("line {line}")),
            "{}",
            got.both()
        );
    }
}
