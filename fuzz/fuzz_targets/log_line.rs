//! One event line after a valid header and a pending call: parsed on its own, then as a complete
//! line and as a torn last line of a log (read, check, repair).
#![no_main]

use dsh_fuzz::{HEADER, OPEN_CALL, assert_event_round_trips, exercise_log};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dsh_fuzz::on_small_stack(|| {
        if let Ok(line) = std::str::from_utf8(data)
            && let Ok(event) = dsh_session::Event::from_json_line(line)
        {
            assert_event_round_trips(&event);
            let _ = event.as_tool_call();
            let _ = event.as_tool_result();
            let _ = event.kind();
        }
        let mut log = Vec::with_capacity(HEADER.len() + OPEN_CALL.len() + data.len() + 1);
        log.extend_from_slice(HEADER.as_bytes());
        log.extend_from_slice(OPEN_CALL.as_bytes());
        log.extend_from_slice(data);
        // As a torn last line, then as a complete one.
        exercise_log(&log);
        log.push(b'\n');
        exercise_log(&log);
    });
});
