//! Permission rules where a user meets them: a rule holds for every spelling and every link of
//! the file it names, for every simple command of a shell line, and a rule naming no tool is an
//! error naming it.

use std::os::unix::fs::symlink;

use serde_json::json;

use super::support::*;

#[test]
fn p1_a_read_deny_holds_for_every_spelling_and_link_of_the_file() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(ws.join("d")).unwrap();
    std::fs::write(ws.join("secrets.env"), "API_KEY=hunter2\n").unwrap();
    symlink(ws.join("secrets.env"), ws.join("d/notes.txt")).unwrap();
    let policy = t.path().join("policy.toml");
    std::fs::write(&policy, "[permissions]\ndeny = [\"Read(secrets.env)\"]\n").unwrap();
    let absolute = ws.join("secrets.env").to_string_lossy().into_owned();
    let spellings = [
        "secrets.env",
        "./secrets.env",
        "d/../secrets.env",
        absolute.as_str(),
        "d/notes.txt",
    ];
    let calls: Vec<Call> = spellings
        .iter()
        .enumerate()
        .map(|(i, p)| call(&format!("r{i}"), "read", json!({"file_path": p})))
        .collect();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[anthropic("", &calls), anthropic("done", &[])],
    );
    let log = t.path().join("log.jsonl");
    let out = run_script(&sc, &ws, &log, &["--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    for (i, p) in spellings.iter().enumerate() {
        let r = result_of(&ev, &format!("r{i}"));
        assert!(
            r.is_error && r.text.contains("denied by permission rule"),
            "{p}: {r:?}"
        );
        assert!(!r.text.contains("hunter2"), "{p} leaked the file");
    }
}

#[test]
fn p1_a_bash_rule_holds_for_each_simple_command_and_an_unknowable_line_is_never_allowed() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("keep.txt"), "keep\n").unwrap();
    let policy = t.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[permissions]\nallow = [\"bash(echo *)\"]\ndeny = [\"bash(rm *)\"]\ndefault = \"ask\"\n",
    )
    .unwrap();
    let lines = [
        ("b0", "echo ok"),
        ("b1", "echo ok && rm -rf keep.txt"),
        ("b2", "echo ok; 'r''m' keep.txt"),
        ("b3", "echo $(rm keep.txt)"),
        ("b4", "echo ok | wc -l"),
    ];
    let calls: Vec<Call> = lines
        .iter()
        .map(|(id, c)| call(id, "bash", json!({"command": c, "description": "test"})))
        .collect();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[anthropic("", &calls), anthropic("done", &[])],
    );
    let log = t.path().join("log.jsonl");
    let out = run_script(
        &sc,
        &ws,
        &log,
        &["--policy", s(&policy), "--approve", "never"],
    );
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    assert!(!result_of(&ev, "b0").is_error, "echo is allowed");
    for id in ["b1", "b2"] {
        let r = result_of(&ev, id);
        assert!(
            r.is_error && r.text.contains("deny \"bash(rm *)\""),
            "{id}: {r:?}"
        );
    }
    // A substitution cannot be checked: asked (and refused, with no approval), never allowed.
    let r = result_of(&ev, "b3");
    assert!(r.is_error && r.text.contains("rejected"), "{r:?}");
    let asked: Vec<String> = of_type(&ev, "approval/asked")
        .iter()
        .map(|e| e["data"].to_string())
        .collect();
    assert!(
        asked
            .iter()
            .any(|a| a.contains("b3") && a.contains("could not be read")),
        "{asked:?}"
    );
    // `wc -l` is covered by no allow rule: the default (ask) decides, and no one can answer.
    assert!(result_of(&ev, "b4").is_error);
    assert!(ws.join("keep.txt").exists(), "nothing was removed");
}

#[test]
fn p1_a_rule_or_tool_table_naming_no_tool_is_refused_with_its_line_and_the_closest_tool() {
    let t = tmp();
    let sc = script(t.path(), "s.jsonl", &[anthropic("done", &[])]);
    for (text, wants) in [
        (
            "[permissions]\nallow = [\"read\"]\ndeny = [\"raed(secrets.env)\"]\n",
            vec!["raed(secrets.env)", "line 3", "did you mean \"read\""],
        ),
        (
            "[tools.bsh]\ntimeout_ms = 100\n",
            vec!["tools.bsh", "did you mean \"bash\""],
        ),
    ] {
        let policy = t.path().join("policy.toml");
        std::fs::write(&policy, text).unwrap();
        let log = t.path().join("refused.jsonl");
        let out = run_script(&sc, t.path(), &log, &["--policy", s(&policy)]);
        assert_eq!(out.code, 2, "{}", out.both());
        assert!(!log.exists(), "a refused run leaves no log");
        for w in wants {
            assert!(out.stderr.contains(w), "{w}: {}", out.both());
        }
    }
    // A pattern names tools that appear later.
    let policy = t.path().join("policy.toml");
    std::fs::write(&policy, "[permissions]\ndeny = [\"mcp__*\"]\n").unwrap();
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--policy",
        s(&policy),
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
}

#[test]
fn p1_grep_skips_a_file_read_may_not_see_and_says_so_and_bash_is_warned_about() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("secrets.env"), "API_KEY=hunter2\n").unwrap();
    std::fs::write(ws.join("src/app.py"), "key = load('API_KEY')\n").unwrap();
    let policy = t.path().join("policy.toml");
    std::fs::write(&policy, "[permissions]\ndeny = [\"read(*secrets*)\"]\n").unwrap();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[
            anthropic("", &[call("g1", "grep", json!({"pattern": "API_KEY"}))]),
            anthropic("done", &[]),
        ],
    );
    let log = t.path().join("log.jsonl");
    let out = run_script(&sc, &ws, &log, &["--policy", s(&policy)]);
    assert_eq!(out.code, 0, "{}", out.both());
    let r = result_of(&events(&log), "g1");
    assert!(!r.is_error, "{r:?}");
    assert!(r.text.contains("src/app.py"), "{}", r.text);
    assert!(
        !r.text.contains("hunter2"),
        "the denied file's content leaked: {}",
        r.text
    );
    assert!(
        r.text.contains("1 file not searched")
            && r.text.contains("secrets.env")
            && r.text.contains("deny \"read(*secrets*)\""),
        "{}",
        r.text
    );
    // The kernel sandbox cannot hide one file from `cat`: said at load, on stderr.
    assert!(
        out.stderr
            .contains("warning: bash commands can still read files")
            && out.stderr.contains("read(*secrets*)"),
        "{}",
        out.both()
    );
}
