//! A parameter schema and a value (two JSON texts, split at the first newline): schema checking,
//! validation, and a validating tool built from the schema. Nothing panics or overflows.
#![no_main]

use dsh_core::validate::{check_schema, validate};
use dsh_core::{Arguments, Json, ToolDefinition, ToolOutput};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dsh_fuzz::on_small_stack(|| {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        let (schema_text, value_text) = text.split_once('\n').unwrap_or((text, "{}"));
        let Ok(schema) = Json::parse(schema_text) else {
            return;
        };
        let args = Arguments::from_raw(value_text);
        let value = args.json().cloned().unwrap_or_else(Json::empty_object);
        let well_formed = check_schema(schema.value()).is_ok();
        let out = validate(schema.value(), value.value(), "");
        if well_formed {
            assert!(
                out.is_ok(),
                "a checked schema failed validation as malformed: {out:?}"
            );
        }
        let _ = validate(schema.value(), value.value(), "value");
        if let Ok(def) = ToolDefinition::builder("t", "fuzz fixture")
            .validated_parameters(schema)
            .output(ToolOutput::string())
            .execute(|_| async { Ok(Json::string("")) })
            .build()
        {
            let _ = def.check_arguments(&args);
            let _ = def.is_concurrency_safe(&args);
        }
    });
});
