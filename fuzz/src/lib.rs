//! Shared checks of the fuzz targets: what must hold for any input, beyond "does not panic".
//!
//! A failed assertion here is a crash libFuzzer reports and keeps, like a panic in the code under
//! test.

use dsh_session::{Event, check_bytes, derive_messages_from, read_log, repair_bytes};

/// The stack each input runs on: small, so recursion that depends on the input (and is not
/// guarded by a grown stack) overflows at a depth short inputs can reach, as it would on a
/// worker thread with deeper input.
pub const SMALL_STACK: usize = 192 * 1024;

/// Runs `f` on a thread with a [`SMALL_STACK`]; a panic in it is re-raised here, so libFuzzer
/// records it, and a stack overflow aborts the process, which libFuzzer records too.
pub fn on_small_stack(f: impl FnOnce() + Send) {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .stack_size(SMALL_STACK)
            .spawn_scoped(scope, f);
        match handle {
            Ok(h) => {
                if let Err(panic) = h.join() {
                    std::panic::resume_unwind(panic);
                }
            }
            Err(e) => panic!("cannot start a fuzzing thread: {e}"),
        }
    });
}

/// A valid header line (version 0), newline included.
pub const HEADER: &str =
    "{\"type\":\"session\",\"version\":0,\"id\":\"fuzz\",\"createdAt\":0,\"cwd\":\"/\"}\n";

/// An open turn and step with one pending call `c1` at seq 2, newline included: a fuzzed
/// `tool/result` line after it can pair.
pub const OPEN_CALL: &str = concat!(
    "{\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n",
    "{\"type\":\"step/start\",\"data\":{\"turn\":1,\"step\":1}}\n",
    "{\"type\":\"tool/call\",\"data\":{\"turn\":1,\"step\":1,\"callId\":\"c1\",\"name\":\"echo\",\"arguments\":\"{}\"}}\n",
);

/// An event written and read back writes the same line again (the log format is a fixpoint).
pub fn assert_event_round_trips(event: &Event) {
    let line = event.to_json_line();
    let again = match Event::from_json_line(&line) {
        Ok(e) => e,
        Err(e) => panic!("an event's own line does not read back: {e}\nline: {line}"),
    };
    assert_eq!(
        again.to_json_line(),
        line,
        "an event's line changes on a round trip"
    );
    assert_eq!(again.seq_span(), event.seq_span());
}

/// Reads, checks and repairs a whole log, asserting:
/// - every event the strict reader returns round-trips, and the history derives;
/// - a log the strict reader accepts has no line-level problem the checker calls unreadable;
/// - repair keeps the bytes it does not cut, and is idempotent: a repaired log needs no repair.
pub fn exercise_log(bytes: &[u8]) {
    let problems = check_bytes(bytes);
    if let Ok(log) = read_log(bytes) {
        for (_, event) in &log.events {
            assert_event_round_trips(event);
        }
        let messages = derive_messages_from(log.events.iter().map(|(s, e)| (*s, &**e)));
        drop(messages);
        assert!(
            log.header.is_some() || log.events.is_empty(),
            "events without a header"
        );
    }
    drop(problems);
    if let Ok((out, report)) = repair_bytes(bytes) {
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        assert!(
            out.starts_with(&bytes[..complete]),
            "repair changed or cut a complete line"
        );
        drop(report);
        match repair_bytes(&out) {
            Ok((again, second)) => {
                assert!(
                    second.is_clean(),
                    "a repaired log needs repair again: {second:?}"
                );
                assert_eq!(again, out, "repairing a repaired log changed it");
            }
            Err(e) => panic!("a repaired log cannot be repaired again: {e}"),
        }
    }
}
