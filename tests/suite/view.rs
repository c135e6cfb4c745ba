//! `dsh view`: the server behind the page. Every URL carries the token (403 without it), the
//! JSON endpoints list the logs and give their events from a seq on, and a bad target is one
//! sentence with exit 2. The page itself is driven in a real browser in `view_browser.rs`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::support::*;

/// A running `dsh view --no-open`, stopped when dropped.
pub struct Viewer {
    live: Live,
    /// `http://127.0.0.1:PORT/TOKEN/`.
    pub url: String,
}

impl Viewer {
    pub fn start(target: &Path) -> Viewer {
        Viewer::spawn(dsh().args(["view", "--no-open"]).arg(target))
    }

    /// `dsh view --store URL [ID]`.
    pub fn store(url: &str, first: Option<&str>) -> Viewer {
        Viewer::spawn(
            dsh()
                .args(["view", "--no-open", "--store", url])
                .args(first),
        )
    }

    fn spawn(cmd: &mut std::process::Command) -> Viewer {
        let mut live = Live::spawn(cmd);
        let line = live.until(|l| l.starts_with("dsh view: http://"));
        let url = line["dsh view: ".len()..].to_owned();
        Viewer { live, url }
    }

    /// The URL without its fragment.
    pub fn base(&self) -> &str {
        self.url.split('#').next().unwrap()
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.live.child.kill();
        let _ = self.live.child.wait();
    }
}

/// A plain HTTP/1.1 GET: (status, body).
pub fn get(url: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut conn = std::net::TcpStream::connect(host).unwrap();
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_owned())
}

/// One message of an SSE stream: its event name (`message` when none), id and data.
#[derive(Debug)]
pub struct Sse {
    pub event: String,
    pub id: String,
    pub data: String,
}

impl Sse {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }
}

/// An open `api/stream` (HTTP/1.0, so the body ends with the connection, not in chunks).
pub struct Stream {
    reader: BufReader<std::net::TcpStream>,
}

impl Stream {
    pub fn open(url: &str, last_event_id: Option<&str>) -> Stream {
        let rest = url.strip_prefix("http://").unwrap();
        let (host, path) = rest.split_at(rest.find('/').unwrap());
        let mut conn = std::net::TcpStream::connect(host).unwrap();
        conn.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        let resume = last_event_id
            .map(|id| format!("Last-Event-ID: {id}\r\n"))
            .unwrap_or_default();
        write!(
            conn,
            "GET {path} HTTP/1.0\r\nHost: {host}\r\nAccept: text/event-stream\r\n{resume}\r\n"
        )
        .unwrap();
        let mut reader = BufReader::new(conn);
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim_end().is_empty() {
                break;
            }
            head.push(line.trim_end().to_owned());
        }
        assert!(head[0].contains(" 200 "), "{head:?}");
        assert!(
            head.iter()
                .any(|h| h.eq_ignore_ascii_case("content-type: text/event-stream")),
            "{head:?}"
        );
        Stream { reader }
    }

    /// The next message (keep-alive comments skipped); `None` once the stream ended.
    pub fn next(&mut self) -> Option<Sse> {
        let mut msg = Sse {
            event: "message".into(),
            id: String::new(),
            data: String::new(),
        };
        let mut any = false;
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line).unwrap() == 0 {
                return None;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if any {
                    return Some(msg);
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            any = true;
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => msg.event = value.to_owned(),
                "id" => msg.id = value.to_owned(),
                "data" => msg.data.push_str(value),
                _ => {}
            }
        }
    }
}

