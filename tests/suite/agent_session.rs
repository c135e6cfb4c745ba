//! `dsh agent`'s session through the real binary against the mock provider: `--json` event by
//! event, Ctrl-C mid-stream (exit 130, a clean log, the text so far resumed), and `--resume` of
//! a torn log and of a log the reference harness wrote, and the refusal of a log with empty
//! call ids, which repair cannot fix.

use std::process::Command;

use dsh_test_support::mock_provider::{Frame, Reply, openai};
use serde_json::json;

use super::agent_policy::{agent, history, log_of, mock, push_reads_then_answer, workspace};
use super::support::*;

#[test]
fn agent_json_prints_every_durable_event_once_in_order_with_its_seq() {
    let m = mock();
    let w = workspace();
    push_reads_then_answer(&m.mock, &["notes.txt"], "The notes say hello.");
    let out = run(&mut agent(
        &w,
        Some(&m.mock.openai_base_url()),
        "What do the notes say?",
        &["--json"],
    ));
    assert_eq!(out.code, 0, "{}", out.both());
    let printed = json_lines(&out.stdout);
    let log = log_of_state(&w);
    // Exactly the log's events, in order, each with its seq (a compressed run of deltas takes
    // one seq per delta, so seqs rise but may skip).
    let logged = events(&log);
    assert_eq!(printed.len(), logged.len(), "{}", out.stdout);
    let mut last = -1;
    for (p, l) in printed.iter().zip(&logged) {
        let seq = p["seq"].as_i64().unwrap();
        assert!(seq > last, "{p}");
        last = seq;
        let mut p = p.clone();
        p.as_object_mut().unwrap().remove("seq");
        assert_eq!(&p, l);
    }
    let types: Vec<String> = printed
        .iter()
        .map(|e| {
            let ty = e["type"].as_str().unwrap();
            match e["data"]["chunk"]["type"].as_str() {
                Some(kind) => format!("{ty}:{kind}"),
                None => ty.to_owned(),
            }
        })
        .collect();
    let expected = [
        "sandbox/mode",
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
        "step/start",
        "user/message",
        "request/header",
        "assistant/chunk:block-start",
        "tool-call-chunks",
        "assistant/chunk:block-end",
        "assistant/chunk:usage",
        "assistant/chunk:finish",
        "assistant/message",
        "tool/call",
        "tool/result",
        // dsh's own stage timing of the step (readers skip it; `dsh view` draws it).
        "dsh/step-timing",
        "step/end",
        "step/start",
        "assistant/chunk:block-start",
        "text-chunks",
        "assistant/chunk:block-end",
        "assistant/chunk:usage",
        "assistant/chunk:finish",
        "assistant/message",
        "step/end",
        "turn/end",
    ];
    assert_eq!(types, expected, "{}", out.stdout);
    let call = printed.iter().find(|e| e["type"] == "tool/call").unwrap();
    let result = printed.iter().find(|e| e["type"] == "tool/result").unwrap();
    assert_eq!(result["sourceEventSeqs"], json!([call["seq"]]));
    let texts = printed.iter().find(|e| e["type"] == "text-chunks").unwrap();
    assert_eq!(texts["data"]["texts"], json!(["The notes say hello."]));
    let answer = printed.iter().rfind(|e| e["type"] == "assistant/message");
    assert_eq!(
        answer.unwrap()["data"]["message"]["content"],
        json!([{"type": "text", "text": "The notes say hello."}])
    );
    assert_checks_clean(&log);
}

/// The one log of the test's workspace under its own state folder.
fn log_of_state(w: &super::agent_policy::Ws) -> std::path::PathBuf {
    let dir = w
        .state
        .join("dsh/sessions")
        .join(dsh::jsonl::workspace_key(&w.ws.canonicalize().unwrap()));
    let logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    logs.into_iter().next().unwrap()
}

