//! Tool-name matchers as Claude Code reads them: empty or `*` matches every tool; a plain name or
//! `A|B` list (letters, digits, `_`, `|`) matches those names exactly; anything else is a regex
//! (the `regex` crate, unanchored) tested against the name. A call matches when its own name or
//! its Claude Code name matches (see `names.rs`).

use regex::Regex;

use crate::names::claude_name;

/// A compiled matcher.
#[derive(Clone, Debug)]
pub struct Matcher {
    source: String,
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    All,
    Exact(Vec<String>),
    Regex(Regex),
}

fn is_plain(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|')
}

/// A matcher that does not compile (an invalid regex), with the regex crate's message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MatcherError(pub String);

impl Matcher {
    /// Compiles a matcher; an invalid regex is refused with the regex crate's message.
    pub fn new(source: &str) -> Result<Matcher, MatcherError> {
        let trimmed = source.trim();
        let kind = if trimmed.is_empty() || trimmed == "*" {
            Kind::All
        } else if is_plain(trimmed) {
            Kind::Exact(
                trimmed
                    .split('|')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            )
        } else {
            Kind::Regex(Regex::new(trimmed).map_err(|e| {
                MatcherError(format!("matcher \"{source}\" is not a valid regex: {e}"))
            })?)
        };
        Ok(Matcher {
            source: source.to_owned(),
            kind,
        })
    }

    /// The matcher as written in the settings (`""` when it was absent).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether `name` itself matches.
    pub fn matches_name(&self, name: &str) -> bool {
        match &self.kind {
            Kind::All => true,
            Kind::Exact(names) => names.iter().any(|n| n == name),
            Kind::Regex(re) => re.is_match(name),
        }
    }

    /// Whether a call of our tool `tool` matches, by our name or by its Claude Code name.
    pub fn matches_tool(&self, tool: &str) -> bool {
        self.matches_name(tool) || claude_name(tool).is_some_and(|c| self.matches_name(c))
    }
}
