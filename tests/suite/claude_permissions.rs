//! Claude Code `permissions` in settings files (issue 17, item 2): the same files as the hooks,
//! merged with the policy file (deny > ask > allow across both), unsupported rules refused.

use serde_json::json;

use super::support::*;

fn settings(dir: &std::path::Path, value: serde_json::Value) {
    std::fs::create_dir_all(dir.join(".dsh")).unwrap();
    std::fs::write(dir.join(".dsh/settings.json"), value.to_string()).unwrap();
}

#[test]
fn issue17_2_settings_permissions_decide_calls_with_their_origin() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join(".env"), "KEY=1\n").unwrap();
    std::fs::write(ws.join("src/a.txt"), "a\n").unwrap();
    std::fs::write(ws.join("notes.txt"), "n\n").unwrap();
    settings(
        &ws,
        json!({"permissions": {
            "allow": ["Bash(echo ok:*)", "Edit(src/**)", "Read"],
            "ask": ["Bash(echo maybe:*)"],
            "deny": ["Read(./.env)"]
        }}),
    );
    let policy = t.path().join("p.toml");
    // The policy denies what no rule allows, and writes to notes.txt.
    std::fs::write(
        &policy,
        "[permissions]\ndeny = [\"write(*notes.txt)\"]\ndefault = \"deny\"\n",
    )
    .unwrap();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[anthropic(
            "",
            &[
                call("env", "read", json!({"file_path": ".env"})),
                call("notes", "read", json!({"file_path": "notes.txt"})),
                call(
                    "ok",
                    "bash",
                    json!({"command": "echo ok now", "description": "d"}),
                ),
                call(
                    "chained",
                    "bash",
                    json!({"command": "echo ok && echo sneaky", "description": "d"}),
                ),
                call(
                    "maybe",
                    "bash",
                    json!({"command": "echo maybe so", "description": "d"}),
                ),
                call(
                    "src",
                    "write",
                    json!({"file_path": "src/b.txt", "content": "b"}),
                ),
                call(
                    "deny_both",
                    "write",
                    json!({"file_path": "notes.txt", "content": "x"}),
                ),
            ],
        )],
    );
    let log = t.path().join("s.log");
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(&ws),
        "--session",
        s(&log),
        "--policy",
        s(&policy),
        "--settings",
        "/dev/null/none",
    ]);
    // An explicit settings file must exist.
    assert_eq!(out.code, 2, "{}", out.both());
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(&ws),
        "--session",
        s(&log),
        "--policy",
        s(&policy),
        "--trust-workspace",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert_checks_clean(&log);
    let ev = events(&log);
    let origin = ws.join(".dsh/settings.json").canonicalize().unwrap();
    let env = result_of(&ev, "env");
    assert!(env.is_error);
    assert_eq!(
        env.text,
        format!(
            "Error: tool \"read\" is denied by permission rule deny \"Read(./.env)\" ({})",
            origin.display()
        )
    );
    assert!(
        !result_of(&ev, "notes").is_error,
        "Read allows it over the policy's default"
    );
    let ok = result_of(&ev, "ok");
    assert!(!ok.is_error, "{ok:?}");
    // Chained: no allow rule takes it, so the policy's default denies it.
    let chained = result_of(&ev, "chained");
    assert!(
        chained.text.contains("denied by the default permission"),
        "{chained:?}"
    );
    // Asked (there is no approval channel here, so the ask is refused).
    let maybe = result_of(&ev, "maybe");
    assert!(maybe.text.contains("requires approval"), "{maybe:?}");
    assert!(!result_of(&ev, "src").is_error);
    assert_eq!(std::fs::read_to_string(ws.join("src/b.txt")).unwrap(), "b");
    let both = result_of(&ev, "deny_both");
    assert!(both.text.contains("deny \"write(*notes.txt)\""), "{both:?}");
}

#[test]
fn issue17_2_unsupported_rules_are_refused_before_anything_runs() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    settings(
        &ws,
        json!({"permissions": {"allow": ["WebFetch(domain:example.com)"]}}),
    );
    let sc = script(t.path(), "s.jsonl", &[anthropic("", &[])]);
    let log = t.path().join("s.log");
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(&ws),
        "--session",
        s(&log),
        "--trust-workspace",
    ]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("not supported"), "{}", out.both());
    assert!(
        out.stderr.contains("WebFetch(domain:example.com)"),
        "{}",
        out.both()
    );
    assert!(out.stderr.contains("settings.json"), "{}", out.both());
}

#[test]
fn issue17_2_a_bare_deny_in_settings_removes_the_tool_from_dsh_tools() {
    let t = tmp();
    settings(
        t.path(),
        json!({"permissions": {"deny": ["Bash", "Edit(src/**)"]}}),
    );
    let out = dsh_run(&[
        "tools",
        "--workspace",
        s(t.path()),
        "--format",
        "anthropic",
        "--trust-workspace",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read", "write", "edit", "glob", "grep"]);
}