#[test]
fn loop_17_ctrl_c_mid_stream_exits_130_and_the_text_so_far_is_resumed() {
    let m = mock();
    let w = workspace();
    let url = m.mock.openai_base_url();
    let mut frames = vec![openai::role()];
    frames.extend(openai::text(&["partial"]));
    frames.push(Frame::Stall);
    m.mock.push(Reply::Stream(frames));
    let mut live = Live::spawn(&mut agent(&w, Some(&url), "tell me a story", &["--json"]));
    // The text block has started streaming (its start is durable and printed).
    live.until(|l| l.contains("\"block-start\""));
    let kill = Command::new("kill")
        .args(["-INT", &live.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert_eq!(wait(live.child), 130);
    let log = log_of_state(&w);
    assert_checks_clean(&log);
    let events = events(&log);
    let message = of_type(&events, "assistant/message");
    assert_eq!(message.len(), 1);
    assert_eq!(message[0]["data"]["message"]["interrupted"], true);
    let end = of_type(&events, "turn/end");
    assert_eq!(end[0]["data"]["reason"]["kind"], "aborted");
    // The next turn sees what streamed.
    m.mock.push(openai::text_reply(&["Go on."]));
    let resumed = run(&mut agent(&w, Some(&url), "continue", &["--resume"]));
    assert_eq!(resumed.code, 0, "{}", resumed.both());
    assert_eq!(
        history(&m.mock.bodies()[1])[1..],
        [
            "user: tell me a story",
            "assistant: partial",
            "user: continue"
        ]
    );
}

#[test]
fn resume_repairs_a_torn_log_and_continues_one_the_reference_harness_wrote() {
    let m = mock();
    let w = workspace();
    let url = m.mock.openai_base_url();
    m.mock.push(openai::text_reply(&["First answer."]));
    let first = run(&mut agent(&w, Some(&url), "first question", &[]));
    assert_eq!(first.code, 0, "{}", first.both());
    let log = log_of(&first);
    // A crash mid-write: a torn last line.
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str("{\"type\":\"user/mess");
    std::fs::write(&log, text).unwrap();
    m.mock.push(openai::text_reply(&["Second answer."]));
    let second = run(&mut agent(&w, Some(&url), "second question", &["--resume"]));
    assert_eq!(second.code, 0, "{}", second.both());
    assert!(
        second.stderr.contains("was repaired before resuming"),
        "{}",
        second.both()
    );
    assert_eq!(
        history(&m.mock.bodies()[1])[1..],
        [
            "user: first question",
            "assistant: First answer.",
            "user: second question"
        ]
    );
    assert_checks_clean(&log);

    // A log of the reference harness (a read, an edit, an answer), resumed by its path: the
    // mock refuses a history the API would refuse, so this also checks its shape.
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/session/tests/fixtures/reference-sessions/examples-fs-edit.jsonl"
    );
    let theirs = w.state.parent().unwrap().join("reference.jsonl");
    std::fs::copy(fixture, &theirs).unwrap();
    m.mock.push(openai::text_reply(&["It says RELEASE now."]));
    let out = run(&mut agent(
        &w,
        Some(&url),
        "What does config.txt say now?",
        &["--resume", s(&theirs)],
    ));
    assert_eq!(out.code, 0, "{}", out.both());
    assert_eq!(out.stdout.trim_end(), "It says RELEASE now.");
    let body = &m.mock.bodies()[2];
    let h = history(body);
    assert!(h[1].starts_with("user: First use the read tool"), "{h:?}");
    assert_eq!(h.last().unwrap(), "user: What does config.txt say now?");
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert!(
        roles.contains(&"tool"),
        "their tool results go along: {roles:?}"
    );
    assert_checks_clean(&theirs);
}

/// A log another harness wrote with empty call ids (`"callId": ""`): dsh refuses to resume it
/// (it never writes an empty id, and a provider refuses one), naming the line, what is wrong and
/// what to do, and saying why `dsh repair` cannot fix it; `dsh repair` says the same, lists the
/// lines and exits 1, and neither changes a byte.
#[test]
fn a_log_with_empty_call_ids_is_refused_naming_the_line_the_fix_and_why_repair_cannot() {
    let m = mock();
    let w = workspace();
    let url = m.mock.openai_base_url();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/session/tests/fixtures/reference-sessions/examples-fs-edit.jsonl"
    );
    let text = std::fs::read_to_string(fixture)
        .unwrap()
        .replace("call_00_S6krdIDHoSCGWv7WnXX97617", "")
        .replace("call_00_vOytneZ0XpsLslEEJAxR6398", "");
    let theirs = w.state.parent().unwrap().join("empty-ids.jsonl");
    std::fs::write(&theirs, &text).unwrap();
    let label = theirs.display().to_string();
    let says = |out: &Out| {
        let last = out.stderr.lines().last().unwrap_or_default().to_owned();
        for part in [
            &format!("dsh: session log {label} cannot be resumed: line 19: "),
            "the model's call of \"read\" has an empty id",
            "give the call an id unique in the session, the same in its tool/call and its tool/result",
            &format!("(3 more problem(s): `dsh check {label}` lists them all)"),
            "`dsh repair` cannot fix this: it keeps every complete line byte for byte",
            "start a new session",
        ] {
            assert!(
                last.contains(part),
                "{part:?} in one sentence: {}",
                out.both()
            );
        }
    };
    let out = run(&mut agent(&w, Some(&url), "go on", &["--resume", &label]));
    assert_eq!(out.code, 1, "{}", out.both());
    says(&out);
    let out = run(&mut agent(&w, Some(&url), "go on", &["--session", &label]));
    assert_eq!(out.code, 1, "{}", out.both());
    says(&out);
    assert!(m.mock.requests().is_empty(), "nothing was sent");
    let sc = script(
        w.state.parent().unwrap(),
        "s.jsonl",
        &[super::support::openai("done", &[])],
    );
    let out = dsh_run(&["run", s(&sc), "--workspace", s(&w.ws), "--session", &label]);
    assert_eq!(out.code, 1, "{}", out.both());
    says(&out);

    let repair = dsh_run(&["repair", &label]);
    assert_eq!(repair.code, 1, "{}", repair.both());
    assert!(
        repair.stdout.starts_with(&format!(
            "{label}: repair cannot fix 4 problem(s): it keeps every complete line byte for byte"
        )) && !repair.stdout.contains("nothing to repair"),
        "{}",
        repair.both()
    );
    for line in [19, 20, 32, 33] {
        assert!(
            repair.stdout.contains(&format!("\n{label}:{line}: ")),
            "line {line}: {}",
            repair.both()
        );
    }
    assert_eq!(
        std::fs::read_to_string(&theirs).unwrap(),
        text,
        "not a byte changed"
    );
}
