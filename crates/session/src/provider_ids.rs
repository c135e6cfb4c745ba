//! Call ids as each provider accepts them in request history (spec L5 where the user meets it).
//!
//! The log keeps the model's ids unchanged; an export maps an id its provider would refuse:
//! - Anthropic accepts `tool_use` ids matching `^[a-zA-Z0-9_-]+$`. Any other id (and any id that
//!   already starts with the escape prefix) becomes `dshx_` followed by the id with each
//!   character outside `[a-zA-Z0-9-]` written as `_` and two hex digits per UTF-8 byte. The
//!   mapping is injective and [`anthropic_original`] decodes it.
//! - OpenAI Chat Completions accepts `tool_calls[].id` of at most 40 characters. A longer id (and
//!   any id that already starts with the hash prefix) becomes `dshh_` and the 128-bit xxh3 hash of
//!   the id in hex (37 characters). The original is found by mapping the session's ids (they are
//!   unique per session) and comparing: [`openai_original`] does that.

use std::borrow::Cow;

/// The prefix of an id escaped for Anthropic.
pub const ANTHROPIC_ESCAPE_PREFIX: &str = "dshx_";

/// The prefix of an id hashed for OpenAI.
pub const OPENAI_HASH_PREFIX: &str = "dshh_";

/// The longest `tool_calls[].id` OpenAI accepts.
pub const OPENAI_MAX_ID_LEN: usize = 40;

fn anthropic_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The id as sent to Anthropic (unchanged when the API accepts it as it is).
pub fn anthropic_id(id: &str) -> Cow<'_, str> {
    if !id.is_empty() && id.chars().all(anthropic_char) && !id.starts_with(ANTHROPIC_ESCAPE_PREFIX)
    {
        return Cow::Borrowed(id);
    }
    let mut out = String::with_capacity(ANTHROPIC_ESCAPE_PREFIX.len() + id.len() * 3);
    out.push_str(ANTHROPIC_ESCAPE_PREFIX);
    for c in id.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push('_');
                out.push_str(&format!("{b:02x}"));
            }
        }
    }
    Cow::Owned(out)
}

/// The model's id behind an id [`anthropic_id`] produced (`None` for a text it cannot have).
pub fn anthropic_original(sent: &str) -> Option<String> {
    let Some(rest) = sent.strip_prefix(ANTHROPIC_ESCAPE_PREFIX) else {
        return (!sent.is_empty() && sent.chars().all(anthropic_char)).then(|| sent.to_owned());
    };
    let mut bytes = Vec::with_capacity(rest.len());
    let mut chars = rest.bytes();
    while let Some(b) = chars.next() {
        if b == b'_' {
            let hi = chars.next()?;
            let lo = chars.next()?;
            let hex = [hi, lo];
            let text = std::str::from_utf8(&hex).ok()?;
            bytes.push(u8::from_str_radix(text, 16).ok()?);
        } else {
            bytes.push(b);
        }
    }
    String::from_utf8(bytes).ok()
}

/// The id as sent to OpenAI (unchanged when it is at most 40 characters long).
pub fn openai_id(id: &str) -> Cow<'_, str> {
    if id.chars().count() <= OPENAI_MAX_ID_LEN && !id.starts_with(OPENAI_HASH_PREFIX) {
        return Cow::Borrowed(id);
    }
    let hash = xxhash_rust::xxh3::xxh3_128(id.as_bytes());
    Cow::Owned(format!("{OPENAI_HASH_PREFIX}{hash:032x}"))
}

/// The id among `ids` (a session's call ids) that [`openai_id`] maps to `sent`.
pub fn openai_original<'a>(sent: &str, ids: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    ids.into_iter().find(|id| openai_id(id) == sent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn anthropic_ids_match_the_charset_and_decode_back(id in "\\PC{0,24}") {
            let sent = anthropic_id(&id);
            prop_assert!(!sent.is_empty() && sent.chars().all(anthropic_char), "{sent}");
            if !id.is_empty() {
                prop_assert_eq!(anthropic_original(&sent), Some(id.clone()));
            }
        }

        #[test]
        fn openai_ids_fit_forty_characters_and_are_found_again(id in "\\PC{0,80}", other in "\\PC{0,80}") {
            let sent = openai_id(&id);
            prop_assert!(sent.chars().count() <= OPENAI_MAX_ID_LEN, "{sent}");
            prop_assume!(other != id);
            prop_assert_eq!(openai_original(&sent, [other.as_str(), id.as_str()]), Some(id.as_str()));
        }
    }

    #[test]
    fn ids_the_apis_accept_are_unchanged_and_escapes_are_not_mistaken() {
        assert_eq!(anthropic_id("toolu_01A-x"), "toolu_01A-x");
        assert_eq!(anthropic_id("call.1"), "dshx_call_2e1");
        // An id that looks escaped is escaped again, so decoding is never ambiguous.
        assert_eq!(anthropic_id("dshx_2e"), "dshx_dshx_5f2e");
        assert_eq!(
            anthropic_original("dshx_dshx_5f2e").as_deref(),
            Some("dshx_2e")
        );
        assert_eq!(
            openai_id("call_00_RFz12ulKTflJvhrwgkQX7978"),
            "call_00_RFz12ulKTflJvhrwgkQX7978"
        );
        assert!(openai_id(&"x".repeat(41)).starts_with(OPENAI_HASH_PREFIX));
    }
}
