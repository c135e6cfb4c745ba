//! What a permission rule's pattern is matched against (spec P1, permission rules): a call's
//! subject, read from its arguments by its tool.
//!
//! A subject has one or more parts, each with the spellings a rule may name it by:
//! - a file tool's subject is one part, the file, spelled as its canonical path relative to the
//!   workspace and as its absolute canonical path (a rule naming either holds);
//! - a shell tool's subject has one part per simple command of the command line (a rule must
//!   hold for each: `bash(npm test *)` allows `npm test && npm run lint` only if every command is
//!   allowed).
//!
//! A tool that cannot read a subject (arguments that do not fit, a command line that does not
//! reduce to simple commands) gives none, and the rules treat the call as unchecked.

/// A call's permission subject: its parts, each with its spellings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PermissionSubject {
    parts: Vec<Vec<String>>,
}

impl PermissionSubject {
    /// A subject of one part with one spelling.
    pub fn single(text: impl Into<String>) -> PermissionSubject {
        PermissionSubject {
            parts: vec![vec![text.into()]],
        }
    }

    /// A subject of one part with several spellings (the first is the one shown).
    pub fn spelled(forms: Vec<String>) -> PermissionSubject {
        PermissionSubject { parts: vec![forms] }
    }

    /// A subject of several parts, each with one spelling (the simple commands of a line).
    pub fn parts(parts: Vec<String>) -> PermissionSubject {
        PermissionSubject {
            parts: parts.into_iter().map(|p| vec![p]).collect(),
        }
    }

    /// The parts, each with its spellings.
    pub fn each(&self) -> &[Vec<String>] {
        &self.parts
    }

    /// The subject as shown to a person: each part's first spelling, one per line.
    pub fn shown(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| p.first().map(String::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    }
}
