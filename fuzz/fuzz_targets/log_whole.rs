//! A whole session log, as bytes: read (strict), check, repair, and repair again.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dsh_fuzz::on_small_stack(|| {
        dsh_fuzz::exercise_log(data);
    });
});
