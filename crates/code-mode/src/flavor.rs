//! The `run_code` schema flavors: its description and parameter schema for each program
//! language (CODE-19..22). The flavor is chosen when the tool is mounted, from the runtime's
//! language; an unknown language is a mounting error that lists the known ones.

use dsh_core::Json;
use serde_json::json;

use crate::error::CodeModeError;

/// The languages with a flavor, in the order error messages list them.
pub const KNOWN_LANGUAGES: [&str; 3] = ["typescript", "javascript", "python"];

/// The language assumed when no runtime is mounted.
pub const DEFAULT_LANGUAGE: &str = "typescript";

/// What `run_code` tells the model for one language.
#[derive(Clone, Debug, PartialEq)]
pub struct Flavor {
    /// The language.
    pub language: &'static str,
    /// The tool description.
    pub description: String,
    /// The parameter schema (`code`, `description`).
    pub parameters: Json,
}

fn known_list() -> String {
    KNOWN_LANGUAGES
        .iter()
        .map(|l| format!("\"{l}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn parameters(label: &str) -> Json {
    Json::from_shallow(json!({
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "description": format!("The program: the body of an async {label} function."),
            },
            "description": {
                "type": "string",
                "description": "A short sentence saying what the program does.",
            },
        },
        "required": ["code", "description"],
    }))
}

fn script_description(label: &str, note: &str) -> String {
    format!(
        "Run a {label} program that calls tools through the global `tools` object.{note} The \
         program is the body of an async function: use top-level `await` on tool calls \
         (`await tools.name({{...}})`), run independent calls together with `Promise.all`, and \
         `return` a value to report it. A tool call resolves with the tool's value, or rejects \
         with a `ToolCallError` carrying `toolName` and `message`. `console.log` output is \
         captured and shown before the returned value. There is no filesystem, network, clock or \
         module system: only the tools. Pass a short `description` saying what the program does."
    )
}

/// The flavor for `language`, or an error naming the known languages.
pub fn flavor(language: &str) -> Result<Flavor, CodeModeError> {
    match language {
        "typescript" => Ok(Flavor {
            language: "typescript",
            description: script_description("TypeScript", ""),
            parameters: parameters("TypeScript"),
        }),
        "javascript" => Ok(Flavor {
            language: "javascript",
            description: script_description(
                "JavaScript",
                " Write plain JavaScript: type annotations are not supported.",
            ),
            parameters: parameters("JavaScript"),
        }),
        "python" => Ok(Flavor {
            language: "python",
            description: "Run a Python program that calls tools through the global `tools` \
                          object. The program is the body of an async function: use top-level \
                          `await tools.name({...})`, run independent calls together with \
                          `asyncio.gather`, and `return` a value to report it. A failed tool \
                          call raises `ToolCallError` with `tool_name` and `message`. Printed \
                          output is captured and shown before the returned value. Pass a short \
                          `description` saying what the program does."
                .to_owned(),
            parameters: parameters("Python"),
        }),
        other => Err(CodeModeError::NoFlavor {
            language: other.to_owned(),
            known: known_list(),
        }),
    }
}
