//! Code Mode as `dsh run` shows it to the model (issue 17, item 5): an unknown tool named with
//! the tools there are, no empty `Captured output:`, long output capped like `bash` output.

use serde_json::json;

use super::support::*;

fn run_code(id: &str, code: &str) -> Call {
    call(id, "run_code", json!({"description": "test", "code": code}))
}

#[test]
fn issue17_5_run_code_unknown_tool_no_empty_label_and_capped_output() {
    let t = tmp();
    let ws = t.path().join("ws");
    let scratch = t.path().join("tmp");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&scratch).unwrap();
    let sc = script(
        t.path(),
        "code.jsonl",
        &[anthropic(
            "",
            &[
                run_code("unknown", "return await tools.ech({text: 'x'})"),
                run_code("quiet", "throw new Error('boom')"),
                run_code(
                    "long",
                    "for (let i = 0; i < 3000; i++) console.log('row ' + i + ' ' + 'y'.repeat(30)); \
                     return 'done'",
                ),
            ],
        )],
    );
    let log = t.path().join("s.jsonl");
    let out = run(dsh()
        .args([
            "run",
            s(&sc),
            "--workspace",
            s(&ws),
            "--session",
            s(&log),
            "--demo-tools",
            "--mode",
            "code",
        ])
        .env("TMPDIR", &scratch));
    assert_eq!(out.code, 0, "{}", out.both());
    assert_checks_clean(&log);
    let ev = events(&log);
    let unknown = result_of(&ev, "unknown");
    let (_, listed) = unknown
        .text
        .split_once("ToolCallError: unknown tool \"ech\"; tools: ")
        .unwrap();
    assert!(listed.split(", ").any(|n| n == "echo"), "{unknown:?}");
    assert!(!unknown.text.contains("not a function"), "{unknown:?}");
    assert_eq!(
        result_of(&ev, "quiet").text,
        "Error: code run failed (exception): Error: boom"
    );
    let long = result_of(&ev, "long");
    let (note, kept) = long.text.split_once('\n').unwrap();
    assert!(
        note.starts_with("[output truncated: showing the last "),
        "{note}"
    );
    assert!(kept.len() <= 30_000, "{}", kept.len());
    assert!(kept.ends_with("\ndone"));
    let file = note
        .split("full output: ")
        .nth(1)
        .and_then(|p| p.strip_suffix(']'))
        .unwrap();
    assert!(file.starts_with(s(&scratch)), "{file}");
    let whole = std::fs::read_to_string(file).unwrap();
    assert!(whole.starts_with("row 0 yyy"));
    assert_eq!(whole.lines().count(), 3001);
}
