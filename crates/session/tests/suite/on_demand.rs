//! Events whose data is kept as the caller's typed fields and written on demand
//! (`Event::on_demand`, `OnDemandData`): the line, the tree and a durable log's line are those
//! of the same data written at once (`Event::from_data`), byte for byte, and a writer that
//! misuses its `DataWriter` loses no event (spec L2).

use std::sync::{Arc, LazyLock};

use dsh_session::{
    DataError, DataWriter, Event, Keys, OnDemandData, OpenOptions, Session, read_log,
};
use proptest::prelude::*;

use super::support::tempdir;

/// `{"turn":..,"label":..,"items":[n, ...]}` (depth 2), or with `misuse` a writer that leaves
/// its array open.
struct Sample {
    turn: u64,
    label: String,
    items: Vec<u64>,
    misuse: bool,
}

static TOP: LazyLock<Keys> = LazyLock::new(|| match Keys::new(&["turn", "label", "items"]) {
    Ok(keys) => keys,
    Err(e) => panic!("the sample's keys: {e}"),
});

impl Sample {
    fn writer(&self) -> DataWriter<'static> {
        let mut data = DataWriter::new(&TOP, 16);
        data.u64(0, self.turn);
        data.str(1, &self.label);
        data.open_array(2);
        for n in &self.items {
            data.item_u64(*n);
        }
        if !self.misuse {
            data.close();
        }
        data
    }

    fn eager(&self) -> Event {
        Event::from_data(Arc::from("dsh/sample"), self.writer()).expect("a well-used writer")
    }
}

impl OnDemandData for Sample {
    fn write(&self) -> DataWriter<'static> {
        self.writer()
    }

    fn depth(&self) -> usize {
        2
    }
}

fn on_demand(sample: Sample) -> Event {
    Event::on_demand(Arc::from("dsh/sample"), Box::new(sample)).expect("not a chunk run")
}

proptest! {
    #[test]
    fn l2_data_written_on_demand_is_the_data_written_at_once(
        turn in any::<u64>(),
        label in any::<String>(),
        items in prop::collection::vec(any::<u64>(), 0..5),
    ) {
        let copy = || Sample { turn, label: label.clone(), items: items.clone(), misuse: false };
        let eager = copy().eager();
        let lazy = on_demand(copy());
        prop_assert_eq!(lazy.to_json_line(), eager.to_json_line());
        prop_assert_eq!(lazy.data(), eager.data());
        // Written again, the same bytes.
        prop_assert_eq!(lazy.to_json_line(), eager.to_json_line());
        let read = Event::from_json_line(&lazy.to_json_line()).expect("reads back");
        prop_assert_eq!(read.to_json_line(), eager.to_json_line());
    }
}

#[tokio::test]
async fn l2_a_durable_log_writes_data_kept_for_later_as_its_line() {
    let dir = tempdir();
    let path = dir.path().join("on-demand.jsonl");
    let sample = || Sample {
        turn: 3,
        label: "a \"quoted\"\nlabel".to_owned(),
        items: vec![1, u64::MAX],
        misuse: false,
    };
    let (session, _) = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .expect("opens");
    let seq = session.append(on_demand(sample())).await.expect("appends");
    session.close().await.expect("closes");
    let bytes = std::fs::read(&path).expect("reads the file");
    let log = read_log(&bytes).expect("a clean log");
    let (read_seq, read) = log.events.last().expect("the event");
    assert_eq!(*read_seq, seq);
    assert_eq!(read.to_json_line(), sample().eager().to_json_line());
    let last_line = std::str::from_utf8(&bytes)
        .expect("utf-8")
        .lines()
        .last()
        .expect("a line");
    assert_eq!(last_line, sample().eager().to_json_line());
}

#[tokio::test]
async fn a_misused_writer_gives_empty_data_and_the_event_keeps_its_place() {
    let bad = Sample {
        turn: 1,
        label: "x".to_owned(),
        items: vec![1],
        misuse: true,
    };
    // Written at once, the misuse is refused.
    assert!(matches!(
        Event::from_data(Arc::from("dsh/sample"), bad.writer()),
        Err(DataError::Misuse(_))
    ));
    // Kept for later, it is found only when written: the event stays, with `{}` as its data.
    let session = Session::in_memory("misuse");
    let seq = session.append(on_demand(bad)).await.expect("appends");
    let events = session.events();
    let (_, event) = events.iter().find(|(s, _)| *s == seq).expect("kept");
    assert_eq!(event.to_json_line(), r#"{"type":"dsh/sample","data":{}}"#);
}

#[test]
fn a_chunk_run_type_is_refused() {
    let sample = Sample {
        turn: 1,
        label: String::new(),
        items: Vec::new(),
        misuse: false,
    };
    let refused = Event::on_demand(Arc::from("assistant/text-chunks"), Box::new(sample));
    assert!(
        matches!(refused, Err(DataError::ChunkRun(_))),
        "{refused:?}"
    );
}

/// A writer that declares a shallower text than it writes.
struct Shallow(Sample);

impl OnDemandData for Shallow {
    fn write(&self) -> DataWriter<'static> {
        self.0.writer()
    }

    fn depth(&self) -> usize {
        1
    }
}

#[tokio::test]
async fn data_deeper_than_declared_gives_empty_data_whose_line_reads_back() {
    let shallow = Shallow(Sample {
        turn: 1,
        label: "x".to_owned(),
        items: vec![1],
        misuse: false,
    });
    let event = Event::on_demand(Arc::from("dsh/sample"), Box::new(shallow)).expect("typed");
    assert_eq!(event.to_json_line(), r#"{"type":"dsh/sample","data":{}}"#);
    assert_eq!(event.data().value(), &serde_json::json!({}));
    let read = Event::from_json_line(&event.to_json_line()).expect("reads back");
    assert_eq!(read.to_json_line(), event.to_json_line());
}
