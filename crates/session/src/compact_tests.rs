//! Tests of `compact.rs` (and of `skim.rs`'s array items): the property test holding every
//! reading of canonical text equal to the tree built from the same text, and text that is not
//! canonical read without a panic.

use proptest::prelude::*;
use serde_json::Value;

use super::*;

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        // The characters that need escaping, and brackets, quotes and commas inside strings.
        prop::collection::vec(
            prop::sample::select(vec![
                'a', '"', '\\', '\u{1}', '\u{1f}', '\n', '\u{7f}', 'é', '{', '}', '[', ']', ',',
                ':', '/', 'u'
            ]),
            0..8
        )
        .prop_map(|c| Value::from(c.into_iter().collect::<String>())),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["type", "id", "content", "a\"b", "c\\d", "\n", "}"])
            .prop_map(str::to_owned),
        any::<String>(),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// An array element as read: its text, and each member's text when it is an object.
type Item = (String, Option<Vec<Option<String>>>);

/// What each reading of `text` should give, from the tree of the same text.
fn check(value: &Value, text: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(value_end(text.as_bytes(), 0), Some(text.len()));
    // A value is read the same way when something follows it.
    let followed = format!("{text},1");
    prop_assert_eq!(value_end(followed.as_bytes(), 0), Some(text.len()));
    let read: Vec<(String, String)> = members(text)
        .map(|(k, v)| (k.text().into_owned(), v.to_owned()))
        .collect();
    let tree: Vec<(String, String)> = match value {
        Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), v.to_string())).collect(),
        _ => Vec::new(),
    };
    prop_assert_eq!(&read, &tree);
    if let Value::Object(m) = value {
        for (k, v) in m {
            let expected = v.to_string();
            prop_assert_eq!(member(text, k), Some(expected.as_str()));
        }
        prop_assert_eq!(member(text, "absent key"), None);
    }
    // An array's elements, each object's members read in the same walk.
    let members_of = |object: &crate::skim::RawObject<'_>, value: &Value| -> Vec<Option<String>> {
        match value {
            Value::Object(m) => m.keys().map(|k| object.get(k).map(str::to_owned)).collect(),
            _ => Vec::new(),
        }
    };
    let read: Option<Vec<Item>> = crate::skim::RawObject::items_of(text).map(|items| {
        items
            .zip(value.as_array().into_iter().flatten())
            .map(|((t, object), v)| (t.to_owned(), object.map(|o| members_of(&o, v))))
            .collect()
    });
    let tree: Option<Vec<Item>> = value.as_array().map(|items| {
        items
            .iter()
            .map(|v| {
                let members = v
                    .as_object()
                    .map(|m| m.values().map(|x| Some(x.to_string())).collect());
                (v.to_string(), members)
            })
            .collect()
    });
    prop_assert_eq!(&read, &tree);
    if let Some(items) = crate::skim::RawObject::items_of(text) {
        prop_assert_eq!(items.count(), value.as_array().map_or(0, Vec::len));
    }
    let read = string(text);
    prop_assert_eq!(read.as_deref(), value.as_str());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// On canonical compact text (as `serde_json` writes it), the members, elements, strings
    /// and value ends read from the text are those of the tree, at every level.
    #[test]
    fn readings_of_canonical_text_equal_the_tree(value in json_value()) {
        let mut stack = vec![value];
        while let Some(value) = stack.pop() {
            let text = value.to_string();
            check(&value, &text)?;
            match value {
                Value::Object(m) => stack.extend(m.into_iter().map(|(_, v)| v)),
                Value::Array(items) => stack.extend(items),
                _ => {}
            }
        }
    }

    /// Any other text is read without a panic and without looping.
    #[test]
    fn any_text_reads_without_a_panic(text in any::<String>(), cut in any::<usize>()) {
        let canonical = Value::from(text.clone()).to_string();
        let prefix = canonical.get(..cut % (canonical.len() + 1)).unwrap_or("");
        for t in [text.as_str(), prefix] {
            let _ = value_end(t.as_bytes(), 0);
            let _ = members(t).count();
            let _ = crate::skim::RawObject::items_of(t).map(Iterator::count);
            let _ = member(t, "type");
            let _ = string(t);
        }
    }
}

#[test]
fn truncated_and_malformed_text_stops_early() {
    assert_eq!(members(r#"{"a":1,"b":"#).count(), 1);
    assert_eq!(members(r#"{"a"1}"#).count(), 0);
    let count = |t| crate::skim::RawObject::items_of(t).map(Iterator::count);
    assert_eq!(count("[1,2"), Some(2));
    assert_eq!(count("[1,"), Some(1));
    assert_eq!(count("[]"), Some(0));
    assert_eq!(count(r#"[{"a":1},{}]"#), Some(2));
    assert_eq!(count(r#"[{"a":1"#), Some(0));
    assert_eq!(members("{}").count(), 0);
    assert_eq!(value_end(b"}", 0), None);
    assert_eq!(value_end(b"[\"a", 0), None);
    assert_eq!(value_end(b",", 0), None);
    assert_eq!(string("\""), None);
    assert_eq!(string("1"), None);
}

#[test]
fn escapes_canonical_text_never_holds_still_read_as_json_reads_them() {
    for text in [
        r#""a\/b""#,
        r#""\u00e9\u0041""#,
        r#""\ud83d\ude00""#,
        r#""\u001f\b\f\n\r\t\"\\""#,
    ] {
        let json: String = serde_json::from_str(text).unwrap();
        assert_eq!(string(text).as_deref(), Some(json.as_str()), "{text}");
    }
    assert_eq!(string(r#""\u00g1""#), None);
    assert_eq!(string(r#""\x""#), None);
}
