//! How a `run_code` outcome reads for the model (CODE-56, 58, 64, 65): the logs joined by
//! newlines, then the result (a string raw, anything else pretty JSON with two-space indent);
//! `(run_code completed with no output)` when there is neither; failures as
//! `code run failed (<kind>): <message>` with the captured output, if any.
//!
//! Guarantees: rendering is iterative, so a result of any depth renders without recursion;
//! indentation stops growing after [`PRETTY_DEPTH`] levels and deeper containers are written
//! compactly on one line, so the text stays proportional to the value.

use dsh_core::codes::messages::RUN_CODE_NO_OUTPUT;
use serde_json::Value;

use crate::outcome::CodeError;

/// Nesting levels written one item per line; deeper containers are written compactly.
pub const PRETTY_DEPTH: usize = 12;

/// The text of a successful run: logs, then the result.
pub fn render_output(logs: &[String], result: Option<&Value>) -> String {
    let mut parts: Vec<String> = Vec::with_capacity(2);
    if !logs.is_empty() {
        parts.push(logs.join("\n"));
    }
    if let Some(v) = result {
        parts.push(render_result(v));
    }
    if parts.is_empty() {
        RUN_CODE_NO_OUTPUT.to_owned()
    } else {
        parts.join("\n")
    }
}

/// The label between a failure's first line and the output captured before it.
pub const CAPTURED_OUTPUT: &str = "\nCaptured output:\n";

/// The text of a failed run: `code run failed (<kind>): <message>`, then
/// `\nCaptured output:\n<logs>` when the run printed anything (nothing when it did not).
pub fn render_failure(error: &CodeError, logs: &[String]) -> String {
    let head = failure_head(error);
    if logs.is_empty() {
        head
    } else {
        format!("{head}{CAPTURED_OUTPUT}{}", logs.join("\n"))
    }
}

/// `code run failed (<kind>): <message>`.
pub(crate) fn failure_head(error: &CodeError) -> String {
    format!("code run failed ({}): {}", error.kind, error.message)
}

/// A result value as text: a string raw, anything else pretty JSON (two-space indent, capped).
pub fn render_result(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => pretty(other),
    }
}

enum Work<'a> {
    Value(&'a Value, usize),
    Lit(&'static str),
    Key(&'a str),
    /// A newline and the indentation of this depth.
    Break(usize),
}

fn push_str_json(out: &mut String, s: &str) {
    match serde_json::to_string(s) {
        Ok(q) => out.push_str(&q),
        Err(_) => out.push_str("\"\""),
    }
}

/// Pretty JSON up to [`PRETTY_DEPTH`], compact below, without recursion.
pub fn pretty(root: &Value) -> String {
    let mut out = String::new();
    let mut stack: Vec<Work<'_>> = vec![Work::Value(root, 0)];
    while let Some(w) = stack.pop() {
        match w {
            Work::Lit(s) => out.push_str(s),
            Work::Key(k) => push_str_json(&mut out, k),
            Work::Break(d) => {
                out.push('\n');
                for _ in 0..d {
                    out.push_str("  ");
                }
            }
            Work::Value(v, d) => match v {
                Value::Null => out.push_str("null"),
                Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                Value::Number(n) => out.push_str(&n.to_string()),
                Value::String(s) => push_str_json(&mut out, s),
                Value::Array(items) if items.is_empty() => out.push_str("[]"),
                Value::Object(map) if map.is_empty() => out.push_str("{}"),
                Value::Array(items) => {
                    let spread = d < PRETTY_DEPTH;
                    out.push('[');
                    let mut seq: Vec<Work<'_>> = Vec::with_capacity(items.len() * 3 + 2);
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            seq.push(Work::Lit(","));
                        }
                        if spread {
                            seq.push(Work::Break(d + 1));
                        }
                        seq.push(Work::Value(item, d + 1));
                    }
                    if spread {
                        seq.push(Work::Break(d));
                    }
                    seq.push(Work::Lit("]"));
                    stack.extend(seq.into_iter().rev());
                }
                Value::Object(map) => {
                    let spread = d < PRETTY_DEPTH;
                    out.push('{');
                    let mut seq: Vec<Work<'_>> = Vec::with_capacity(map.len() * 5 + 2);
                    for (i, (k, item)) in map.iter().enumerate() {
                        if i > 0 {
                            seq.push(Work::Lit(","));
                        }
                        if spread {
                            seq.push(Work::Break(d + 1));
                        }
                        seq.push(Work::Key(k));
                        seq.push(Work::Lit(if spread { ": " } else { ":" }));
                        seq.push(Work::Value(item, d + 1));
                    }
                    if spread {
                        seq.push(Work::Break(d));
                    }
                    seq.push(Work::Lit("}"));
                    stack.extend(seq.into_iter().rev());
                }
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shallow_values_match_serde_pretty() {
        for v in [
            json!({"n": 42, "ok": true}),
            json!(["x", 2]),
            json!({"a": {"b": [1, {"c": null}], "d": "é\n\"q\""}, "e": []}),
            json!(null),
            json!(1.5),
        ] {
            assert_eq!(
                pretty(&v),
                serde_json::to_string_pretty(&v).unwrap_or_default()
            );
        }
    }
}
