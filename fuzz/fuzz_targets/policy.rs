//! A policy file (TOML): parsed and validated; an accepted policy yields its permission rules.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dsh_fuzz::on_small_stack(|| {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        match dsh::Policy::parse(text) {
            Ok(policy) => {
                assert!(policy.max_parallel_tool_calls >= 1);
                let rules = policy.permissions(dsh::core::ToolRegistry::new());
                assert!(rules.is_ok(), "an accepted policy's rules fail: {rules:?}");
                let _ = dsh::Harness::supports(&policy);
            }
            Err(e) => {
                // Every error names where it is.
                let _ = e.to_string();
            }
        }
    });
});
