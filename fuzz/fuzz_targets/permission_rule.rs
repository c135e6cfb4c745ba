//! A permission rule pattern and a call subject (split at the first newline): parsing, loading
//! from a policy table, and deciding a call with it.
#![no_main]

use std::sync::OnceLock;

use dsh_core::{
    Arguments, Json, Signal, ToolDefinition, ToolExecution, ToolExecutionInput, ToolOutput,
    ToolRegistry,
};
use dsh_guard::{PermissionAction, PermissionRule, PermissionRules};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fn registry() -> &'static ToolRegistry {
    static REG: OnceLock<ToolRegistry> = OnceLock::new();
    REG.get_or_init(|| {
        let reg = ToolRegistry::new();
        for name in ["bash", "read_file"] {
            if let Ok(def) = ToolDefinition::builder(name, "fuzz fixture")
                .output(ToolOutput::string())
                .permission_subject(|v| v.get("s")?.as_str().map(str::to_owned))
                .execute(|_| async { Ok(Json::string("")) })
                .build()
                && let Ok(h) = reg.register(def)
            {
                h.keep();
            }
        }
        reg
    })
}

fuzz_target!(|data: &[u8]| {
    dsh_fuzz::on_small_stack(|| {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        let (rule, subject) = text.split_once('\n').unwrap_or((text, ""));
        let parsed = PermissionRule::parse(rule, "fuzz");
        let built = PermissionRules::new(registry().clone()).deny(rule);
        assert_eq!(
            parsed.is_ok(),
            built.is_ok(),
            "parse and the builder disagree on {rule:?}"
        );
        if let Ok(p) = &parsed {
            assert_eq!(p.text(), rule.trim());
        }
        if let Ok(rules) = built {
            for name in ["bash", "read_file", rule] {
                let input = ToolExecutionInput::new(
                    "c1",
                    name,
                    Arguments::from_value(json!({ "s": subject }))
                        .unwrap_or(Arguments::from_raw("{}")),
                )
                .with_signal(Signal::never());
                let decision = rules.decide(&ToolExecution::new(input)).action();
                // Only deny rules and the default (allow) are present.
                assert!(matches!(
                    decision,
                    PermissionAction::Deny | PermissionAction::Allow | PermissionAction::Ask
                ));
            }
        }
        // The same rule from a policy table (a TOML basic string).
        let quoted = serde_json::to_string(rule).unwrap_or_default();
        let toml = format!("[permissions]\ndeny = [{quoted}]\n");
        let _ = PermissionRules::from_toml(&toml, registry().clone());
    });
});
