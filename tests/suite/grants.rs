//! Approvals a person makes broader than one call, through the real binary: `s` at a question
//! allows the rule shown for the rest of the session (logged as `approval/grant`, restored when
//! the session is resumed), `a` allows it always in this workspace (the person's grants file,
//! never the workspace's), and neither outranks a deny rule.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::support::*;

const POLICY: &str = r#"
[permissions]
ask = ["write"]
deny = ["write(src/secret*)"]
"#;

/// A script of one `write` call per step, each to `paths[i]`, with call ids `w0`, `w1`, ...
fn writes(t: &Path, name: &str, first: usize, paths: &[&str]) -> PathBuf {
    let lines: Vec<String> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            openai(
                "",
                &[call(
                    &format!("w{}", first + i),
                    "write",
                    json!({"file_path": p, "content": "x\n"}),
                )],
            )
        })
        .collect();
    script(t, name, &lines)
}

struct Run {
    out: Out,
    events: Vec<serde_json::Value>,
}

fn run(ws: &Path, config: &Path, log: &Path, script: &Path, stdin: &str) -> Run {
    let policy = ws.join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    let mut cmd = dsh();
    cmd.env("XDG_CONFIG_HOME", config).args([
        "run",
        s(script),
        "--workspace",
        s(ws),
        "--session",
        s(log),
        "--policy",
        s(&policy),
        "--approve",
        "ask",
    ]);
    let out = run_with(&mut cmd, Some(stdin));
    assert_eq!(out.code, 0, "{}", out.both());
    assert_checks_clean(log);
    Run {
        events: events(log),
        out,
    }
}

fn questions(out: &Out) -> usize {
    out.stderr.matches("wants approval").count()
}

fn workspace(t: &Path) -> PathBuf {
    let ws = t.join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    ws
}

