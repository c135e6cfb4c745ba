//! Issue 17 item 4: what reaches the terminal from tools and models: bidirectional controls are
//! neutralised like other control characters, and a `run_code` program's sub-call lines are
//! folded past a few.

use serde_json::json;

use super::support::*;

/// The bidirectional formatting characters ("Trojan Source"): they reorder what follows them.
const BIDI: [char; 9] = [
    '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}', '\u{2068}',
    '\u{2069}',
];

#[test]
fn bidi_controls_never_reach_the_terminal() {
    let t = tmp();
    let text: String = BIDI.iter().map(|c| format!("x{c}")).collect();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai(
            "",
            &[
                call("e", "echo", json!({"text": text})),
                call("f", "fail", json!({"message": text})),
            ],
        )],
    );
    for json_flag in [false, true] {
        let mut args = vec!["run", s(&sc), "--workspace", s(t.path()), "--demo-tools"];
        if json_flag {
            args.push("--json");
        }
        let out = dsh_run(&args);
        assert_eq!(out.code, 0, "{}", out.both());
        for c in BIDI {
            assert!(
                !out.stdout.contains(c),
                "{c:?} reached stdout: {}",
                out.both()
            );
            assert!(
                !out.stderr.contains(c),
                "{c:?} reached stderr: {}",
                out.both()
            );
        }
        if json_flag {
            // Escaped, so the JSON still carries them.
            assert!(out.stdout.contains("\\u202e"), "{}", out.stdout);
            let lines = json_lines(&out.stdout);
            assert!(!lines.is_empty());
        } else {
            assert!(out.stdout.contains("✓ echo x\u{FFFD}x"), "{}", out.stdout);
        }
    }
}

#[test]
fn run_code_sub_call_lines_are_folded_past_a_few() {
    let t = tmp();
    let code = "let n = 0;\nfor (let i = 0; i < 300; i++) { await tools.echo({text: 'e' + i}); n++; }\nfor (let i = 0; i < 2; i++) { try { await tools.fail({message: 'no'}); } catch (e) {} }\nreturn n;";
    let out = run_program(t.path(), "Many echoes", code);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let subs: Vec<&&str> = lines.iter().filter(|l| l.starts_with("  ↳ ✓")).collect();
    assert_eq!(subs.len(), 5, "{}", out.stdout);
    let fold = lines
        .iter()
        .position(|l| *l == "  ↳ … 297 more (2 failed)")
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(
        lines[fold + 1].starts_with("✓ run_code Many echoes"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("(+302 run_code sub-calls)"),
        "{}",
        out.both()
    );
}

#[test]
fn a_run_code_sub_calls_line_shows_its_own_time() {
    // A sub-call has no `tool/call` event; its time runs from its `tool/code-dispatch-start`.
    let t = tmp();
    let code = "await tools.sleep({ms: 200}); return 1;";
    let out = run_program(t.path(), "Nap", code);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("  ↳ ✓ sleep"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    let ms: u64 = line
        .rsplit(' ')
        .next()
        .and_then(|w| w.strip_suffix("ms"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(ms >= 200, "the sub-call slept 200 ms: {line}");
}

/// `dsh run` of one `run_code` call of `code` with the demo tools, every call approved; it
/// must exit 0.
fn run_program(dir: &std::path::Path, description: &str, code: &str) -> Out {
    let sc = script(
        dir,
        "s.jsonl",
        &[
            openai(
                "",
                &[call(
                    "rc",
                    "run_code",
                    json!({"description": description, "code": code}),
                )],
            ),
            openai("done", &[]),
        ],
    );
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(dir),
        "--demo-tools",
        "--mode",
        "both",
        "--approve",
        "always",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    out
}
