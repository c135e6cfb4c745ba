//! A store URL as messages show it: without its password, in either form PostgreSQL takes it
//! (`postgres://user:PASSWORD@host/db?password=PASSWORD`, or key-value text such as
//! `host=db user=dsh password=PASSWORD`).
//!
//! The split follows the client's own parser (`tokio_postgres::Config`), but never shows what
//! might be part of a password: in a URL the credentials end at the last `@` before the host
//! (the store refuses a URL with more than one; the client would take the first, and part of
//! the password for the host) and the password at the first `:` in them; in key-value text a value is a single-quoted string (`\` escapes) or runs to the
//! next space. A key-value text that does not parse is shown only up to the pair that did not:
//! what follows it might hold a password.

/// `url` without its password.
pub fn shown(url: &str) -> String {
    for scheme in ["postgres://", "postgresql://"] {
        if let Some(rest) = url.strip_prefix(scheme) {
            return format!("{scheme}{}", without_password_url(rest));
        }
    }
    without_password_pairs(url)
}

/// The part of a URL after its scheme, without a password in its credentials or its query.
fn without_password_url(rest: &str) -> String {
    // The host and what follows begin after the last `@` of the authority.
    let authority = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let rest = match rest[..authority].rfind('@').map(|at| rest.split_at(at)) {
        Some((credentials, after)) => {
            let after = &after[1..];
            // Up to the first `:` (or `@`: what follows it might be a password's).
            let user = credentials
                .split_once([':', '@'])
                .map_or(credentials, |(u, _)| u);
            format!("{user}@{after}")
        }
        None => rest.to_owned(),
    };
    let Some((place, query)) = rest.split_once('?') else {
        return rest;
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let key = pair.split_once('=').map_or(*pair, |(k, _)| k);
            !is_password(&super::percent::decoded(key, false))
        })
        .collect();
    if kept.is_empty() {
        place.to_owned()
    } else {
        format!("{place}?{}", kept.join("&"))
    }
}

/// Key-value connection text without its `password` pairs.
fn without_password_pairs(text: &str) -> String {
    let mut shown = String::new();
    let mut at = 0;
    while let Some(start) = text[at..]
        .find(|c: char| !c.is_whitespace())
        .map(|i| at + i)
    {
        let Some(end) = pair_end(text, start) else {
            if !shown.is_empty() {
                shown.push(' ');
            }
            shown.push_str("(the rest does not parse)");
            return shown;
        };
        let pair = &text[start..end];
        let key = pair
            .split(|c: char| c == '=' || c.is_whitespace())
            .next()
            .unwrap_or_default();
        if !is_password(key) {
            if !shown.is_empty() {
                shown.push(' ');
            }
            shown.push_str(pair);
        }
        at = end;
    }
    shown
}

/// Where the `key = value` pair starting at `start` ends, or `None` when it does not parse.
fn pair_end(text: &str, start: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = start;
    while i < bytes.len() && bytes[i] != b'=' && !bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    if i == start {
        return None;
    }
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    if bytes.get(i) != Some(&b'=') {
        return None;
    }
    i += 1;
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    if bytes.get(i) == Some(&b'\'') {
        i += 1;
        loop {
            match bytes.get(i)? {
                b'\\' => i += 2,
                b'\'' => return Some(i + 1),
                _ => i += 1,
            }
        }
    }
    while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
        i += if bytes[i] == b'\\' { 2 } else { 1 };
    }
    Some(i.min(bytes.len()))
}

fn is_password(key: &str) -> bool {
    key.eq_ignore_ascii_case("password")
}

#[cfg(test)]
mod tests {
    use super::shown;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the password and wherever it is put, what is shown never holds it and
        /// still names the host, the port and the database.
        #[test]
        fn no_password_in_any_spelling_reaches_what_is_shown(
            url_pw in "[A-Za-z0-9._~-]{1,24}",
            text_pw in "[ -~]{0,24}",
            user in "[a-z][a-z0-9_]{0,8}",
            extra in prop::option::of("[a-z_]{1,10}=[a-z0-9]{1,6}"),
        ) {
            let secret = format!("PW{url_pw}");
            let quoted = format!("PW{}", text_pw.replace('\\', "\\\\").replace('\'', "\\'"));
            let extra_query = extra.as_deref().map(|e| format!("&{e}")).unwrap_or_default();
            let extra_pair = extra.as_deref().unwrap_or_default();
            for (text, secret) in [
                (format!("postgres://{user}:{secret}@db.example:5433/sessions"), &secret),
                (
                    format!("postgresql://{user}@db.example:5433/sessions?password={secret}{extra_query}"),
                    &secret,
                ),
                (
                    format!("host=db.example port=5433 user={user} password='{quoted}' {extra_pair} dbname=sessions"),
                    &quoted,
                ),
                (
                    format!("host=db.example port=5433 password={secret} user={user} dbname=sessions"),
                    &secret,
                ),
            ] {
                let seen = shown(&text);
                prop_assert!(!seen.contains(secret.as_str()), "{text} -> {seen}");
                prop_assert!(seen.contains("db.example") && seen.contains("5433"), "{text} -> {seen}");
                prop_assert!(seen.contains("sessions"), "{text} -> {seen}");
            }
        }
    }

    #[test]
    fn a_urls_password_is_left_out_of_its_credentials_and_its_query() {
        let cases = [
            ("postgres://dsh:pw@h:5432/db", "postgres://dsh@h:5432/db"),
            ("postgresql://dsh:p:w@h/db", "postgresql://dsh@h/db"),
            ("postgres://dsh:p@w@h/db", "postgres://dsh@h/db"),
            ("postgres://d@sh:p@w@h/db?a=b@c", "postgres://d@h/db?a=b@c"),
            ("postgres://dsh@h/db?password=pw", "postgres://dsh@h/db"),
            (
                "postgres://h/db?sslmode=disable&passw%6Frd=pw&application_name=x",
                "postgres://h/db?sslmode=disable&application_name=x",
            ),
            ("postgres://h/db?PASSWORD=pw", "postgres://h/db"),
            ("postgres://dsh@h/db", "postgres://dsh@h/db"),
        ];
        for (url, want) in cases {
            assert_eq!(shown(url), want, "{url}");
        }
    }

    #[test]
    fn key_value_text_loses_its_password_pairs_in_any_spelling() {
        let cases = [
            (
                "host=h user=dsh password=pw dbname=db",
                "host=h user=dsh dbname=db",
            ),
            ("host=h password = 'p w\\' x' port=1", "host=h port=1"),
            ("password=p\\ w host=h", "host=h"),
            ("  host = h\tPassword=pw", "host = h"),
            // What does not parse is not shown: it might hold the password.
            ("host=h password='pw", "host=h (the rest does not parse)"),
            ("host=h pw", "host=h (the rest does not parse)"),
        ];
        for (text, want) in cases {
            assert_eq!(shown(text), want, "{text}");
        }
    }

    #[test]
    fn no_spelling_of_a_password_reaches_what_is_shown() {
        let secret = "s3cret";
        for text in [
            format!("postgres://u:{secret}@h/db"),
            format!("postgres://u@h/db?a=1&password={secret}"),
            format!("host=h password={secret}"),
            format!("host=h password='{secret} x'"),
            format!("host=h password='{secret}"),
            format!("host=h password  =  {secret}"),
        ] {
            assert!(!shown(&text).contains(secret), "{text} → {}", shown(&text));
        }
    }
}
