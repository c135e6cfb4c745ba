//! The store seam (spec L1, L3, I4): a sink keyed by seq sees every line with its seq, in call
//! order, without gap or duplicate; a session resumed from a log through a sink gets the same
//! crash repair as a file, and the sink's lines read back byte-identical to the file's log.

use std::sync::{Arc, Mutex};

use dsh_session::{Event, Lines, LogSink, OpenOptions, Session, SessionError, check_bytes, types};
use serde_json::json;

use super::support::{j, tempdir};

/// Keeps `(seq, span, line)` rows, as a database would.
#[derive(Clone, Default)]
struct Rows {
    rows: Arc<Mutex<Vec<(u64, u64, String)>>>,
    groups: Arc<Mutex<Vec<usize>>>,
}

impl LogSink for Rows {
    fn append_durably(&mut self, _bytes: &[u8]) -> std::io::Result<()> {
        Err(std::io::Error::other("a keyed sink gets whole groups"))
    }
    fn truncate(&mut self, _len: u64) -> std::io::Result<()> {
        Ok(())
    }
    fn append_lines(&mut self, lines: &Lines<'_>) -> std::io::Result<()> {
        let mut rows = self.rows.lock().expect("rows");
        let mut next = rows.last().map(|(s, span, _)| s + span);
        for line in lines.iter() {
            assert!(next.is_none_or(|n| n == line.seq), "no gap, no duplicate");
            next = Some(line.seq + line.span);
            let text = String::from_utf8(line.text.to_vec()).expect("utf-8");
            rows.push((line.seq, line.span, text));
        }
        assert_eq!(lines.end_seq(), next);
        self.groups.lock().expect("groups").push(lines.len());
        Ok(())
    }
}

impl Rows {
    fn export(&self, header: &str) -> Vec<u8> {
        let mut out = format!("{header}\n").into_bytes();
        for (_, _, line) in self.rows.lock().expect("rows").iter() {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        out
    }
}

fn chunks() -> Event {
    Event::other(
        "assistant/text-chunks",
        j(json!({"turn": 1, "step": 1, "texts": ["a", "b", "c"]})),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l3_a_keyed_sink_gets_seqs_in_call_order_and_exports_byte_identical_to_the_file() {
    let dir = tempdir();
    let path = dir.path().join("log.jsonl");
    let (file, _) = Session::open_jsonl(&path, OpenOptions::new().id("seam"))
        .await
        .expect("file");
    let header = std::fs::read_to_string(&path).expect("read");
    let header = header.trim_end().to_owned();
    let rows = Rows::default();
    let (keyed, report) = Session::resume_with_sink(
        format!("{header}\n").as_bytes(),
        rows.clone(),
        OpenOptions::new(),
    )
    .expect("resumes");
    assert!(report.is_clean());
    let events = vec![Event::turn_start(1), Event::step_start(1, 1), chunks()];
    for session in [&file, &keyed] {
        let mut pending = Vec::new();
        for e in &events {
            pending.push(session.append(e.clone()));
        }
        for i in 0..40 {
            pending.push(session.append(Event::other("test/note", j(json!({"i": i})))));
        }
        let seqs: Vec<u64> = futures::future::join_all(pending)
            .await
            .into_iter()
            .map(|r| r.expect("acked"))
            .collect();
        assert_eq!(
            &seqs[..4],
            [0, 1, 2, 5],
            "a chunk run of three occupies three seqs"
        );
        session.close().await.expect("close");
    }
    let file_bytes = std::fs::read(&path).expect("read");
    assert_eq!(rows.export(&header), file_bytes);
    assert_eq!(rows.rows.lock().expect("rows").len(), 43);
}

#[tokio::test]
async fn i4_a_session_resumed_through_a_sink_is_repaired_as_a_file_and_the_repair_goes_to_the_sink()
{
    let header = r#"{"type":"session","version":0,"id":"r","cwd":"/"}"#;
    let mut log = format!("{header}\n");
    for e in [
        Event::turn_start(1),
        Event::step_start(1, 1),
        Event::tool_call(1, 1, "c1", "echo", r#"{"text":"hi"}"#),
    ] {
        log.push_str(&e.to_json_line());
        log.push('\n');
    }
    let rows = Rows::default();
    let (session, report) = Session::resume_with_sink(
        log.as_bytes(),
        rows.clone(),
        OpenOptions::new().strict(false),
    )
    .expect("resumes");
    assert_eq!(report.interrupted_calls.len(), 1);
    assert_eq!(report.closed_step, Some((1, 1)));
    assert_eq!(report.closed_turn, Some(1));
    let written = rows.rows.lock().expect("rows").clone();
    let seqs: Vec<u64> = written.iter().map(|r| r.0).collect();
    assert_eq!(
        seqs,
        [3, 4, 5],
        "result, step/end, turn/end after the three kept events"
    );
    assert!(written[0].2.contains("INTERRUPTED"));
    assert_eq!(
        rows.groups.lock().expect("groups").as_slice(),
        [3],
        "one group"
    );
    let mut whole = log.into_bytes();
    whole.extend_from_slice(&rows.export(header)[header.len() + 1..]);
    assert!(
        check_bytes(&whole).is_empty(),
        "the repaired log checks clean"
    );
    assert_eq!(
        session.append(Event::turn_start(2)).await.expect("append"),
        6
    );
    assert_eq!(session.events().len(), 7);
    assert_eq!(
        session
            .events()
            .iter()
            .last()
            .map(|(_, e)| e.event_type().to_owned()),
        Some(types::TURN_START.to_owned())
    );
}

#[test]
fn a_log_given_to_a_sink_with_a_bad_line_is_refused_naming_the_line_and_nothing_is_written() {
    let log = "{\"type\":\"session\",\"version\":0,\"id\":\"b\"}\nnot json\n{\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n";
    let rows = Rows::default();
    let err = Session::resume_with_sink(log.as_bytes(), rows.clone(), OpenOptions::new())
        .expect_err("refused");
    assert!(
        matches!(err, SessionError::Corrupt { line: 2, .. }),
        "{err}"
    );
    let torn = "{\"type\":\"session\",\"version\":0,\"id\":\"b\"}\n{\"type\":\"turn/st";
    let err = Session::resume_with_sink(torn.as_bytes(), rows.clone(), OpenOptions::new())
        .expect_err("refused");
    assert!(
        matches!(err, SessionError::Corrupt { line: 2, .. }),
        "{err}"
    );
    assert!(rows.rows.lock().expect("rows").is_empty());
}
