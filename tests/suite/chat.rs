//! `dsh chat` through the real binary against the mock provider server: over a pipe (one turn
//! per line) and through a pseudo-terminal (`expectrl`): an approval answered at its question,
//! a turn cancelled mid-stream with Ctrl-C and the chat going on, the screen read back.

use std::path::Path;
use std::time::Duration;

use dsh_test_support::mock_provider::{Frame, Reply, openai};
use expectrl::{ControlCode, Expect};

use super::support::*;

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "the answer is 42\n").unwrap();
    ws
}

fn read_call(id: &str) -> Reply {
    read_of(id, "notes.txt")
}

fn read_of(id: &str, path: &str) -> Reply {
    let mut call = vec![openai::role()];
    let rest = format!(": \"{path}\"}}");
    call.extend(openai::tool_call(0, id, "read", &["{\"file_path\"", &rest]));
    call.extend(openai::finish("tool_calls", 40, 12));
    Reply::Stream(call)
}

/// The log a chat names on its last stderr line.
fn log_in(text: &str) -> std::path::PathBuf {
    let line = text
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("log: "))
        .unwrap_or_else(|| panic!("no log line: {text}"));
    std::path::PathBuf::from(line.trim())
}

#[test]
fn chat_over_a_pipe_runs_one_turn_per_line_in_one_session() {
    let srv = mock_server();
    srv.mock.push(openai::text_reply(&["One."]));
    srv.mock.push(openai::text_reply(&["Two."]));
    let ws = workspace();
    let state = tempfile::tempdir().unwrap();
    let out = run_with(
        dsh()
            .args(["chat", "--workspace", s(ws.path()), "--base-url"])
            .arg(srv.mock.openai_base_url())
            .env("DEEPSEEK_API_KEY", "sk-test")
            .env("XDG_STATE_HOME", state.path()),
        Some("first\n\nsecond\n/exit\nnever sent\n"),
    );
    assert_eq!(out.code, 0, "{}", out.both());
    assert_eq!(out.stdout, "One.\nTwo.\n", "{}", out.both());
    let bodies = srv.mock.bodies();
    assert_eq!(
        bodies.len(),
        2,
        "an empty line is no turn, /exit ends: {bodies:#?}"
    );
    let second: Vec<String> = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        second[1].contains("first") && second[2].contains("One.") && second[3].contains("second"),
        "{second:#?}"
    );
    let check = dsh_run(&["check", s(&log_in(&out.stderr))]);
    assert_eq!(check.code, 0, "{}", check.both());
    // Both turns are in one session, which `dsh sessions` lists once.
    let listed = run(dsh()
        .args(["sessions", "--workspace", s(ws.path())])
        .env("XDG_STATE_HOME", state.path()));
    assert_eq!(listed.stdout.lines().count(), 1, "{}", listed.both());
}

/// `dsh chat` on a pseudo-terminal.
fn chat_on_a_terminal(
    ws: &Path,
    state: &Path,
    url: &str,
    policy: &Path,
) -> expectrl::session::OsSession {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
    cmd.args(["chat", "--workspace", s(ws), "--base-url", url])
        .arg("--policy")
        .arg(policy)
        .env("DEEPSEEK_API_KEY", "sk-test")
        .env("XDG_STATE_HOME", state)
        .env("XDG_CONFIG_HOME", "/nonexistent/dsh-tests-config")
        .env("TERM", "dumb")
        .env_remove("RUST_LOG");
    let mut session = expectrl::Session::spawn(cmd).expect("dsh chat starts on a pty");
    session.set_expect_timeout(Some(Duration::from_secs(20)));
    session
}

/// `dsh chat` on a pseudo-terminal in a fresh workspace whose rules ask before every `read`;
/// the workspace and the state directory live as long as the returned guards.
fn chat_asking_for_reads(
    url: &str,
) -> (
    tempfile::TempDir,
    tempfile::TempDir,
    expectrl::session::OsSession,
) {
    let ws = workspace();
    let state = tempfile::tempdir().unwrap();
    let policy = ws.path().join("policy.toml");
    std::fs::write(&policy, "[permissions]\nask = [\"read\"]\n").unwrap();
    let chat = chat_on_a_terminal(ws.path(), state.path(), url, &policy);
    (ws, state, chat)
}

