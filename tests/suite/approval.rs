//! Approval from the command line: `--approve ask` reads one line per question from stdin,
//! `always` and `never` answer without asking, and with no terminal and no `--approve` there is
//! no channel at all (fail closed, APR-06).

use std::path::{Path, PathBuf};

use serde_json::json;

use super::support::*;

const REJECTED: &str = "Error: the user rejected tool \"echo\"";
const NO_CHANNEL: &str =
    "Error: tool \"echo\" requires approval, but no approval channel is available";

/// Three steps, each one `echo` call that the policy sends to approval.
fn setup(t: &Path) -> (PathBuf, PathBuf) {
    let policy = t.join("p.toml");
    std::fs::write(&policy, ASK_ECHO).unwrap();
    let sc = script(
        t,
        "s.jsonl",
        &[
            openai("", &[call("c1", "echo", json!({"text": "one"}))]),
            openai("", &[call("c2", "echo", json!({"text": "two"}))]),
            anthropic("", &[call("c3", "echo", json!({"text": "three"}))]),
        ],
    );
    (policy, sc)
}

fn approve_run(
    t: &Path,
    approve: Option<&str>,
    stdin: Option<&str>,
) -> (Out, Vec<serde_json::Value>) {
    let (policy, sc) = setup(t);
    let log = t.join(format!("log-{}.jsonl", approve.unwrap_or("none")));
    let mut cmd = dsh();
    cmd.args([
        "run",
        s(&sc),
        "--workspace",
        s(t),
        "--session",
        s(&log),
        "--policy",
        s(&policy),
        "--demo-tools",
    ]);
    if let Some(a) = approve {
        cmd.args(["--approve", a]);
    }
    let out = run_with(&mut cmd, stdin);
    assert_eq!(out.code, 0, "{}", out.both());
    assert_checks_clean(&log);
    let ev = events(&log);
    (out, ev)
}

