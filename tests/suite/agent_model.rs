//! `dsh agent` and `dsh chat` against what a real model server does wrong, through the real
//! binary and the mock provider: a status no retry can change (a web server's 501 page, a 505)
//! is one sentence and exit 2 at once.

use dsh_test_support::mock_provider::{Reply, openai};

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