/// Waits for `needle` on the chat's terminal, adding what came before it and itself to `screen`.
fn expect(chat: &mut expectrl::session::OsSession, needle: &str, screen: &mut String) {
    let found = chat
        .expect(needle)
        .unwrap_or_else(|e| panic!("waiting for {needle:?}: {e}\nscreen so far:\n{screen}"));
    screen.push_str(&String::from_utf8_lossy(found.before()));
    screen.push_str(needle);
}

#[test]
fn chat_on_a_terminal_asks_approval_cancels_a_turn_with_ctrl_c_and_goes_on() {
    let srv = mock_server();
    // Turn 1: the model reads a file (the rules ask), then answers.
    srv.mock.push(read_call("call_1"));
    srv.mock.push(openai::text_reply(&["It says ", "42."]));
    // Turn 2: a stream that starts, then hangs until the turn is cancelled.
    let mut slow = vec![openai::role()];
    slow.extend(openai::text(&["Thinking about it"]));
    slow.push(Frame::Stall);
    srv.mock.push(Reply::Stream(slow));
    // Turn 3: the chat goes on; the model reads the file again, which the grant covers.
    srv.mock.push(read_call("call_2"));
    let mut thought = vec![openai::role()];
    thought.extend(openai::reasoning(&["Let me ", "think."]));
    thought.extend(openai::text(&["Back again."]));
    thought.extend(openai::finish("stop", 1200, 34));
    srv.mock.push(Reply::Stream(thought));
    // Turn 4: a file the grant does not cover is asked about, and refused.
    srv.mock.push(read_of("call_3", "other.txt"));
    srv.mock.push(openai::text_reply(&["Understood."]));
    let (_ws, _state, mut chat) = chat_asking_for_reads(&srv.mock.openai_base_url());
    let mut screen = String::new();
    expect(&mut chat, "> ", &mut screen);
    chat.send_line("what does notes.txt say?").unwrap();
    expect(&mut chat, "allow this call? [y/s/a/N]", &mut screen);
    assert!(
        screen.contains("read wants approval")
            && screen.contains("notes.txt")
            && screen.contains("yes, and for the rest of this session: read(notes.txt)"),
        "the question shows the tool, the path and the rule it offers:\n{screen}"
    );
    chat.send_line("s").unwrap();
    expect(
        &mut chat,
        "allowed for the rest of this session: read(notes.txt)",
        &mut screen,
    );
    expect(&mut chat, "It says 42.", &mut screen);
    expect(&mut chat, "> ", &mut screen);
    chat.send_line("tell me more").unwrap();
    expect(&mut chat, "Thinking about it", &mut screen);
    chat.send(ControlCode::EndOfText).unwrap();
    expect(&mut chat, "cancelled", &mut screen);
    expect(&mut chat, "> ", &mut screen);
    chat.send_line("are you there?").unwrap();
    expect(&mut chat, "Back again.", &mut screen);
    expect(&mut chat, "> ", &mut screen);
    // The reasoning was folded into one line before the answer, and the turn's status line
    // counts both of its requests (40 + 1,200 in, 12 + 34 out).
    assert!(
        screen
            .contains("⋯ thought: Let me think. (13 characters, folded; all of it is in the log)")
            && screen.find("⋯ thought").unwrap() < screen.find("Back again.").unwrap(),
        "{screen}"
    );
    assert!(
        screen.contains("tokens: 1,240 in · 46 out · session "),
        "{screen}"
    );
    assert_eq!(
        screen.matches("wants approval").count(),
        1,
        "the second read of notes.txt was granted, not asked:\n{screen}"
    );
    // A line ending in `\` goes on: one prompt of two lines.
    chat.send_line("and \\").unwrap();
    chat.send_line("other.txt?").unwrap();
    expect(&mut chat, "allow this call? [y/s/a/N]", &mut screen);
    assert!(screen.contains("other.txt"), "{screen}");
    chat.send_line("n").unwrap();
    expect(&mut chat, "Understood.", &mut screen);
    expect(&mut chat, "> ", &mut screen);
    chat.send_line("/exit").unwrap();
    expect(&mut chat, "log: ", &mut screen);
    let mut rest = String::new();
    expect(&mut chat, ".jsonl", &mut rest);
    let log = log_in(&format!("log: {}", rest.trim()));
    // Four turns, the cancelled one included, each request carrying the history before it.
    let bodies = srv.mock.bodies();
    assert_eq!(bodies.len(), 7, "{bodies:#?}");
    let last = bodies[6]["messages"].to_string();
    assert!(
        last.contains("what does notes.txt say?")
            && last.contains("the answer is 42")
            && last.contains("tell me more")
            && last.contains("are you there?")
            && last.contains("rejected")
            && last.contains(r#""and \nother.txt?""#),
        "{last}"
    );
    let ev = events(&log);
    let grants = of_type(&ev, "approval/grant");
    assert_eq!(grants.len(), 1, "{grants:#?}");
    assert_eq!(grants[0]["data"]["rule"], "read(notes.txt)");
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}

#[test]
fn chat_ctrl_c_at_an_approval_question_leaves_the_next_line_typed_to_the_chat() {
    let srv = mock_server();
    // Turn 1: the model reads a file (the rules ask); the person cancels at the question.
    srv.mock.push(read_call("call_1"));
    // Turn 2: the next line typed is a turn of its own, answered.
    srv.mock.push(openai::text_reply(&["Got it."]));
    let (_ws, _state, mut chat) = chat_asking_for_reads(&srv.mock.openai_base_url());
    let mut screen = String::new();
    expect(&mut chat, "> ", &mut screen);
    chat.send_line("what does notes.txt say?").unwrap();
    expect(&mut chat, "allow this call? [y/s/a/N]", &mut screen);
    chat.send(ControlCode::EndOfText).unwrap();
    expect(&mut chat, "cancelled", &mut screen);
    expect(&mut chat, "> ", &mut screen);
    // The question's read of the terminal was under way when it was cancelled: this line is
    // the chat's, not swallowed by it.
    chat.send_line("something else then").unwrap();
    expect(&mut chat, "Got it.", &mut screen);
    expect(&mut chat, "> ", &mut screen);
    chat.send_line("/exit").unwrap();
    expect(&mut chat, "log: ", &mut screen);
    let bodies = srv.mock.bodies();
    assert_eq!(bodies.len(), 2, "{bodies:#?}");
    let last = bodies[1]["messages"].to_string();
    assert!(last.contains("something else then"), "{last}");
    assert!(
        !screen.contains("rejected"),
        "the line was no answer to the question: {screen}"
    );
}

/// Waits (at most 20 s) until `lines` holds a line containing `needle`; returns what was read.
fn read_until(lines: &std::sync::mpsc::Receiver<String>, needle: &str, seen: &mut String) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !seen.contains(needle) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
            }
            Err(e) => panic!("waiting for {needle:?} ({e}); read so far:\n{seen}"),
        }
    }
}

