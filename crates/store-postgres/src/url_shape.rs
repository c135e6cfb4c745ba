//! A store URL refused for its shape before it is parsed, with a reason a person can act on:
//! the client's own parser would say only that the text "is invalid", or, worse, take part of
//! a password for the host and name it in its error.

use crate::StoreError;

/// The schemes of a PostgreSQL URL (anything else is key-value text, or another database's).
const SCHEMES: [&str; 2] = ["postgres", "postgresql"];

/// Refuses `url` when it is a URL of another scheme, or holds more than one `@` before its
/// host (an `@` of the user name or password not written `%40`). Key-value text passes.
pub(crate) fn check(url: &str) -> Result<(), StoreError> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(());
    };
    // Key-value text may hold "://" in a value (`host=h options='-c x=a://b'`): a scheme is a
    // plain word at the start.
    let plain = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !plain {
        return Ok(());
    }
    if !SCHEMES.contains(&scheme) {
        return Err(StoreError::UrlShape(format!(
            "a store URL starts with postgres:// or postgresql://, not {scheme}://"
        )));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.matches('@').count() > 1 {
        return Err(StoreError::UrlShape(
            "the URL has more than one `@` before its host: write an `@` of the user name or \
             password as %40"
                .to_owned(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_scheme_and_a_bare_at_sign_are_refused_with_the_reason() {
        let refused = |url: &str| match check(url) {
            Err(StoreError::UrlShape(why)) => why,
            other => panic!("{url}: {other:?}"),
        };
        assert_eq!(
            refused("mysql://u:pw@h/db"),
            "a store URL starts with postgres:// or postgresql://, not mysql://"
        );
        let why = refused("postgres://dsh:p@zq@db.example/x");
        assert!(why.contains("%40") && !why.contains("zq"), "{why}");
        for fine in [
            "postgres://dsh:p%40ss@db.example/x",
            "postgresql://db/x?user=a@b",
            "postgres:///x",
            "host=h dbname=x",
            "host=h options='-c search_path=a://b'",
        ] {
            assert!(check(fine).is_ok(), "{fine}");
        }
    }
}
