//! `dsh check`, `dsh transcript` and `dsh repair` on logs: the reference fixtures in all three
//! formats, logs this program wrote, and malformed logs (problems with file and line).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::support::*;

/// The reference session logs: the shared copy, else the one the session crate keeps.
fn fixtures() -> Option<Vec<PathBuf>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let candidates = [
        PathBuf::from("/work/shared/fixtures/reference-sessions"),
        root.join("crates/session/tests/fixtures/reference-sessions"),
    ];
    let dir = candidates.iter().find(|d| d.is_dir())?;
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    v.sort();
    Some(v)
}

fn transcript(log: &Path, format: &str) -> Value {
    let out = dsh_run(&["transcript", s(log), "--format", format]);
    assert_eq!(out.code, 0, "{} {format}: {}", log.display(), out.both());
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{} {format}: not JSON ({e})", log.display()))
}

fn list(v: &Value) -> &Vec<Value> {
    v.as_array()
        .expect("a transcript is a JSON array of messages")
}

/// Blocks of `ty` in a content array, the value of `key` of each.
fn blocks<'a>(messages: &'a [Value], ty: &str, key: &str) -> Vec<&'a str> {
    messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == ty)
        .map(|b| b[key].as_str().unwrap())
        .collect()
}

/// The `callId` of every `tool/call` line of a reference log (read here, not by `dsh`).
fn logged_calls(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "tool/call")
        .map(|e| e["data"]["callId"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn transcript_of_every_reference_log_in_all_three_formats() {
    let Some(logs) = fixtures() else {
        eprintln!(
            "skipped: no reference session logs found (shared or crates/session/tests/fixtures)"
        );
        return;
    };
    assert!(logs.len() >= 10, "{logs:?}");
    for log in &logs {
        let name = log.file_name().unwrap().to_str().unwrap();
        let calls = logged_calls(log);
        assert_checks_clean(log);

        // dsh: tool-call blocks are the log's calls, each answered by one result in order.
        let dsh = transcript(log, "dsh");
        let dsh = list(&dsh);
        assert_eq!(blocks(dsh, "tool-call", "id"), calls, "{name} dsh calls");
        assert_eq!(
            blocks(dsh, "tool-result", "toolCallId"),
            calls,
            "{name} dsh results"
        );
        assert!(
            dsh.iter()
                .all(|m| m["role"] == "user" || m["role"] == "assistant")
        );

        // OpenAI: assistant tool_calls, each answered by a `tool` message after it.
        let oa = transcript(log, "openai");
        let oa = list(&oa);
        let mut open: Vec<String> = Vec::new();
        let mut oa_calls = Vec::new();
        for m in oa {
            match m["role"].as_str().unwrap() {
                "assistant" => {
                    assert!(open.is_empty(), "{name}: unanswered {open:?}");
                    for c in m["tool_calls"].as_array().into_iter().flatten() {
                        assert_eq!(c["type"], "function");
                        assert!(c["function"]["arguments"].is_string(), "{name}");
                        open.push(c["id"].as_str().unwrap().to_owned());
                        oa_calls.push(c["id"].as_str().unwrap().to_owned());
                    }
                }
                "tool" => {
                    let id = m["tool_call_id"].as_str().unwrap();
                    let at = open.iter().position(|o| o == id);
                    assert!(at.is_some(), "{name}: tool message for unknown call {id}");
                    open.remove(at.unwrap());
                }
                "user" | "system" => {}
                other => panic!("{name}: role {other}"),
            }
        }
        assert!(open.is_empty(), "{name}: unanswered {open:?}");
        assert_eq!(oa_calls, calls, "{name} openai calls");

        // Anthropic: roles alternate, starting with the user; each tool_use is answered in the
        // next user message.
        let an = transcript(log, "anthropic");
        let an = list(&an);
        assert_eq!(an[0]["role"], "user", "{name}");
        for w in an.windows(2) {
            assert_ne!(w[0]["role"], w[1]["role"], "{name}: roles must alternate");
        }
        for (i, m) in an.iter().enumerate() {
            let uses: HashSet<&str> = blocks(std::slice::from_ref(m), "tool_use", "id")
                .into_iter()
                .collect();
            if uses.is_empty() {
                continue;
            }
            let answers: HashSet<&str> = an
                .get(i + 1)
                .map(|n| blocks(std::slice::from_ref(n), "tool_result", "tool_use_id"))
                .unwrap_or_default()
                .into_iter()
                .collect();
            assert_eq!(uses, answers, "{name}: message {i}");
        }
        assert_eq!(
            blocks(an, "tool_use", "id"),
            calls,
            "{name} anthropic calls"
        );
    }
}

#[test]
fn transcript_of_a_run_shows_what_the_model_would_see() {
    let t = tmp();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[
            openai(
                "let me echo",
                &[call("c1", "echo", json!({"text": "hello"}))],
            ),
            openai("done", &[]),
        ],
    );
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

    let oa = transcript(&log, "openai");
    let oa = list(&oa);
    assert_eq!(oa.len(), 3, "{oa:#?}");
    assert_eq!(oa[0]["content"], "let me echo");
    assert_eq!(
        oa[0]["tool_calls"][0]["function"]["arguments"],
        "{\"text\":\"hello\"}"
    );
    assert_eq!(
        oa[1],
        json!({"role": "tool", "tool_call_id": "c1", "content": "hello"})
    );
    assert_eq!(oa[2], json!({"role": "assistant", "content": "done"}));

    let an = transcript(&log, "anthropic");
    let an = list(&an);
    assert_eq!(an[0]["content"][1]["input"], json!({"text": "hello"}));
    assert_eq!(an[1]["content"][0]["tool_use_id"], "c1");

    // The default format is the harness's own.
    let default = dsh_run(&["transcript", s(&log)]);
    assert_eq!(default.code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&default.stdout).unwrap(),
        transcript(&log, "dsh")
    );
    let bad = dsh_run(&["transcript", s(&log), "--format", "xml"]);
    assert_eq!(bad.code, 2, "{}", bad.both());
}