/// Runs `dsh demo` with its files under `tmpdir`; the log's path.
pub fn demo_log(tmpdir: &Path) -> PathBuf {
    let out = run(dsh().arg("demo").env("TMPDIR", tmpdir));
    assert_eq!(out.code, 0, "{}", out.both());
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix("log: "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no `log:` line\n{}", out.stdout))
}

#[test]
fn view_serves_only_with_its_token_and_gives_the_logs_events() {
    let tmpdir = tmp();
    let log = demo_log(tmpdir.path());
    let viewer = Viewer::start(&log);
    let base = viewer.url.trim_end_matches('/');
    let (token_start, _) = base.rsplit_once('/').unwrap();
    // Without the token, or with another one of the same length: refused.
    for url in [
        format!("{token_start}/"),
        format!("{token_start}/api/sessions"),
        format!("{token_start}/{}/api/sessions", "0".repeat(32)),
    ] {
        assert_eq!(get(&url).0, 403, "{url}");
    }
    let (status, page) = get(&viewer.url);
    assert_eq!(status, 200);
    assert!(page.contains("<script src=\"app.js\">"), "{page}");
    let (status, js) = get(&format!("{}waterfall.js", viewer.url));
    assert_eq!(status, 200);
    assert!(js.contains("function waterfall"));

    let (status, list) = get(&format!("{}api/sessions", viewer.url));
    assert_eq!(status, 200, "{list}");
    let list: Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["id"], "session");

    let (status, all) = get(&format!("{}api/events?id=session&after=0", viewer.url));
    assert_eq!(status, 200, "{all}");
    let all: Value = serde_json::from_str(&all).unwrap();
    let logged = events(&log);
    assert_eq!(all["events"].as_array().unwrap().len(), logged.len());
    assert_eq!(all["next"], logged.len() as u64);
    assert_eq!(all["live"], false, "the demo is over");
    assert_eq!(all["header"], header(&log));
    // Each step with calls carries dsh's stage timing.
    let steps_with_calls = of_type(&logged, "tool/call")
        .iter()
        .map(|c| c["data"]["step"].as_u64().unwrap())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    assert_eq!(of_type(&logged, "dsh/step-timing").len(), steps_with_calls);

    // From a seq on: only the rest, numbered as in the log.
    let (_, tail) = get(&format!("{}api/events?id=session&after=60", viewer.url));
    let tail: Value = serde_json::from_str(&tail).unwrap();
    let tail = tail["events"].as_array().unwrap();
    assert_eq!(tail.len(), logged.len() - 60);
    assert_eq!(tail[0]["seq"], 60);
    assert_eq!(tail[0]["event"], logged[60]);

    let (status, missing) = get(&format!("{}api/events?id=nope", viewer.url));
    assert_eq!(status, 404, "{missing}");
}

#[test]
fn view_lists_a_workspace_folders_logs() {
    let tmpdir = tmp();
    let log = demo_log(tmpdir.path());
    // The demo's folder holds its log: viewing the folder lists it.
    let viewer = Viewer::start(log.parent().unwrap());
    let (_, list) = get(&format!("{}api/sessions", viewer.url));
    let list: Value = serde_json::from_str(&list).unwrap();
    let ids: Vec<_> = list.as_array().unwrap().iter().map(|s| &s["id"]).collect();
    assert_eq!(ids, ["session"], "{list}");
}

#[test]
fn view_of_a_missing_target_is_one_sentence_and_exit_2() {
    let out = run(dsh().args(["view", "--no-open", "/nonexistent/dsh-view.jsonl"]));
    assert_eq!(out.code, 2, "{}", out.both());
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("/nonexistent/dsh-view.jsonl"),
        "{}",
        out.stderr
    );
}