fn decided(ev: &[serde_json::Value]) -> Vec<String> {
    of_type(ev, "approval/decided")
        .into_iter()
        .map(|e| e["data"]["outcome"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn apr_06_without_a_terminal_or_approve_every_ask_is_denied_fail_closed() {
    let t = tmp();
    // stdin is a pipe holding a "y": with no --approve it must not be read as an answer.
    let (out, ev) = approve_run(t.path(), None, Some("y\ny\ny\n"));
    for id in ["c1", "c2", "c3"] {
        let r = result_of(&ev, id);
        assert!(r.is_error);
        assert_eq!(r.text, NO_CHANNEL);
    }
    assert_eq!(decided(&ev), ["unavailable"; 3]);
    assert!(
        !out.stderr.contains("allow this call? ["),
        "nobody was asked: {}",
        out.stderr
    );
}

#[test]
fn apr_03_04_06_approve_ask_reads_one_line_per_question() {
    let t = tmp();
    // "y" allows once, "n" rejects, end of input leaves no channel.
    let (out, ev) = approve_run(t.path(), Some("ask"), Some("y\nn\n"));
    assert_eq!(result_of(&ev, "c1").text, "one");
    assert_eq!(result_of(&ev, "c2").text, REJECTED);
    assert_eq!(result_of(&ev, "c3").text, NO_CHANNEL);
    assert_eq!(decided(&ev), ["allowed-once", "rejected", "unavailable"]);
    // The questions went to stderr, one per call, naming the tool and the call.
    for id in ["c1", "c2", "c3"] {
        assert!(
            out.stderr
                .contains(&format!("echo wants approval (call {id})")),
            "{}",
            out.stderr
        );
    }
    assert!(!out.stdout.contains("allow this call? ["));
}

#[test]
fn a_refusal_with_words_sends_them_to_the_model_with_the_refusal() {
    let t = tmp();
    let (out, ev) = approve_run(t.path(), Some("ask"), Some("n: say two instead\nno\ny\n"));
    assert_eq!(
        result_of(&ev, "c1").text,
        format!("{REJECTED}; the user said: say two instead")
    );
    // A bare refusal is the plain refusal text.
    assert_eq!(result_of(&ev, "c2").text, REJECTED);
    assert_eq!(result_of(&ev, "c3").text, "three");
    assert!(
        out.stderr.contains("n: WHY tells the model why"),
        "{}",
        out.stderr
    );
    assert_eq!(decided(&ev), ["rejected", "rejected", "allowed-once"]);
}

#[test]
fn approve_ask_takes_yes_in_any_case_and_rejects_anything_else() {
    let t = tmp();
    let (_, ev) = approve_run(t.path(), Some("ask"), Some("YES\nyess\n  y  \n"));
    assert_eq!(result_of(&ev, "c1").text, "one");
    assert_eq!(result_of(&ev, "c2").text, REJECTED);
    assert_eq!(result_of(&ev, "c3").text, "three");
}

#[test]
fn approve_always_allows_every_ask_without_asking() {
    let t = tmp();
    let (out, ev) = approve_run(t.path(), Some("always"), None);
    for (id, text) in [("c1", "one"), ("c2", "two"), ("c3", "three")] {
        assert_eq!(result_of(&ev, id).text, text);
    }
    assert_eq!(decided(&ev), ["allowed-once"; 3]);
    assert!(!out.stderr.contains("allow this call? ["), "{}", out.stderr);
}

#[test]
fn apr_33_approve_never_rejects_every_ask_without_asking() {
    let t = tmp();
    let (out, ev) = approve_run(t.path(), Some("never"), Some("y\ny\ny\n"));
    for id in ["c1", "c2", "c3"] {
        assert_eq!(result_of(&ev, id).text, REJECTED);
    }
    assert_eq!(decided(&ev), ["rejected"; 3]);
    assert_eq!(
        of_type(&ev, "approval/asked").len(),
        3,
        "the audit pair is written"
    );
    assert!(!out.stderr.contains("allow this call? ["), "{}", out.stderr);
}

#[test]
fn policy_approval_never_rejects_even_with_a_terminal_answer() {
    let t = tmp();
    let policy = t.path().join("never.toml");
    std::fs::write(&policy, format!("approval = \"never\"\n{ASK_ECHO}")).unwrap();
    let (_, sc) = setup(t.path());
    let log = t.path().join("log.jsonl");
    let out = run_with(
        dsh().args([
            "run",
            s(&sc),
            "--workspace",
            s(t.path()),
            "--session",
            s(&log),
            "--policy",
            s(&policy),
            "--demo-tools",
            "--approve",
            "ask",
        ]),
        Some("y\ny\ny\n"),
    );
    assert_eq!(out.code, 0, "{}", out.both());
    let ev = events(&log);
    assert_eq!(result_of(&ev, "c1").text, REJECTED);
    assert!(!out.stderr.contains("allow this call? ["), "{}", out.stderr);
}

/// APR-24: a question still open when the turn is interrupted resolves `cancelled` at once, and
/// the program exits without waiting for an answer that will never come.
#[test]
fn apr_24_interrupt_during_a_question_exits_without_waiting_for_input() {
    use std::io::Read;
    let t = tmp();
    let (policy, sc) = setup(t.path());
    let log = t.path().join("log.jsonl");
    let mut cmd = dsh();
    cmd.args([
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&log),
        "--policy",
        s(&policy),
        "--demo-tools",
        "--approve",
        "ask",
    ]);
    // stdin stays open and silent for the whole run.
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let _held_open = child.stdin.take();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&seen).contains("allow this call? [") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .expect("the question was never asked");
    let interrupted = std::time::Instant::now();
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let code = wait(child);
    assert_eq!(code, 130);
    assert!(
        interrupted.elapsed() < std::time::Duration::from_secs(5),
        "waited {:?} for stdin",
        interrupted.elapsed()
    );
    assert_checks_clean(&log);
    let ev = events(&log);
    assert_eq!(
        result_of(&ev, "c1").text,
        "Error: approval for tool \"echo\" was cancelled"
    );
    assert_eq!(decided(&ev), ["cancelled"]);
}

/// The questions show what they ask before asking: the full command, the path with the
/// content's size and first lines, the edit's lines, an escalation's command first and the
/// model's justification marked as its words.
#[test]
fn apr_questions_show_their_subject_before_they_ask() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("cfg.toml"), "debug = true\n").unwrap();
    let policy = t.path().join("p.toml");
    std::fs::write(
        &policy,
        "[permissions]\nask = [\"write\", \"edit\", \"bash\"]\nallow = [\"read\"]\n",
    )
    .unwrap();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[
            anthropic(
                "",
                &[call(
                    "w1",
                    "write",
                    json!({"file_path": "notes.md", "content": "line one\nline two\n\u{1b}[2Jthree\n"}),
                )],
            ),
            anthropic("", &[call("r1", "read", json!({"file_path": "cfg.toml"}))]),
            anthropic(
                "",
                &[call(
                    "e1",
                    "edit",
                    json!({"file_path": "cfg.toml", "old_string": "debug = true", "new_string": "debug = false"}),
                )],
            ),
            anthropic(
                "",
                &[call(
                    "b1",
                    "bash",
                    json!({"command": "cargo update\ncargo build", "description": "update"}),
                )],
            ),
            anthropic("done", &[]),
        ],
    );
    let log = t.path().join("log.jsonl");
    let out = run_with(
        dsh().args([
            "run",
            s(&sc),
            "--workspace",
            s(&ws),
            "--session",
            s(&log),
            "--policy",
            s(&policy),
            "--approve",
            "ask",
        ]),
        Some("n\nn\nn\n"),
    );
    assert_eq!(out.code, 0, "{}", out.both());
    let e = &out.stderr;
    for want in [
        "write wants approval (call w1)",
        "notes.md",
        "28 bytes, 3 lines",
        "+ line one",
        "+ line two",
        "edit wants approval (call e1)",
        "- debug = true",
        "+ debug = false",
        "bash wants approval (call b1)",
        "command:   cargo update",
        "cargo build",
    ] {
        assert!(e.contains(want), "{want:?} not in:\n{e}");
    }
    // The question comes after what it asks about, and escape sequences are neutralised.
    let subject = e.find("+ line one").unwrap();
    let asked = e[subject..].find("allow this call? [");
    assert!(asked.is_some(), "{e}");
    assert!(!e.contains("\u{1b}[2J"), "{e:?}");

    // An escalation: the command first, then the mode, then the model's words, marked.
    let sc = script(
        t.path(),
        "esc.jsonl",
        &[
            anthropic(
                "",
                &[call(
                    "x1",
                    "bash",
                    json!({"command": "npm install", "description": "deps",
                "sandbox_permissions": "danger-full-access", "justification": "need to update the lockfile"}),
                )],
            ),
            anthropic("done", &[]),
        ],
    );
    let out = run_with(
        dsh().args([
            "run",
            s(&sc),
            "--workspace",
            s(&ws),
            "--session",
            s(&t.path().join("esc.jsonl.log")),
            "--approve",
            "ask",
        ]),
        Some("n\n"),
    );
    let e = &out.stderr;
    let command = e.find("command:   npm install");
    let mode = e.find("outside the sandbox, in danger-full-access");
    let words = e.find("the model says: \"need to update the lockfile\"");
    assert!(
        command.is_some() && mode.is_some() && words.is_some(),
        "{e}"
    );
    assert!(command < mode && mode < words, "command first: {e}");
}