/// A log this program wrote, with line `n` (1-based) replaced.
fn log_with_line(t: &Path, n: usize, replacement: Option<&str>) -> PathBuf {
    let sc = script(
        t,
        "s.jsonl",
        &[openai(
            "",
            &[
                call("c1", "echo", json!({"text": "a"})),
                call("c2", "echo", json!({"text": "b"})),
            ],
        )],
    );
    let good = t.join("good.jsonl");
    if !good.exists() {
        let out = dsh_run(&[
            "run",
            s(&sc),
            "--workspace",
            s(t),
            "--session",
            s(&good),
            "--demo-tools",
        ]);
        assert_eq!(out.code, 0, "{}", out.both());
    }
    let text = std::fs::read_to_string(&good).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    match replacement {
        Some(r) => lines[n - 1] = r,
        None => {
            lines.remove(n - 1);
        }
    }
    let path = t.join(format!("bad-{n}-{}.jsonl", replacement.is_some()));
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn check_reports_malformed_lines_with_file_and_line() {
    let t = tmp();
    // Line 6 is garbage.
    let garbage = log_with_line(t.path(), 6, Some("garbage {"));
    let out = dsh_run(&["check", s(&garbage)]);
    assert_eq!(out.code, 1, "{}", out.both());
    assert!(
        out.stdout
            .contains(&format!("{}:6: invalid JSON", garbage.display())),
        "{}",
        out.both()
    );

    // A missing result: the call (on line 5) is reported unpaired.
    let text = std::fs::read_to_string(t.path().join("good.jsonl")).unwrap();
    let result_line = text
        .lines()
        .position(|l| l.contains("\"tool/result\""))
        .unwrap()
        + 1;
    let call_line = text
        .lines()
        .position(|l| l.contains("\"tool/call\""))
        .unwrap()
        + 1;
    let unpaired = log_with_line(t.path(), result_line, None);
    let out = dsh_run(&["check", s(&unpaired)]);
    assert_eq!(out.code, 1, "{}", out.both());
    assert!(
        out.stdout.contains(&format!(
            "{}:{call_line}: tool/call \"c1\"",
            unpaired.display()
        )),
        "{}",
        out.both()
    );

    // Several logs: each reported, the clean one as ok, exit 1 for the lot.
    let good = t.path().join("good.jsonl");
    let out = dsh_run(&["check", s(&good), s(&garbage)]);
    assert_eq!(out.code, 1, "{}", out.both());
    assert!(out.stdout.contains(&format!("{}: ok", good.display())));
    assert!(out.stdout.contains(&format!("{}:6:", garbage.display())));
    let out = dsh_run(&["check", s(&good), s(&good)]);
    assert_eq!(out.code, 0, "{}", out.both());

    // A log that cannot be read.
    let missing = t.path().join("missing.jsonl");
    let out = dsh_run(&["check", s(&missing)]);
    assert_eq!(out.code, 1, "{}", out.both());
    assert!(out.stdout.contains("missing.jsonl"), "{}", out.both());

    // Transcript of a malformed log fails, naming the line.
    let out = dsh_run(&["transcript", s(&garbage)]);
    assert_eq!(out.code, 1, "{}", out.both());
    assert!(out.stderr.contains("line 6"), "{}", out.both());
}

#[test]
fn check_needs_at_least_one_log() {
    let out = dsh_run(&["check"]);
    assert_eq!(out.code, 2, "{}", out.both());
}

#[test]
fn output_lost_to_a_full_disk_is_an_error_and_a_closed_pipe_is_not() {
    // `dsh transcript LOG > /dev/full` said nothing and exited 0: the transcript was lost.
    let t = tmp();
    let sc = script(t.path(), "s.jsonl", &[openai("done", &[])]);
    let log = t.path().join("log.jsonl");
    let ran = run_script(&sc, t.path(), &log, &[]);
    assert_eq!(ran.code, 0, "{}", ran.both());
    let full = std::fs::File::create("/dev/full").expect("/dev/full");
    for args in [vec!["transcript", s(&log)], vec!["check", s(&log)]] {
        let out = dsh()
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(full.try_clone().unwrap())
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("dsh: cannot write to standard output: No space left on device"),
            "{args:?}: {stderr}"
        );
    }
    // A reader that stopped reading (`| head`) is its own choice: no message, the code stays.
    let mut child = dsh()
        .args(["transcript", s(&log)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}
