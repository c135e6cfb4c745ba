//! Adversarial cases the script reader cannot produce, driven through the library: duplicate call
//! ids handed straight to the scheduler, and a log whose disk fills up mid-turn (a failing
//! `LogSink`): a clear error, and every acknowledged event still on "disk" (spec I1, L3).

use std::sync::Arc;

use dsh::core::{Json, Signal};
use dsh::session::{Event, Header, LogSink, Session, check_events, read_log};
use dsh::{Approvals, Harness};
use parking_lot::Mutex;
use serde_json::{Value, json};

fn message(calls: &[(&str, &str, Value)]) -> Json {
    let content: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({"type": "tool-call", "id": id, "name": name, "arguments": args.to_string()})
        })
        .collect();
    Json::new(json!({"role": "assistant", "content": content, "id": "m1"})).unwrap()
}

fn text_of(event: &Event) -> String {
    event.as_tool_result().unwrap().content.unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Duplicate call ids in one message: refusing the second call would not give a clean log (the
/// second `tool/call` with that id is what the checker names, and spec S4 logs every call before
/// any policy), so both calls run, each result points at its own call's seq, and the checker's
/// only complaint is the duplicate id itself, on the second call's line.
#[tokio::test]
async fn adv_duplicate_call_ids_into_the_scheduler_are_made_unique_reversibly_and_both_get_paired_results()
 {
    let session = Session::in_memory("dup");
    let harness = Harness::builder(session.clone())
        .demo_tools(true)
        .approvals(Approvals::Never)
        .build()
        .await
        .unwrap();
    let mut driver = harness.driver();
    // Parallel twins, then exclusive twins in one message each.
    let steps = [
        message(&[
            ("same", "echo", json!({"text": "first"})),
            ("same", "echo", json!({"text": "second"})),
        ]),
        message(&[
            ("twin", "fail", json!({"message": "one"})),
            ("twin", "fail", json!({"message": "two"})),
        ]),
    ];
    driver.run_turn(steps, Signal::never()).await.unwrap();
    let events = session.events();
    let all: Vec<(u64, Event)> = events.iter().cloned().collect();
    let calls: Vec<u64> = all
        .iter()
        .filter(|(_, e)| e.as_tool_call().is_some())
        .map(|(s, _)| *s)
        .collect();
    let results: Vec<(u64, String, String)> = all
        .iter()
        .filter_map(|(_, e)| {
            let r = e.as_tool_result()?;
            Some((r.call_seq?, r.call_id.to_owned(), text_of(e)))
        })
        .collect();
    assert_eq!(calls.len(), 4);
    assert_eq!(
        results.iter().map(|r| r.0).collect::<Vec<_>>(),
        calls,
        "each result points at its own call, in model order"
    );
    let texts: Vec<&str> = results.iter().map(|r| r.2.as_str()).collect();
    assert_eq!(texts, ["first", "second", "Error: one", "Error: two"]);
    let ids: Vec<String> = all
        .iter()
        .filter_map(|(_, e)| e.as_tool_call().map(|c| c.call_id.to_owned()))
        .collect();
    assert_eq!(
        ids,
        ["same", "same-2", "twin", "twin-2"],
        "unique per session"
    );
    // The model's own id stays in the logged message, so the renaming can be undone.
    let originals: Vec<Value> = all
        .iter()
        .filter(|(_, e)| e.event_type() == "assistant/message")
        .flat_map(|(_, e)| {
            e.data().value()["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|b| b["originalId"].clone())
        .collect();
    assert_eq!(
        originals,
        [Value::Null, json!("same"), Value::Null, json!("twin")]
    );
    let problems = check_events(all.iter().map(|(s, e)| (*s, e)));
    assert_eq!(problems, vec![], "the log is clean");
}

/// A sink that holds "disk" bytes and refuses appends once `capacity` would be exceeded, the
/// way a full disk fails a write (ENOSPC); a failed append may leave a partial tail, which the
/// writer must cut.
struct FullDisk {
    disk: Arc<Mutex<Vec<u8>>>,
    capacity: usize,
}

impl LogSink for FullDisk {
    fn append_durably(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let mut disk = self.disk.lock();
        let room = self.capacity.saturating_sub(disk.len());
        if bytes.len() > room {
            disk.extend_from_slice(&bytes[..room]);
            return Err(std::io::Error::from_raw_os_error(28));
        }
        disk.extend_from_slice(bytes);
        Ok(())
    }

    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.disk.lock().truncate(len as usize);
        Ok(())
    }
}

#[tokio::test]
async fn adv_l3_a_full_disk_stops_the_turn_with_a_clear_error_and_loses_nothing_acknowledged() {
    for capacity in [300usize, 1200, 2500, 4000] {
        let disk = Arc::new(Mutex::new(Vec::new()));
        let session = Session::with_sink(
            Header::new("full", "/"),
            FullDisk {
                disk: disk.clone(),
                capacity,
            },
        )
        .unwrap();
        // What subscribers were told is what was acknowledged durable.
        let told = Arc::new(Mutex::new(Vec::new()));
        let t = told.clone();
        let _sub = session.subscribe(move |seq, e| t.lock().push((seq, e.to_json_line())));
        let harness = Harness::builder(session.clone())
            .demo_tools(true)
            .approvals(Approvals::Never)
            .build()
            .await
            .unwrap();
        let mut driver = harness.driver();
        let steps: Vec<Json> = (0..6)
            .map(|i| {
                let id_a = format!("a{i}");
                let id_b = format!("b{i}");
                message(&[
                    (&id_a, "echo", json!({"text": "x".repeat(100)})),
                    (&id_b, "sleep", json!({"ms": 1})),
                ])
            })
            .collect();
        let err = driver
            .run_turn(steps, Signal::never())
            .await
            .expect_err("the disk fills up");
        let text = err.to_string();
        assert!(
            text.contains("session log") && text.contains("No space left on device"),
            "{capacity}: {text}"
        );
        // Later appends are refused too, with the reason.
        let again = session.append(Event::turn_start(9)).await.unwrap_err();
        assert!(
            again.to_string().contains("earlier write failure"),
            "{again}"
        );
        // The disk holds exactly the acknowledged events: no partial line, nothing lost.
        let bytes = disk.lock().clone();
        let log = read_log(&bytes).unwrap_or_else(|e| panic!("{capacity}: {e}"));
        let on_disk: Vec<(u64, String)> = log
            .events
            .iter()
            .map(|(s, e)| (*s, e.to_json_line()))
            .collect();
        assert_eq!(on_disk, *told.lock(), "{capacity}");
        // Crash repair makes it whole.
        let (repaired, _) = dsh::session::repair_bytes(&bytes).unwrap();
        assert_eq!(dsh::session::check_bytes(&repaired), vec![], "{capacity}");
    }
}
