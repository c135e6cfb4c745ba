//! The `bash` tool's permission subject: the simple commands of its command line, as a real
//! shell parser (`brush-parser`) reads them, so a rule holds for each command however the line
//! chains them (`;`, `&&`, `||`, pipes, `{ ...; }`, `( ... )`).
//!
//! Guarantees: each simple command is one part of the subject, its words unquoted as the shell
//! would pass them (`'r''m' -rf x` is `rm -rf x`); assignments in front of a command are left
//! out, redirections too. A line whose commands cannot be known before it runs gives no subject
//! at all, so that a deny or ask pattern rule makes the call ask and an allow pattern never
//! allows it: a line that does not parse, command or process substitution anywhere (`$(..)`,
//! backquotes, `<(..)`), a command name taken from a variable, and compound commands other than
//! groups and subshells (`if`, `for`, `while`, `case`, functions, `[[ ]]`, arithmetic).

use brush_parser::ast::{
    AndOr, AndOrList, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, Pipeline,
    SimpleCommand,
};
use dsh_core::PermissionSubject;

/// The subject of a command line, or `None` when its commands cannot be known statically.
pub fn command_subject(line: &str) -> Option<PermissionSubject> {
    simple_commands(line).map(PermissionSubject::parts)
}

/// The simple commands of a command line, each as the text of its words.
pub fn simple_commands(line: &str) -> Option<Vec<String>> {
    let options = brush_parser::ParserOptions::default();
    let mut parser = brush_parser::Parser::new(std::io::Cursor::new(line), &options);
    let program = parser.parse_program().ok()?;
    let mut out = Vec::new();
    for list in &program.complete_commands {
        compound_list(list, &mut out)?;
    }
    Some(out)
}

fn compound_list(list: &CompoundList, out: &mut Vec<String>) -> Option<()> {
    for item in &list.0 {
        and_or(&item.0, out)?;
    }
    Some(())
}

fn and_or(list: &AndOrList, out: &mut Vec<String>) -> Option<()> {
    pipeline(&list.first, out)?;
    for next in &list.additional {
        match next {
            AndOr::And(p) | AndOr::Or(p) => pipeline(p, out)?,
        }
    }
    Some(())
}

fn pipeline(p: &Pipeline, out: &mut Vec<String>) -> Option<()> {
    for command in &p.seq {
        match command {
            Command::Simple(s) => simple(s, out)?,
            Command::Compound(CompoundCommand::BraceGroup(g), redirects) => {
                no_substitution(
                    &redirects
                        .as_ref()
                        .map(|r| r.to_string())
                        .unwrap_or_default(),
                )?;
                compound_list(&g.list, out)?;
            }
            Command::Compound(CompoundCommand::Subshell(s), redirects) => {
                no_substitution(
                    &redirects
                        .as_ref()
                        .map(|r| r.to_string())
                        .unwrap_or_default(),
                )?;
                compound_list(&s.list, out)?;
            }
            _ => return None,
        }
    }
    Some(())
}

fn simple(s: &SimpleCommand, out: &mut Vec<String>) -> Option<()> {
    let mut words: Vec<String> = Vec::new();
    let mut name_seen = false;
    let push = |words: &mut Vec<String>, text: &str, is_name: bool| -> Option<()> {
        no_substitution(text)?;
        if is_name && text.contains('$') {
            return None;
        }
        words.push(brush_parser::unquote_str(text));
        Some(())
    };
    // The prefix (assignments, redirections) comes before the name, the suffix after it.
    for item in s.prefix.iter().flat_map(|p| p.0.iter()) {
        item_text(item)?;
    }
    if let Some(name) = &s.word_or_name {
        push(&mut words, &name.value, true)?;
        name_seen = true;
    }
    for item in s.suffix.iter().flat_map(|p| p.0.iter()) {
        if let CommandPrefixOrSuffixItem::Word(w) = item {
            push(&mut words, &w.value, !name_seen)?;
            name_seen = true;
        } else {
            item_text(item)?;
        }
    }
    if !words.is_empty() {
        out.push(words.join(" "));
    }
    Some(())
}

/// Checks an assignment or a redirection for substitutions (they run commands of their own).
fn item_text(item: &CommandPrefixOrSuffixItem) -> Option<()> {
    match item {
        CommandPrefixOrSuffixItem::ProcessSubstitution(..) => None,
        CommandPrefixOrSuffixItem::Word(w) => no_substitution(&w.value),
        CommandPrefixOrSuffixItem::AssignmentWord(_, w) => no_substitution(&w.value),
        CommandPrefixOrSuffixItem::IoRedirect(r) => no_substitution(&r.to_string()),
    }
}

/// `None` when `text` holds a command or process substitution.
fn no_substitution(text: &str) -> Option<()> {
    let substitutes =
        text.contains("$(") || text.contains('`') || text.contains("<(") || text.contains(">(");
    (!substitutes).then_some(())
}

#[cfg(test)]
mod tests {
    use super::simple_commands;

    fn cmds(line: &str) -> Option<Vec<String>> {
        simple_commands(line)
    }

    #[test]
    fn chained_commands_are_each_a_part_and_quotes_are_read_as_the_shell_reads_them() {
        assert_eq!(cmds("ls -la").unwrap(), ["ls -la"]);
        assert_eq!(
            cmds("cd src && npm test; echo done | tee log || true").unwrap(),
            ["cd src", "npm test", "echo done", "tee log", "true"]
        );
        assert_eq!(cmds("'r''m' -rf \"/tmp/x\"").unwrap(), ["rm -rf /tmp/x"]);
        assert_eq!(cmds("{ a; b; } && (c)").unwrap(), ["a", "b", "c"]);
        assert_eq!(cmds("FOO=1 make > out.txt").unwrap(), ["make"]);
        assert_eq!(cmds("cat <<EOF\nhello\nEOF\n").unwrap(), ["cat"]);
    }

    #[test]
    fn what_cannot_be_known_before_it_runs_gives_no_subject() {
        for line in [
            "echo $(rm -rf /)",
            "echo `id`",
            "diff <(ls a) <(ls b)",
            "$CMD -rf /",
            "if true; then rm -rf x; fi",
            "for f in *; do rm $f; done",
            "f() { rm -rf x; }; f",
            "echo 'unterminated",
            "X=$(id) ls",
        ] {
            assert_eq!(cmds(line), None, "{line}");
        }
    }
}
