//! The loop's `step/start` promises on a session whose log is on disk (the other suites use an
//! in-memory log, where every append is durable at once): a `step/start` listener runs before
//! the model is asked, so a cancel there sends no request, on every step (LOOP-23), and sees the
//! event as the log's last (LOOP-67). The driver queues most of its framing; these hold because
//! it waits for `step/start` itself.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;

use dsh_agent::Cancel;
use dsh_session::{Header, LogSink, Session};
use parking_lot::Mutex;

use super::support::*;

/// A sink standing for the disk.
#[derive(Clone, Default)]
struct Disk(Arc<Mutex<Vec<u8>>>);

impl LogSink for Disk {
    fn append_durably(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0.lock().extend_from_slice(bytes);
        Ok(())
    }
    fn truncate(&mut self, _len: u64) -> std::io::Result<()> {
        Ok(())
    }
}

async fn on_disk() -> Rig {
    let session = Session::with_sink(Header::new("on-disk", "/tmp"), Disk::default()).unwrap();
    rig_over(session, |c| c, &[], |_, _| {}).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_67_a_step_start_listener_sees_it_last_in_a_log_on_disk() {
    let rig = on_disk().await;
    let session = rig.session.clone();
    let wrong = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = wrong.clone();
    let _sub = rig.session.subscribe(move |seq, e| {
        if e.event_type() == "step/start" {
            let events = session.events();
            let last = events
                .iter()
                .last()
                .map(|(s, e)| (*s, e.event_type().to_owned()));
            if last.as_ref().map(|l| l.0) != Some(seq) {
                seen.lock()
                    .push(format!("step/start {seq}: the last is {last:?}"));
            }
        }
    });
    rig.server.push(echo_call("c1"));
    rig.server.push(say("ok"));
    rig.agent.prompt("go").await.unwrap();
    assert_eq!(rig.count("step/start"), 2);
    assert!(wrong.lock().is_empty(), "{:?}", wrong.lock());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_23_a_cancel_from_the_second_step_start_sends_no_request_in_a_log_on_disk() {
    let rig = on_disk().await;
    let agent = rig.agent.clone();
    let _sub = rig.session.subscribe(move |_, e| {
        if e.event_type() == "step/start"
            && e.data().value().get("step").and_then(|s| s.as_u64()) == Some(2)
        {
            agent.cancel(Cancel::user());
        }
    });
    rig.server.push(echo_call("c1"));
    rig.server.push(say("never"));
    rig.agent.prompt("go").await.unwrap();
    assert_eq!(
        rig.bodies().len(),
        1,
        "a request after the cancel: {:?}",
        rig.types()
    );
    assert_eq!(rig.count("assistant/message"), 1, "{:?}", rig.types());
}
