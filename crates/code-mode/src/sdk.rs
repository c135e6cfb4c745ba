//! The generated SDK description of `tools` (CODE-02, 05, 09, 10, 14, 17): TypeScript
//! declarations (for the TypeScript and JavaScript runtimes) or a Python protocol, from each
//! callable tool's parameter and output schemas.
//!
//! Guarantees: the text depends only on the tools and their order (byte-identical for the same
//! input); a schema that cannot be expressed becomes an open record (parameters) or `unknown`;
//! projection stops at [`MAX_TYPE_DEPTH`] levels, so a schema nested thousands of levels deep
//! renders without deep recursion.

use std::fmt::Write as _;
use std::sync::Arc;

use dsh_core::ToolDefinition;
use serde_json::{Map, Value};

use crate::error::CodeModeError;

/// Schema levels projected into a type; deeper parts are `unknown`.
pub const MAX_TYPE_DEPTH: usize = 8;

/// Union members kept before the rest collapses into `unknown`.
const MAX_UNION: usize = 24;

const OPEN_RECORD: &str = "Record<string, unknown>";

/// Renders the SDK for a runtime language.
pub fn render_sdk(language: &str, tools: &[Arc<ToolDefinition>]) -> Result<String, CodeModeError> {
    match language {
        "typescript" | "javascript" => Ok(typescript(tools, language == "javascript")),
        "python" => Ok(python(tools)),
        other => Err(CodeModeError::NoSdkRenderer(other.to_owned())),
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn key(name: &str) -> String {
    if is_identifier(name) {
        name.to_owned()
    } else {
        serde_json::to_string(name).unwrap_or_else(|_| "\"\"".to_owned())
    }
}

/// One line of doc comment text (no comment terminators, no newlines).
fn doc(text: &str) -> String {
    text.replace("*/", "* /")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn typescript(tools: &[Arc<ToolDefinition>], plain_js: bool) -> String {
    let mut out = String::new();
    out.push_str(
        "// The tools a run_code program can call. Each call returns a Promise of the tool's \
         value and rejects with a ToolCallError.\n",
    );
    if plain_js {
        out.push_str("// Types are documentation only: write plain JavaScript.\n");
    }
    out.push_str("declare const tools: {\n");
    for t in tools {
        let description = doc(t.description());
        if !description.is_empty() {
            let _ = writeln!(out, "  /** {description} */");
        }
        let args = parameters_type(t.parameters().value());
        let ret = ts_type(t.output().schema().value(), 0, 2);
        let _ = writeln!(out, "  {}(args: {args}): Promise<{ret}>;", key(t.name()));
    }
    out.push_str("};\n");
    out.push_str(
        "declare class ToolCallError extends Error {\n  readonly name: \"ToolCallError\";\n  \
         readonly toolName: string;\n}\n",
    );
    out
}

/// A parameter type: an object type when the schema is an expressible object, else an open
/// record.
fn parameters_type(schema: &Value) -> String {
    let t = ts_type(schema, 0, 2);
    if t.starts_with('{') || t.starts_with("Record<") {
        t
    } else {
        OPEN_RECORD.to_owned()
    }
}

fn literal(v: &Value) -> Option<String> {
    match v {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => {
            serde_json::to_string(v).ok()
        }
        _ => None,
    }
}

fn union(mut members: Vec<String>) -> String {
    let mut seen = std::collections::HashSet::new();
    members.retain(|m| seen.insert(m.clone()));
    if members.is_empty() || members.len() > MAX_UNION || members.iter().any(|m| m == "unknown") {
        return "unknown".to_owned();
    }
    members.join(" | ")
}

/// The TypeScript type of a schema, `depth` levels in, indented by `indent` spaces.
fn ts_type(schema: &Value, depth: usize, indent: usize) -> String {
    stacker::maybe_grow(32 * 1024, 1024 * 1024, || {
        ts_type_inner(schema, depth, indent)
    })
}

fn ts_type_inner(schema: &Value, depth: usize, indent: usize) -> String {
    let Value::Object(s) = schema else {
        return "unknown".to_owned();
    };
    if depth >= MAX_TYPE_DEPTH {
        return "unknown".to_owned();
    }
    if let Some(c) = s.get("const") {
        return literal(c).unwrap_or_else(|| "unknown".to_owned());
    }
    if let Some(Value::Array(values)) = s.get("enum") {
        return union(
            values
                .iter()
                .map(|v| literal(v).unwrap_or_else(|| "unknown".to_owned()))
                .collect(),
        );
    }
    for combinator in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = s.get(combinator) {
            if branches.len() > MAX_UNION {
                return "unknown".to_owned();
            }
            return union(
                branches
                    .iter()
                    .map(|b| ts_type(b, depth + 1, indent))
                    .collect(),
            );
        }
    }
    if s.contains_key("$ref") || s.contains_key("allOf") || s.contains_key("not") {
        return "unknown".to_owned();
    }
    match s.get("type") {
        Some(Value::String(t)) => typed(t, s, depth, indent),
        Some(Value::Array(ts)) => union(
            ts.iter()
                .map(|t| {
                    t.as_str()
                        .map_or("unknown".to_owned(), |t| typed(t, s, depth, indent))
                })
                .collect(),
        ),
        _ if s.contains_key("properties") => typed("object", s, depth, indent),
        _ => "unknown".to_owned(),
    }
}

fn typed(t: &str, s: &Map<String, Value>, depth: usize, indent: usize) -> String {
    match t {
        "string" => "string".to_owned(),
        "number" | "integer" => "number".to_owned(),
        "boolean" => "boolean".to_owned(),
        "null" => "null".to_owned(),
        "array" => match s.get("items") {
            Some(items @ Value::Object(_)) => {
                let inner = ts_type(items, depth + 1, indent);
                if inner.contains(' ') || inner.contains('\n') {
                    format!("Array<{inner}>")
                } else {
                    format!("{inner}[]")
                }
            }
            _ => "unknown[]".to_owned(),
        },
        "object" => object_type(s, depth, indent),
        _ => "unknown".to_owned(),
    }
}

fn object_type(s: &Map<String, Value>, depth: usize, indent: usize) -> String {
    let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let additional = s.get("additionalProperties");
    let closed = matches!(additional, Some(Value::Bool(false)));
    let props = s.get("properties").and_then(Value::as_object);
    let Some(props) = props.filter(|p| !p.is_empty()) else {
        return match additional {
            Some(Value::Bool(false)) => "{}".to_owned(),
            Some(a @ Value::Object(_)) => {
                format!("Record<string, {}>", ts_type(a, depth + 1, indent))
            }
            _ => OPEN_RECORD.to_owned(),
        };
    };
    let pad = " ".repeat(indent + 2);
    let mut out = String::from("{\n");
    for (name, prop) in props {
        if let Some(d) = prop.get("description").and_then(Value::as_str) {
            let d = doc(d);
            if !d.is_empty() {
                let _ = writeln!(out, "{pad}/** {d} */");
            }
        }
        let optional = if required.contains(&name.as_str()) {
            ""
        } else {
            "?"
        };
        let ty = ts_type(prop, depth + 1, indent + 2);
        let _ = writeln!(out, "{pad}{}{optional}: {ty};", key(name));
    }
    if !closed {
        let _ = writeln!(out, "{pad}[key: string]: unknown;");
    }
    out.push_str(&" ".repeat(indent));
    out.push('}');
    out
}

fn python(tools: &[Arc<ToolDefinition>]) -> String {
    let mut out = String::new();
    out.push_str("from typing import Any, Protocol\n\n\n");
    out.push_str(
        "class ToolCallError(Exception):\n    \"\"\"A tool call failed or was denied.\"\"\"\n\n    \
         tool_name: str\n    message: str\n\n\n",
    );
    out.push_str("class Tools(Protocol):\n");
    out.push_str("    \"\"\"The tools a run_code program can call.\"\"\"\n");
    if tools.is_empty() {
        out.push_str("    ...\n");
    }
    for t in tools {
        let name = t.name();
        if is_identifier(name) && !name.contains('$') {
            let _ = writeln!(
                out,
                "\n    async def {name}(self, args: dict[str, Any]) -> Any:"
            );
        } else {
            let _ = writeln!(
                out,
                "\n    # call as: await getattr(tools, {})(args)",
                serde_json::to_string(name).unwrap_or_default()
            );
            let _ = writeln!(
                out,
                "    async def _tool(self, args: dict[str, Any]) -> Any:"
            );
        }
        let description = doc(t.description()).replace("\"\"\"", "'''");
        let _ = writeln!(out, "        \"\"\"{description}\"\"\"");
        out.push_str("        ...\n");
    }
    out.push_str("\n\ntools: Tools\n");
    out.push_str(
        "# The program is the body of an async function: use top-level await, e.g.\n\
         # `value = await tools.<name>({...})`, and `return` a value to report it.\n",
    );
    out
}
