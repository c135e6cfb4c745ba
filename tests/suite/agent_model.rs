//! `dsh agent` and `dsh chat` against what a real model server does wrong, through the real
//! binary and the mock provider: a status no retry can change (a web server's 501 page, a 505)
//! is one sentence and exit 2 at once, and the stream idle timeout is set from the command line
//! or the config file (TMO-34), a 0 refused naming the option (TMO-38).

use std::time::{Duration, Instant};

use dsh_test_support::mock_provider::{Frame, Reply, openai};

use super::agent_policy::{agent, mock, workspace};
use super::support::*;

/// The page Python's `http.server` answers a POST with: a web server, not a model API.
const PAGE_501: &str = "<!DOCTYPE HTML>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">\
    <title>Error response</title></head>\n<body><h1>Error response</h1>\
    <p>Error code: 501</p><p>Message: Unsupported method ('POST').</p></body></html>\n";

/// The log the last stderr line names (`... (log: PATH)`).
fn failed_log(out: &Out) -> std::path::PathBuf {
    out.stderr
        .lines()
        .last()
        .and_then(|l| l.rsplit_once("(log: "))
        .map(|(_, p)| std::path::PathBuf::from(p.trim_end_matches(')')))
        .unwrap_or_else(|| panic!("the log is named: {}", out.both()))
}

#[test]
fn agent_a_501_web_page_is_one_sentence_and_exit_2_at_once_naming_status_page_and_url() {
    let m = mock();
    let w = workspace();
    let url = m.mock.openai_base_url();
    // Were it retried, the later attempts would get the mock's 500 for an empty script.
    m.mock.push(Reply::Status {
        status: 501,
        headers: vec![("content-type".into(), "text/html;charset=utf-8".into())],
        body: PAGE_501.into(),
    });
    let out = run(&mut agent(&w, Some(&url), "hi", &[]));
    assert_eq!(out.code, 2, "{}", out.both());
    assert_eq!(m.mock.requests().len(), 1, "not retried: {}", out.both());
    let last = out.stderr.lines().last().unwrap_or_default();
    for says in [
        "dsh: ",
        &format!("{url}/chat/completions answered HTTP 501"),
        "a web page (text/html;charset=utf-8), not the API's JSON",
        "Unsupported method ('POST')",
    ] {
        assert!(
            last.contains(says),
            "{says:?} in one sentence: {}",
            out.both()
        );
    }
    assert_checks_clean(&failed_log(&out));

    // A JSON answer with a status no retry changes: the same, with the API's own message.
    let m = mock();
    m.mock
        .push(openai::error(505, "HTTP/1.1 only", "server_error", None));
    let out = run(&mut agent(&w, Some(&m.mock.openai_base_url()), "hi", &[]));
    assert_eq!(out.code, 2, "{}", out.both());
    assert_eq!(m.mock.requests().len(), 1, "not retried: {}", out.both());
    assert!(
        out.stderr
            .contains("deepseek answered HTTP 505: HTTP/1.1 only"),
        "{}",
        out.both()
    );
}

/// A stream that goes silent after its first words.
fn silent_answer() -> Reply {
    let mut frames = vec![openai::role()];
    frames.extend(openai::text(&["Let me think"]));
    frames.push(Frame::Stall);
    Reply::Stream(frames)
}

#[test]
fn tmo_34_agent_idle_timeout_from_the_command_line_or_the_config_file_ends_a_silent_answer() {
    let w = workspace();
    let config = w.config.join("dsh");
    std::fs::create_dir_all(&config).unwrap();
    for (extra, file) in [
        (&["--idle-timeout", "1s"][..], None),
        (&[][..], Some("idle_timeout = \"1500ms\"\n")),
        // The command line wins over the file.
        (
            &["--idle-timeout", "1s"][..],
            Some("idle_timeout = \"1h\"\n"),
        ),
    ] {
        match file {
            Some(text) => std::fs::write(config.join("config.toml"), text).unwrap(),
            None => {
                let _ = std::fs::remove_file(config.join("config.toml"));
            }
        }
        let m = mock();
        m.mock.push(silent_answer());
        let started = Instant::now();
        let out = run(&mut agent(&w, Some(&m.mock.openai_base_url()), "hi", extra));
        let took = started.elapsed();
        assert_eq!(out.code, 1, "{extra:?} {file:?}: {}", out.both());
        let ms = if extra.is_empty() { 1500 } else { 1000 };
        assert!(
            out.stderr
                .contains(&format!("LLM_STREAM_IDLE_TIMEOUT after {ms}ms")),
            "{extra:?} {file:?}: {}",
            out.both()
        );
        assert!(took < Duration::from_secs(10), "{took:?}");
        assert_eq!(
            m.mock.requests().len(),
            1,
            "a stream that opened is not sent again"
        );
        assert_checks_clean(&failed_log(&out));
    }
}

#[test]
fn tmo_38_agent_and_chat_refuse_an_idle_timeout_of_0_naming_the_option() {
    let m = mock();
    let w = workspace();
    let url = m.mock.openai_base_url();
    for value in ["0", "0s", "0ms"] {
        let out = run(&mut agent(&w, Some(&url), "hi", &["--idle-timeout", value]));
        assert_eq!(out.code, 2, "{}", out.both());
        assert!(
            out.stderr.contains("--idle-timeout") && out.stderr.contains("0 would fail"),
            "{}",
            out.both()
        );
    }
    let out = run(&mut agent(
        &w,
        Some(&url),
        "hi",
        &["--idle-timeout", "soon"],
    ));
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(
        out.stderr.contains("--idle-timeout") && out.stderr.contains("90s"),
        "{}",
        out.both()
    );
    let out = run(dsh()
        .env("DEEPSEEK_API_KEY", "sk-test")
        .args(["chat", "--workspace", s(&w.ws), "--base-url", &url])
        .args(["--idle-timeout", "0"]));
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("--idle-timeout"), "{}", out.both());
    // A file's 0 names the file, its line and the key.
    let config = w.config.join("dsh");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        "model = \"m\"\nidle_timeout = 0\n",
    )
    .unwrap();
    let out = run(&mut agent(&w, Some(&url), "hi", &[]));
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(
        out.stderr
            .contains("config.toml: line 2: idle_timeout: 0 would fail"),
        "{}",
        out.both()
    );
    assert!(m.mock.requests().is_empty(), "nothing was sent");
    for command in ["agent", "chat"] {
        let help = dsh_run(&[command, "--help"]);
        assert!(
            help.stdout.contains("--idle-timeout <DURATION>")
                && help.stdout.contains("LLM_STREAM_IDLE_TIMEOUT"),
            "{command} --help: {}",
            help.both()
        );
    }
}
