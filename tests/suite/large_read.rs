//! `read` of a file over the size cap (issue 17 item 6): with `offset`/`limit` it returns those
//! lines, streamed; without them it is still `FS_TOO_LARGE`, saying how to read a window.

use std::io::Write;

use serde_json::json;

use super::support::*;

#[test]
fn issue17_6_read_with_offset_streams_a_file_over_the_cap() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let big = ws.join("big.log");
    let lines: u64 = 1_100_000;
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
        for i in 1..=lines {
            writeln!(f, "line {i:>9} {}", "x".repeat(50)).unwrap();
        }
    }
    assert!(std::fs::metadata(&big).unwrap().len() > dsh::fs::MAX_FILE_BYTES);
    let sc = script(
        t.path(),
        "s.jsonl",
        &[anthropic(
            "",
            &[
                call(
                    "window",
                    "read",
                    json!({"file_path": "big.log", "offset": 1_000_000, "limit": 2}),
                ),
                call(
                    "last",
                    "read",
                    json!({"file_path": "big.log", "offset": lines, "limit": 5}),
                ),
                call("whole", "read", json!({"file_path": "big.log"})),
            ],
        )],
    );
    let log = t.path().join("s.log");
    let out = dsh_run(&["run", s(&sc), "--workspace", s(&ws), "--session", s(&log)]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    let window = result_of(&ev, "window");
    assert!(!window.is_error, "{window:?}");
    let pad = "x".repeat(50);
    assert!(
        window.text.contains(&format!(
            "1000000: line   1000000 {pad}\n1000001: line   1000001 {pad}\n"
        )),
        "{window:?}"
    );
    assert!(
        window
            .text
            .contains(&format!("(Showing lines 1000000-1000001 of {lines}.")),
        "{window:?}"
    );
    let last = result_of(&ev, "last");
    assert!(
        last.text
            .contains(&format!("(End of file - total {lines} lines)")),
        "{last:?}"
    );
    let whole = result_of(&ev, "whole");
    assert_eq!(whole.code.as_deref(), Some("FS_TOO_LARGE"), "{whole:?}");
    assert!(
        whole
            .text
            .ends_with("read a window of it with offset and limit"),
        "{whole:?}"
    );
}

/// A large argument is stored as often as the reference format requires and no more: once in
/// the `assistant/message` (its tool-call block) and once in the `tool/call`; the result's
/// `meta` diff is bounded.
#[test]
fn issue17_6_a_large_argument_is_stored_twice_as_the_reference_format_requires() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let content: String = (0..500_000).map(|i| format!("R{i:07}\n")).collect();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai(
            "",
            &[call(
                "w",
                "write",
                json!({"file_path": "big.txt", "content": content}),
            )],
        )],
    );
    let log = t.path().join("s.log");
    let out = dsh_run(&["run", s(&sc), "--workspace", s(&ws), "--session", s(&log)]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert_eq!(
        std::fs::read_to_string(ws.join("big.txt")).unwrap(),
        content
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let marker = "R0499999";
    let holders: Vec<String> = text
        .lines()
        .filter(|l| l.contains(marker))
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(holders, ["assistant/message", "tool/call"]);
    // Each copy is the argument text as the script held it (one JSON string escaping level).
    let once = std::fs::metadata(&sc).unwrap().len() as usize;
    assert!(
        text.len() < 2 * once + 1_000_000,
        "{} bytes for an argument written in {once}",
        text.len()
    );
}