#[test]
fn view_reads_only_the_lines_appended_since_the_last_answer() {
    let tmpdir = tmp();
    let full = std::fs::read_to_string(demo_log(tmpdir.path())).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    let log = tmpdir.path().join("growing.jsonl");
    // The header and 10 events, then half a line being written.
    std::fs::write(&log, lines[..11].join("\n") + "\n" + &lines[11][..5]).unwrap();
    let viewer = Viewer::start(&log);
    let ask = |after: u64, offset: u64| -> Value {
        let (status, body) = get(&format!(
            "{}api/events?id=growing&after={after}&offset={offset}",
            viewer.url
        ));
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    };
    let first = ask(0, 0);
    assert_eq!(
        first["events"].as_array().unwrap().len(),
        10,
        "not the torn line"
    );
    assert_eq!(first["next"], 10);
    let offset = first["offset"].as_u64().unwrap();
    assert_eq!(offset as usize, lines[..11].join("\n").len() + 1);

    // The line is finished and two more come: only those three are read, numbered on.
    let mut grown = lines[..14].join("\n");
    grown.push('\n');
    std::fs::write(&log, &grown).unwrap();
    let more = ask(10, offset);
    let seqs: Vec<_> = more["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["seq"])
        .collect();
    assert_eq!(seqs, [10, 11, 12]);
    assert_eq!(
        more["events"][2]["event"],
        serde_json::from_str::<Value>(lines[13]).unwrap()
    );
    assert_eq!(more["header"], Value::Null, "sent once");
    assert_eq!(more["reset"], false);

    // Repaired to something shorter: read whole again, and said so.
    std::fs::write(&log, lines[..5].join("\n") + "\n").unwrap();
    let again = ask(13, more["offset"].as_u64().unwrap());
    assert_eq!(again["reset"], true);
    assert_eq!(again["events"].as_array().unwrap().len(), 4);
    assert_eq!(again["events"][0]["seq"], 0);
}

#[test]
fn view_streams_the_lines_appended_to_a_log_as_server_sent_events() {
    let tmpdir = tmp();
    let full = std::fs::read_to_string(demo_log(tmpdir.path())).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    let log = tmpdir.path().join("growing.jsonl");
    std::fs::write(&log, lines[..11].join("\n") + "\n").unwrap();
    let viewer = Viewer::start(&log);
    let url = format!("{}api/stream?id=growing&after=0&offset=0", viewer.url);
    let mut stream = Stream::open(&url, None);
    let first = stream.next().unwrap();
    let body = first.json();
    assert_eq!(body["events"].as_array().unwrap().len(), 10);
    assert_eq!(body["header"], header(&log));
    let offset = lines[..11].join("\n").len() + 1;
    assert_eq!(first.id, format!("10:{offset}"));

    // Three lines appended: pushed, numbered on, without asking.
    {
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        for l in &lines[11..14] {
            writeln!(f, "{l}").unwrap();
        }
    }
    let pushed = stream.next().unwrap().json();
    let seqs: Vec<_> = pushed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [10, 11, 12], "{pushed}");
    assert_eq!(
        pushed["events"][2]["event"],
        serde_json::from_str::<Value>(lines[13]).unwrap()
    );
    assert_eq!(pushed["header"], Value::Null, "sent once");

    // A browser that reconnects says where it stopped: only what followed comes again.
    let mut again = Stream::open(&url, Some(&first.id));
    let resumed = again.next().unwrap().json();
    assert_eq!(resumed["events"][0]["seq"], 10, "{resumed}");
    assert_eq!(resumed["events"].as_array().unwrap().len(), 3);

    // A session that cannot be read is a plain error answer, not a stream.
    let (status, body) = get(&format!("{}api/stream?id=nope", viewer.url));
    assert_eq!(status, 404, "{body}");
}

#[test]
fn view_step_timing_holds_code_mode_sub_calls_within_their_run_code() {
    let tmpdir = tmp();
    let log = demo_log(tmpdir.path());
    let logged = events(&log);
    let run_code = of_type(&logged, "dsh/step-timing")
        .iter()
        .flat_map(|t| t["data"]["calls"].as_array().unwrap().iter())
        .find(|c| c["callId"] == "call_run_code")
        .cloned()
        .expect("the demo's run_code step is timed");
    let subs = run_code["subs"].as_array().expect("its sub-calls' timing");
    let ids: Vec<_> = subs.iter().map(|s| s["callId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["call_run_code:code:1", "call_run_code:code:2"]);
    let at = |c: &Value, k: &str| {
        c[k].as_u64()
            .unwrap_or_else(|| panic!("{k} missing in {c}"))
    };
    for sub in subs {
        let marks: Vec<u64> = ["prepare", "dispatch", "dispatched", "finalize", "done"]
            .iter()
            .map(|k| at(sub, k))
            .collect();
        assert!(marks.windows(2).all(|w| w[0] <= w[1]), "{sub}");
        // On the step's clock, inside the run_code's body.
        assert!(at(&run_code, "dispatch") <= marks[0], "{run_code}");
        assert!(marks[4] <= at(&run_code, "dispatched"), "{run_code}");
    }
    // Only the root calls are listed: a sub-call is not a call of the step.
    let listed = of_type(&logged, "dsh/step-timing")
        .iter()
        .flat_map(|t| t["data"]["calls"].as_array().unwrap().iter())
        .filter(|c| c["callId"].as_str().unwrap().contains(":code:"))
        .count();
    assert_eq!(listed, 0);
    // Every reader skips the event: the log checks clean.
    assert_checks_clean(&log);
}
