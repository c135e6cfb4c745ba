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

#[test]
fn fs_78_an_image_read_in_a_program_is_deferred_onto_the_outer_result() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    // A 1×1 PNG.
    let png: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
    std::fs::write(ws.join("pixel.png"), png).unwrap();
    let sc = script(
        t.path(),
        "code.jsonl",
        &[anthropic(
            "",
            &[run_code(
                "look",
                "const r = await tools.read({file_path: 'pixel.png'}); return r.type",
            )],
        )],
    );
    let log = t.path().join("s.jsonl");
    let out = run(dsh().args([
        "run",
        s(&sc),
        "--workspace",
        s(&ws),
        "--session",
        s(&log),
        "--mode",
        "code",
    ]));
    assert_eq!(out.code, 0, "{}", out.both());
    assert_checks_clean(&log);
    let ev = events(&log);
    let result = of_type(&ev, "tool/result")
        .into_iter()
        .find(|e| e["data"]["message"]["content"][0]["toolCallId"] == "look")
        .unwrap()
        .clone();
    let text = result_of(&ev, "look").text;
    assert!(text.contains("image"), "{text}");
    let outer = result["data"]["message"]["content"][0]["content"].clone();
    assert!(
        outer
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["type"] == "text"),
        "the outer result is text only: {outer}"
    );
    let shown = serde_json::to_string(&result).unwrap();
    assert!(!shown.contains("image/png"), "{shown}");
    // Exactly one deferred context, logged after the results: the envelope, then the picture.
    let deferred: Vec<&serde_json::Value> = of_type(&ev, "user/message")
        .into_iter()
        .filter(|e| e.to_string().contains("<type>image</type>"))
        .collect();
    assert_eq!(deferred.len(), 1, "{ev:#?}");
    let blocks = deferred[0]["data"]["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert!(
        blocks[0]["text"]
            .as_str()
            .unwrap()
            .contains("<type>image</type>")
    );
    assert_eq!(blocks[1]["type"], "image");
    assert_eq!(blocks[1]["mimeType"], "image/png");
}
