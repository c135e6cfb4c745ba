//! The password file libpq reads (`~/.pgpass`, or the file `PGPASSFILE` names), read as libpq
//! reads it, so a store URL without a password connects wherever `psql` does.
//!
//! Each line is `hostname:port:database:username:password`; a field of `*` matches anything,
//! `\:` and `\\` stand for `:` and `\`, and the first matching line wins. A connection over a
//! Unix socket in the default directory matches the host name `localhost`, one in another
//! directory that directory's path. A file that others than its owner may read or write is
//! not read (libpq's rule: it holds passwords), and neither is a line of fewer than five fields.

use std::path::{Path, PathBuf};

/// What a password is looked up for.
#[derive(Debug)]
pub(crate) struct Wanted<'a> {
    /// The host as the file names it (see the module docs for sockets).
    pub host: &'a str,
    /// The port, as text.
    pub port: &'a str,
    /// The database.
    pub database: &'a str,
    /// The user.
    pub user: &'a str,
}

/// The file to read: `PGPASSFILE`, else `~/.pgpass`.
pub(crate) fn file(env: &impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(path) = env("PGPASSFILE") {
        return Some(PathBuf::from(path));
    }
    env("HOME").map(|home| Path::new(&home).join(".pgpass"))
}

/// The password of the first line of `text` that matches `wanted`.
pub(crate) fn lookup(text: &str, wanted: &Wanted<'_>) -> Option<String> {
    let values = [wanted.host, wanted.port, wanted.database, wanted.user];
    text.lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter_map(fields)
        .find(|fields| {
            fields[..4]
                .iter()
                .zip(values)
                .all(|(field, value)| field == "*" || field == value)
        })
        .map(|mut fields| fields.swap_remove(4))
}

/// A line's five fields (the last one is the rest of the line), unescaped; `None` for a line
/// of fewer.
fn fields(line: &str) -> Option<Vec<String>> {
    let mut fields = Vec::with_capacity(5);
    let mut field = String::new();
    let mut chars = line.trim_end_matches('\r').chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => field.push(chars.next().unwrap_or('\\')),
            ':' if fields.len() < 4 => fields.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    if fields.len() < 4 {
        return None;
    }
    fields.push(field);
    Some(fields)
}

/// Whether a file with these permission bits may be read: nobody but its owner may read or
/// write it.
#[cfg(unix)]
pub(crate) fn private(mode: u32) -> bool {
    mode & 0o077 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want<'a>(host: &'a str, port: &'a str, database: &'a str, user: &'a str) -> Wanted<'a> {
        Wanted {
            host,
            port,
            database,
            user,
        }
    }

    #[test]
    fn the_first_matching_line_gives_the_password() {
        let text = "# comment\n\
                    db.example:5432:app:dsh:first\n\
                    *:*:app:dsh:second\n\
                    *:*:*:*:any\n";
        let w = want("db.example", "5432", "app", "dsh");
        assert_eq!(lookup(text, &w).as_deref(), Some("first"));
        let w = want("other", "6543", "app", "dsh");
        assert_eq!(lookup(text, &w).as_deref(), Some("second"));
        let w = want("other", "6543", "else", "me");
        assert_eq!(lookup(text, &w).as_deref(), Some("any"));
        assert_eq!(
            lookup("db:5432:app:dsh:pw\n", &want("db", "5433", "app", "dsh")),
            None
        );
    }

    #[test]
    fn escapes_and_short_lines_read_as_libpq_reads_them() {
        let text = "too:few:fields\n\
                    /run/pg\\:x:5432:app:dsh:p\\:w\\\\d:with:colons\n";
        let w = want("/run/pg:x", "5432", "app", "dsh");
        assert_eq!(lookup(text, &w).as_deref(), Some("p:w\\d:with:colons"));
        assert_eq!(
            lookup("too:few:fields\n", &want("too", "few", "fields", "x")),
            None
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_file_others_may_read_is_not_private() {
        assert!(private(0o600));
        assert!(private(0o400));
        assert!(!private(0o640));
        assert!(!private(0o604));
    }
}
