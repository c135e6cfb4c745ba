//! A model's raw argument string: the argument snapshot (`Arguments::from_raw`), its round trip,
//! and schema validation by typed tools (the demo tools) and a hand-written schema.
#![no_main]

use std::sync::OnceLock;

use dsh_core::{Arguments, Json, ToolDefinition, ToolOutput};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fn tools() -> &'static [ToolDefinition] {
    static TOOLS: OnceLock<Vec<ToolDefinition>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let mut tools = dsh::demo_tools::demo_tools().unwrap_or_default();
        let schema = json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "edits": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"old": {"type": "string"}, "new": {"type": "string"}},
                    "required": ["old", "new"],
                    "additionalProperties": false
                }},
                "mode": {"enum": ["a", "b", 1, null]},
                "tree": {"$ref": "#/$defs/node"}
            },
            "required": ["file_path"],
            "$defs": {"node": {"type": ["object", "null"], "properties": {
                "next": {"$ref": "#/$defs/node"}, "tags": {"type": "array", "items": {"type": "string"}}
            }}}
        });
        if let Ok(def) = ToolDefinition::builder("patch", "fuzz fixture")
            .validated_parameters(Json::from_shallow(schema))
            .output(ToolOutput::string())
            .execute(|_| async { Ok(Json::string("")) })
            .build()
        {
            tools.push(def);
        }
        tools
    })
}

fuzz_target!(|data: &[u8]| {
    dsh_fuzz::on_small_stack(|| {
        let Ok(raw) = std::str::from_utf8(data) else {
            return;
        };
        let args = Arguments::from_raw(raw);
        match &args {
            Arguments::Json(j) => {
                // The snapshot round-trips through its own text.
                let again = Arguments::from_raw(&j.to_json_string());
                assert_eq!(again, args, "arguments change through their own text");
                assert!(args.parse_error().is_none());
            }
            Arguments::Raw(r) => {
                assert_eq!(&**r, raw, "raw arguments are kept verbatim");
                assert!(
                    args.parse_error().is_some(),
                    "raw arguments with no parse error"
                );
            }
        }
        let _ = args.to_text();
        for def in tools() {
            let checked = def.check_arguments(&args);
            if checked.is_ok() {
                assert!(args.json().is_some_and(|j| j.value().is_object()));
            }
            let safe = def.is_concurrency_safe(&args);
            if safe {
                assert!(
                    checked.is_ok(),
                    "invalid arguments classified parallel-safe"
                );
            }
        }
    });
});
