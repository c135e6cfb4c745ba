//! Stack-safe handling of deep JSON: every recursive walk of a value that came from outside runs
//! on a stack sized for the value's nesting, so no input can overflow the stack.

use serde_json::Value;

use dsh_core::json::{MAX_DEPTH, depth_of};

/// Runs `f` on a stack large enough for recursion `depth` levels deep (dsh-core's rule).
pub(crate) use dsh_core::json::with_stack_for as with_stack;

/// Clones a value of any depth without overflowing the stack.
pub(crate) fn clone_value(value: &Value) -> Value {
    match value {
        Value::Array(_) | Value::Object(_) => {
            let depth = depth_of(value);
            with_stack(depth, || value.clone())
        }
        other => other.clone(),
    }
}

/// Compact JSON text of a value of any depth, without overflowing the stack.
pub(crate) fn to_text(value: &Value) -> String {
    match value {
        Value::Array(_) | Value::Object(_) => with_stack(depth_of(value), || value.to_string()),
        other => other.to_string(),
    }
}

/// The deepest bracket nesting in JSON text (dsh-core's linear scan that skips strings), used
/// before parsing so that text nested deeper than the limit is refused without ever building
/// (and later dropping) a value that deep.
pub(crate) use dsh_core::json::text_depth;

/// Parses one JSON text and hands the value to `f`, refusing text nested deeper than
/// `MAX_DEPTH` levels (the whole text counts, its outer object included) before any value is
/// built. The parse, `f`, and the drop of any value left over run on a stack sized for the
/// text's depth.
pub(crate) fn parse_with<R>(
    text: &str,
    f: impl FnOnce(Value) -> Result<R, String>,
) -> Result<R, String> {
    let depth = text_depth(text.as_bytes());
    if depth > MAX_DEPTH {
        return Err(format!("JSON nests deeper than {MAX_DEPTH} levels"));
    }
    with_stack(depth + 4, || {
        let value = dsh_core::json::parse_value(text).map_err(|e| match e {
            dsh_core::JsonError::Syntax {
                column, message, ..
            } => {
                let message = strip_position(&message);
                format!("invalid JSON at column {column}: {message}")
            }
            other => other.to_string(),
        })?;
        f(value)
    })
}

/// Removes serde_json's trailing " at line L column C" (we report file lines ourselves).
fn strip_position(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(i) => &message[..i],
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_depth_skips_brackets_inside_strings() {
        assert_eq!(text_depth(br#"{"a":"[[[{{{","b":[1,[2]]}"#), 3);
        assert_eq!(text_depth(br#""\"[""#), 0);
        assert_eq!(text_depth(b"[[]]"), 2);
    }

    #[test]
    fn too_deep_text_is_refused_before_parsing() {
        let text = "[".repeat(MAX_DEPTH + 10);
        let err = parse_with(&text, Ok);
        assert!(matches!(err, Err(m) if m.contains("deeper")));
    }

    #[test]
    fn syntax_errors_name_the_column_only() {
        let err = parse_with("{\"a\": }", Ok);
        assert!(
            matches!(&err, Err(m) if m.starts_with("invalid JSON at column") && !m.contains("line")),
            "{err:?}"
        );
    }
}