#[test]
fn a_session_grant_answers_what_its_rule_covers_and_nothing_else() {
    let t = tmp();
    let ws = workspace(t.path());
    let log = t.path().join("log.jsonl");
    let sc = writes(
        t.path(),
        "s.jsonl",
        0,
        &["src/a.txt", "src/deep/b.txt", "notes.txt", "src/secret.txt"],
    );
    let r = run(&ws, &t.path().join("cfg"), &log, &sc, "s\nn\n");
    // The question offered exactly the rule that was then stored.
    assert!(
        r.out
            .stderr
            .contains("yes, and for the rest of this session: write(src/**)"),
        "{}",
        r.out.stderr
    );
    assert!(
        r.out
            .stderr
            .contains("dsh: allowed for the rest of this session: write(src/**)"),
        "{}",
        r.out.stderr
    );
    // w0 asked and granted, w1 covered without a question, w2 outside the rule asked and was
    // refused, w3 denied by a rule no grant outranks.
    assert_eq!(questions(&r.out), 2, "{}", r.out.stderr);
    assert!(ws.join("src/a.txt").exists() && ws.join("src/deep/b.txt").exists());
    assert!(!ws.join("notes.txt").exists());
    assert!(result_of(&r.events, "w2").text.contains("rejected"));
    assert!(!ws.join("src/secret.txt").exists());
    assert!(result_of(&r.events, "w3").text.contains("denied"));
    let grants = of_type(&r.events, "approval/grant");
    assert_eq!(grants.len(), 1);
    assert_eq!(
        grants[0]["data"],
        json!({"rule": "write(src/**)", "scope": "session", "callId": "w0"})
    );
    // The audit pair of every question a grant answered is still there: three asked, all
    // decided (w1 allowed by the grant).
    let outcomes: Vec<&str> = of_type(&r.events, "approval/decided")
        .iter()
        .map(|e| e["data"]["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["allowed-once", "allowed-once", "rejected"]);
    // Nothing was written outside the session log: no grants file.
    assert!(!t.path().join("cfg/dsh/grants.toml").exists());
}

#[test]
fn a_resumed_session_keeps_its_grants_and_a_new_one_does_not() {
    let t = tmp();
    let ws = workspace(t.path());
    let cfg = t.path().join("cfg");
    let log = t.path().join("log.jsonl");
    let first = writes(t.path(), "one.jsonl", 0, &["src/a.txt"]);
    run(&ws, &cfg, &log, &first, "s\n");
    // Resumed with no answers at all: the grant answers, nobody is asked.
    let again = writes(t.path(), "two.jsonl", 1, &["src/b.txt"]);
    let r = run(&ws, &cfg, &log, &again, "");
    assert_eq!(questions(&r.out), 0, "{}", r.out.stderr);
    assert!(
        r.out.stderr.contains(
            "dsh: allowed for this session, as granted before it was resumed: write(src/**)"
        ),
        "{}",
        r.out.stderr
    );
    assert!(ws.join("src/b.txt").exists());
    // Another session of the same workspace was granted nothing: it asks, and with no answer
    // the call is refused.
    let other = t.path().join("other.jsonl");
    let third = writes(t.path(), "three.jsonl", 0, &["src/c.txt"]);
    let r = run(&ws, &cfg, &other, &third, "");
    assert_eq!(questions(&r.out), 1, "{}", r.out.stderr);
    assert!(!ws.join("src/c.txt").exists());
}

#[test]
fn an_always_grant_is_kept_in_the_persons_file_for_that_workspace_only() {
    let t = tmp();
    let ws = workspace(t.path());
    let cfg = t.path().join("cfg");
    let sc = writes(t.path(), "one.jsonl", 0, &["src/a.txt"]);
    let r = run(&ws, &cfg, &t.path().join("a.jsonl"), &sc, "a\n");
    let file = cfg.join("dsh/grants.toml");
    assert!(
        r.out.stderr.contains(&format!(
            "dsh: allowed always in this workspace: write(src/**) (written to {})",
            file.display()
        )),
        "{}",
        r.out.stderr
    );
    let kept: toml::Table = std::fs::read_to_string(&file).unwrap().parse().unwrap();
    let key = ws.canonicalize().unwrap().display().to_string();
    assert_eq!(
        kept[&key]["allow"],
        toml::Value::Array(vec!["write(src/**)".into()])
    );
    assert!(
        !ws.join(".dsh").exists(),
        "nothing written into the workspace"
    );
    let logged = of_type(&r.events, "approval/grant");
    assert_eq!(logged[0]["data"]["scope"], "always");

    // A new session of the same workspace: allowed without a question.
    let sc = writes(t.path(), "two.jsonl", 0, &["src/b.txt"]);
    let r = run(&ws, &cfg, &t.path().join("b.jsonl"), &sc, "");
    assert_eq!(questions(&r.out), 0, "{}", r.out.stderr);
    assert!(ws.join("src/b.txt").exists());

    // Another workspace is asked.
    let ws2 = t.path().join("ws2");
    std::fs::create_dir_all(ws2.join("src")).unwrap();
    let r = run(&ws2, &cfg, &t.path().join("c.jsonl"), &sc, "");
    assert_eq!(questions(&r.out), 1, "{}", r.out.stderr);
    assert!(!ws2.join("src/b.txt").exists());
}

#[test]
fn a_grants_file_that_is_not_what_dsh_writes_is_refused_by_name() {
    let t = tmp();
    let ws = workspace(t.path());
    let cfg = t.path().join("cfg");
    std::fs::create_dir_all(cfg.join("dsh")).unwrap();
    let key = ws.canonicalize().unwrap().display().to_string();
    std::fs::write(
        cfg.join("dsh/grants.toml"),
        format!("[\"{key}\"]\nallow = [\"write(src/**\"]\n"),
    )
    .unwrap();
    let sc = writes(t.path(), "one.jsonl", 0, &["src/a.txt"]);
    let policy = ws.join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    let mut cmd = dsh();
    cmd.env("XDG_CONFIG_HOME", &cfg).args([
        "run",
        s(&sc),
        "--workspace",
        s(&ws),
        "--policy",
        s(&policy),
    ]);
    let out = run_with(&mut cmd, None);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("write(src/**"), "{}", out.stderr);
    assert!(!ws.join("src/a.txt").exists());
}