/// A read under an `ask` rule, approved by an answerer that may swap the file for a link to
/// another one while it is being asked (before the body opens it). Returns the result's text.
async fn approved_read(swap: bool) -> String {
    use std::sync::Arc;

    use dsh::core::{Json, Signal};
    use dsh::guard::{ApprovalOutcome, answer_fn};
    use dsh::guard::{PermissionAction, PermissionRules};
    use dsh::{Approvals, Harness};

    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "the notes\n").unwrap();
    std::fs::write(root.join("secret.txt"), "the secret\n").unwrap();
    let rules = PermissionRules::new(dsh::core::ToolRegistry::new())
        .ask("read")
        .unwrap()
        .with_default(PermissionAction::Allow);
    let dir = root.clone();
    let approver = answer_fn(move |_req| {
        if swap {
            let _ = std::fs::remove_file(dir.join("notes.txt"));
            std::os::unix::fs::symlink(dir.join("secret.txt"), dir.join("notes.txt")).unwrap();
        }
        async { Ok(Some(ApprovalOutcome::AllowedOnce)) }
    });
    let harness = Harness::builder(dsh::session::Session::in_memory("ask-read"))
        .agent(dsh::core::AgentId::new("main"))
        .workspace(&root)
        .permissions(rules)
        .approvals(Approvals::Answerer(Arc::new(approver)))
        .build()
        .await
        .unwrap();
    let message = Json::new(serde_json::json!({"role": "assistant", "content": [
        {"type": "tool-call", "id": "r1", "name": "read", "arguments": "{\"file_path\": \"notes.txt\"}"}
    ]}))
    .unwrap();
    let report = harness
        .driver()
        .run_turn([message], Signal::never())
        .await
        .unwrap();
    report.steps[0].results[0]
        .first_text()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn an_approved_ask_on_a_read_reads_the_file_that_was_approved() {
    let text = approved_read(false).await;
    assert!(text.contains("the notes"), "{text}");
}

#[tokio::test]
async fn a_read_approved_for_one_file_is_refused_when_a_link_to_another_was_swapped_in() {
    let text = approved_read(true).await;
    assert!(!text.contains("the secret"), "{text}");
    assert!(text.contains("ask \"read\""), "{text}");
}
