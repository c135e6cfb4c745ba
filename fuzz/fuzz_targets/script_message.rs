//! A scripted model: the whole script (one assistant message per line, OpenAI or Anthropic
//! shape) and each line on its own. An accepted message is well formed for the scheduler.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    dsh_fuzz::on_small_stack(|| {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        if let Ok(script) = dsh::parse_script(text) {
            assert!(!script.steps.is_empty(), "an accepted script has a step");
            for step in &script.steps {
                let calls = dsh::scheduler::tool_calls_of(step);
                let mut ids = std::collections::HashSet::new();
                for call in &calls {
                    assert!(!call.call_id.is_empty(), "an accepted call has an id");
                    assert!(!call.name.is_empty(), "an accepted call has a name");
                    assert!(ids.insert(call.call_id.clone()), "duplicate id accepted");
                    let _ = dsh_core::Arguments::from_raw(&call.arguments);
                }
            }
        }
        for line in text.lines() {
            let Ok(value) = dsh_core::json::parse_value(line) else {
                continue;
            };
            if let Ok(message) = dsh::script::parse_message(&value) {
                assert_eq!(
                    message.get("role").and_then(Value::as_str),
                    Some("assistant")
                );
                assert!(message.get("content").is_some_and(Value::is_array));
                dsh_core::json::dismantle(message);
            }
            dsh_core::json::dismantle(value);
        }
    });
});
