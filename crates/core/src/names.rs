//! Tool names as people write them: the Claude Code names of our tools (`read` is `Read`, `bash`
//! is `Bash`, ...), so configurations written for Claude Code (hook matchers, permission rules)
//! match our calls unchanged, and the closest known name for a misspelt one.

/// Our tool name and its Claude Code name, for every tool that has one.
pub const CLAUDE_NAMES: &[(&str, &str)] = &[
    ("read", "Read"),
    ("write", "Write"),
    ("edit", "Edit"),
    ("bash", "Bash"),
    ("glob", "Glob"),
    ("grep", "Grep"),
];

/// The Claude Code name of one of our tools, if it has one.
pub fn claude_name(ours: &str) -> Option<&'static str> {
    CLAUDE_NAMES
        .iter()
        .find(|(o, _)| *o == ours)
        .map(|(_, c)| *c)
}

/// The name a hook is told in `tool_name`: the Claude Code name when there is one, else ours.
pub fn hook_tool_name(ours: &str) -> &str {
    claude_name(ours).unwrap_or(ours)
}

/// Our name for a tool named the Claude Code way (`Read` is `read`), if it is one.
pub fn from_claude(name: &str) -> Option<&'static str> {
    CLAUDE_NAMES
        .iter()
        .find(|(_, c)| *c == name)
        .map(|(o, _)| *o)
}

/// The known name closest to `name` (by edit distance, case-insensitively), if one is close
/// enough to be a plausible misspelling (at most half its length in edits, at least 1).
pub fn closest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_lowercase();
    known
        .into_iter()
        .map(|k| (distance(&lower, &k.to_lowercase()), k))
        .filter(|(d, k)| *d <= (k.chars().count().max(name.chars().count()) / 2).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The Levenshtein distance between two strings, by characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misspelt_names_find_their_tool_and_unrelated_ones_do_not() {
        let known = ["read", "write", "edit", "bash", "glob", "grep"];
        assert_eq!(closest("raed", known), Some("read"));
        assert_eq!(closest("bsh", known), Some("bash"));
        assert_eq!(closest("Read", known), Some("read"));
        assert_eq!(closest("deploy", known), None);
        assert_eq!(from_claude("Bash"), Some("bash"));
        assert_eq!(from_claude("bash"), None);
    }
}