#[test]
fn chat_at_its_prompt_or_in_a_turn_ends_on_sigterm_or_sighup_with_exit_130_and_a_clean_log() {
    use std::io::{BufRead, Write};
    // (signal, whether it comes while a turn streams rather than at the prompt)
    for (signal, in_turn) in [("TERM", false), ("HUP", false), ("TERM", true)] {
        let srv = mock_server();
        srv.mock.push(openai::text_reply(&["Hello."]));
        if in_turn {
            let mut slow = vec![openai::role()];
            slow.extend(openai::text(&["Thinking"]));
            slow.push(Frame::Stall);
            srv.mock.push(Reply::Stream(slow));
        }
        let ws = workspace();
        let state = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"))
            .args(["chat", "--workspace", s(ws.path()), "--base-url"])
            .arg(srv.mock.openai_base_url())
            .env("DEEPSEEK_API_KEY", "sk-test")
            .env("XDG_STATE_HOME", state.path())
            .env("XDG_CONFIG_HOME", "/nonexistent/dsh-tests-config")
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let (tx, out) = std::sync::mpsc::channel();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let to_out = tx.clone();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = to_out.send(line);
            }
        });
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let (etx, err) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let _ = etx.send(line);
            }
        });
        let mut seen = String::new();
        stdin.write_all(b"hi\n").unwrap();
        read_until(&out, "Hello.", &mut seen);
        if in_turn {
            // Over a pipe the answer prints when its turn ends: the second request having
            // reached the server says the turn streams (and stalls).
            stdin.write_all(b"and then?\n").unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while srv.mock.bodies().len() < 2 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the second turn never started"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // stdin stays open: the chat would wait for a line for ever.
        let sent = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "SIG{signal} (in a turn: {in_turn}): dsh chat still runs"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        drop(stdin);
        let said: String = err.try_iter().collect::<Vec<_>>().join("\n");
        assert_eq!(status.code(), Some(130), "SIG{signal}: {said}");
        assert!(said.contains("ending the chat"), "{said}");
        let check = dsh_run(&["check", s(&log_in(&said))]);
        assert_eq!(check.code, 0, "SIG{signal}: {}", check.both());
    }
}
