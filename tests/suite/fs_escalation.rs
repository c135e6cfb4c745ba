//! FS-36..39 through the real binary: a `read`, `write` or `edit` of a file outside the
//! workspace runs only when that very call asked (`sandbox_permissions: "danger-full-access"`
//! with a justification) and a person said yes; refused, unanswerable or denied by a rule,
//! nothing outside is touched.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::support::*;

struct Setup {
    _t: tempfile::TempDir,
    ws: PathBuf,
    out: PathBuf,
    log: PathBuf,
}

fn setup() -> Setup {
    let t = tmp();
    let ws = t.path().join("ws");
    let out = t.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let log = t.path().join("log.jsonl");
    Setup {
        ws,
        out,
        log,
        _t: t,
    }
}

fn escalated(mut args: Value, why: &str) -> Value {
    args["sandbox_permissions"] = json!("danger-full-access");
    args["justification"] = json!(why);
    args
}

/// Runs one call per step; `approve` and `stdin` as the person answers.
fn run(
    st: &Setup,
    calls: &[(&str, &str, Value)],
    policy: &str,
    approve: Option<&str>,
    stdin: &str,
) -> (Out, Vec<Value>) {
    let lines: Vec<String> = calls
        .iter()
        .map(|(id, tool, args)| openai("", &[call(id, tool, args.clone())]))
        .collect();
    let sc = script(st.ws.parent().unwrap(), "s.jsonl", &lines);
    let policy_file = st.ws.parent().unwrap().join("policy.toml");
    std::fs::write(&policy_file, policy).unwrap();
    let mut cmd = dsh();
    cmd.args([
        "run",
        s(&sc),
        "--workspace",
        s(&st.ws),
        "--session",
        s(&st.log),
        "--policy",
        s(&policy_file),
    ]);
    if let Some(a) = approve {
        cmd.args(["--approve", a]);
    }
    let out = run_with(&mut cmd, Some(stdin));
    assert_eq!(out.code, 0, "{}", out.both());
    assert_checks_clean(&st.log);
    let ev = events(&st.log);
    (out, ev)
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn fs_36_an_approved_escalation_writes_exactly_the_file_outside() {
    let s = setup();
    let target = s.out.join("notes.txt");
    let args = escalated(
        json!({"file_path": path(&target), "content": "kept\n"}),
        "the user asked for notes beside the project",
    );
    let (out, ev) = run(&s, &[("w1", "write", args)], "", Some("ask"), "y\n");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept\n");
    assert!(
        result_of(&ev, "w1").text.starts_with("Created file"),
        "{}",
        out.both()
    );
    // The question said what it asks and why, in the model's words.
    assert!(
        out.stderr
            .contains("asks to:   reach a file outside the workspace, in danger-full-access"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("the model says: \"the user asked for notes beside the project\""),
        "{}",
        out.stderr
    );
    let asked = of_type(&ev, "approval/asked");
    assert_eq!(
        asked[0]["data"]["reason"],
        "escalate sandbox to danger-full-access: the user asked for notes beside the project"
    );
    // Nothing else of the outside directory was touched.
    assert_eq!(std::fs::read_dir(&s.out).unwrap().count(), 1);
}

#[test]
fn fs_37_38_refused_or_unanswerable_nothing_is_written() {
    let s = setup();
    let target = s.out.join("refused.txt");
    let args = escalated(
        json!({"file_path": path(&target), "content": "x"}),
        "because",
    );
    // `s` offers no grant for an escalation: it is a refusal like any other word.
    let (out, ev) = run(&s, &[("w1", "write", args.clone())], "", Some("ask"), "s\n");
    assert!(!target.exists());
    assert!(
        result_of(&ev, "w1").text.contains("rejected"),
        "{}",
        out.both()
    );
    assert!(
        !out.stderr.contains("for the rest of this session"),
        "{}",
        out.stderr
    );
    // No approval channel at all: fails closed.
    let s2 = setup();
    let (_, ev) = run(&s2, &[("w1", "write", args)], "", None, "y\n");
    assert!(!target.exists());
    assert!(
        result_of(&ev, "w1")
            .text
            .contains("no approval channel is available")
    );
}

#[test]
fn fs_36_a_deny_rule_outranks_an_escalation_and_no_question_is_asked() {
    let s = setup();
    let target = s.out.join("secret.txt");
    let policy = format!(
        "[permissions]\ndeny = [\"write({}/**)\"]\n",
        s.out.canonicalize().unwrap().display()
    );
    let args = escalated(
        json!({"file_path": path(&target), "content": "x"}),
        "please",
    );
    let (out, ev) = run(&s, &[("w1", "write", args)], &policy, Some("ask"), "y\n");
    assert!(!target.exists());
    assert!(
        result_of(&ev, "w1").text.contains("denied"),
        "{}",
        out.both()
    );
    assert!(!out.stderr.contains("wants approval"), "{}", out.stderr);
}

#[test]
fn fs_36_an_outside_file_is_read_then_edited_each_call_asked_afresh() {
    let s = setup();
    let target = s.out.join("config.ini");
    std::fs::write(&target, "debug = true\n").unwrap();
    let read = escalated(json!({"file_path": path(&target)}), "to see the setting");
    let edit = escalated(
        json!({"file_path": path(&target), "old_string": "true", "new_string": "false"}),
        "to turn debugging off",
    );
    let (out, ev) = run(
        &s,
        &[("r1", "read", read), ("e1", "edit", edit)],
        "",
        Some("ask"),
        "y\ny\n",
    );
    assert_eq!(
        out.stderr.matches("wants approval").count(),
        2,
        "{}",
        out.stderr
    );
    assert!(result_of(&ev, "r1").text.contains("debug = true"));
    assert!(
        !result_of(&ev, "e1").is_error,
        "{}",
        result_of(&ev, "e1").text
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "debug = false\n");
}

#[test]
fn without_asking_an_outside_path_is_refused_with_how_to_ask() {
    let s = setup();
    let target = s.out.join("plain.txt");
    let (_, ev) = run(
        &s,
        &[(
            "w1",
            "write",
            json!({"file_path": path(&target), "content": "x"}),
        )],
        "",
        Some("ask"),
        "y\n",
    );
    assert!(!target.exists());
    let text = result_of(&ev, "w1").text;
    assert!(
        text.contains("sandbox_permissions: \"danger-full-access\" and a justification"),
        "{text}"
    );
    // Inside the workspace the argument changes nothing and nobody is asked.
    let inside = escalated(json!({"file_path": "in.txt", "content": "y"}), "no need");
    let s2 = setup();
    let (out, ev) = run(&s2, &[("w2", "write", inside)], "", Some("ask"), "");
    assert!(!result_of(&ev, "w2").is_error, "{}", out.both());
    assert!(s2.ws.join("in.txt").exists());
    assert!(!out.stderr.contains("wants approval"));
}

#[tokio::test]
async fn fs_39_an_escalation_with_no_agent_to_route_it_through_writes_nothing() {
    use dsh::core::{Arguments, ToolExecutionInput};
    let s = setup();
    let target = s.out.join("no-agent.txt");
    let harness = dsh::Harness::builder(dsh::session::Session::in_memory("s"))
        .workspace(&s.ws)
        .approvals(dsh::Approvals::Always)
        .build()
        .await
        .unwrap();
    let args = escalated(json!({"file_path": path(&target), "content": "x"}), "why");
    let input = ToolExecutionInput::new("w1", "write", Arguments::from_value(args).unwrap());
    let result = harness.runtime().execute(input).await;
    assert!(result.is_error());
    assert!(
        result
            .first_text()
            .unwrap()
            .contains("no agent to route it through"),
        "{result:?}"
    );
    assert!(!target.exists());
}
