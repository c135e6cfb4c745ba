//! `cargo xtask check-rules`: every rule or checklist id that a source comment or a test name
//! cites has an entry in `docs/rules.md`, with a description. `--write` rewrites the file's
//! generated part (the entries' "cited in" and "tests" lines) from the sources, keeping each
//! entry's description and the text above the first `## ` heading; a cited id without an entry
//! gets one whose description is a placeholder the check refuses.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::rule_ids::{
    CHECKLIST_GROUPS, RULE_PREFIXES, ids_in_comment, ids_in_fn_name, section_of,
};

/// The folders whose `.rs` files are scanned, relative to the workspace root.
const SCANNED: [&str; 5] = ["crates", "src", "tests", "xtask", "benches"];
/// The files that define the grammar: their ids are examples, not citations.
const SELF: [&str; 2] = ["xtask/src/rule_ids.rs", "xtask/src/check_rules.rs"];
/// Where the ids are described.
const RULES_MD: &str = "docs/rules.md";
/// The description a generated entry starts with; the check refuses it.
const PLACEHOLDER: &str = "(to describe)";

/// One citation of an id in the sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Citation {
    /// The id cited (`CAN-16`, `S2`).
    pub id: String,
    /// The file, relative to the workspace root, with `/` separators.
    pub file: String,
    /// The 1-based line.
    pub line: usize,
    /// The function whose name cites the id, or `None` for a comment.
    pub test: Option<String>,
}

/// The citations in one file's text.
pub fn citations_in(file: &str, text: &str) -> Vec<Citation> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut push = |id: String, test: Option<String>| {
            out.push(Citation {
                id,
                file: file.to_owned(),
                line: n + 1,
                test,
            });
        };
        let (code, comment) = split_line(line);
        if let Some(name) = fn_name(&code) {
            for id in ids_in_fn_name(name) {
                push(id, Some(name.to_owned()));
            }
        }
        if let Some(comment) = comment {
            for id in ids_in_comment(comment) {
                push(id, None);
            }
        }
    }
    out
}

/// A line's code, with the text of string literals blanked, and its `//` comment if any. A
/// string is tracked within the line only (a literal spanning lines is read as code).
fn split_line(line: &str) -> (String, Option<&str>) {
    let mut code = String::with_capacity(line.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut prev = ' ';
    for (at, c) in line.char_indices() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
                code.push(c);
                prev = c;
                continue;
            }
            code.push(' ');
            continue;
        }
        // A quote between apostrophes is a character literal, not a string.
        if c == '"' && prev != '\'' {
            in_string = true;
        } else if c == '/' && prev == '/' {
            code.pop();
            return (code, Some(&line[at + 1..]));
        }
        code.push(c);
        prev = c;
    }
    (code, None)
}

/// The name a line of code declares with `fn`, if any.
fn fn_name(code: &str) -> Option<&str> {
    let mut words = code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
    words.find(|w| *w == "fn")?;
    words.find(|w| !w.is_empty())
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for entry in entries {
        let path = entry
            .with_context(|| format!("reading {}", dir.display()))?
            .path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rs_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Every citation under the scanned folders of `root`, file by file in path order.
pub fn scan(root: &Path) -> Result<Vec<Citation>> {
    let mut files = Vec::new();
    for dir in SCANNED {
        let dir = root.join(dir);
        if dir.is_dir() {
            rs_files(&dir, &mut files)?;
        }
    }
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let rel = path.strip_prefix(root).unwrap_or(&path);
        let rel = rel.to_string_lossy().replace('\\', "/");
        if SELF.contains(&rel.as_str()) {
            continue;
        }
        out.extend(citations_in(&rel, &text));
    }
    Ok(out)
}

/// The entries of a rules file: each `- **ID** description` line's id and description, where
/// ID is an id by the grammar.
pub fn entries(rules_md: &str) -> BTreeMap<String, String> {
    rules_md
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("- **")?;
            let (id, desc) = rest.split_once("**")?;
            // Only an id by the grammar opens an entry; other bold list items are prose.
            (ids_in_comment(id) == [id]).then(|| (id.to_owned(), desc.trim().to_owned()))
        })
        .collect()
}

/// What is wrong, one line per problem: a cited id with no entry (named at each citation) or
/// an entry without a description.
pub fn problems(citations: &[Citation], entries: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for c in citations {
        if !entries.contains_key(&c.id) {
            let what = match &c.test {
                Some(name) => format!("test name `{name}`"),
                None => "comment".to_owned(),
            };
            out.push(format!(
                "{}:{}: {} cites {} which {RULES_MD} lacks",
                c.file, c.line, what, c.id
            ));
        }
    }
    for (id, desc) in entries {
        if desc.is_empty() || desc.starts_with(PLACEHOLDER) {
            out.push(format!("{RULES_MD}: {id} has no description"));
        }
    }
    out
}

/// Order ids as the spec does: by section, then by number.
fn sort_key(id: &str) -> (usize, u32) {
    let (section, rule) = section_of(id);
    let position = if rule {
        RULE_PREFIXES.iter().position(|(p, _)| *p == section)
    } else {
        CHECKLIST_GROUPS
            .iter()
            .position(|g| *g == section)
            .map(|p| p + RULE_PREFIXES.len())
    };
    let number = id
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .unwrap_or(0);
    (position.unwrap_or(usize::MAX), number)
}

/// Section headings of the generated part.
fn heading(section: &str, rule: bool) -> String {
    let title = match (section, rule) {
        ("S", true) => "S: inputs and scheduling",
        ("P", true) => "P: prepare",
        ("D", true) => "D: dispatch",
        ("F", true) => "F: finalize",
        ("C", true) => "C: cancellation",
        ("I", true) => "I: the pairing invariant",
        ("FS", true) => "FS: the filesystem guard",
        ("CM", true) => "CM: Code Mode",
        ("L", true) => "L: the session log",
        ("REG", _) => "REG: registry, schemas, scoping, validation",
        ("APR", _) => "APR: approval",
        ("GRD", _) => "GRD: guards and the pre-execute gate",
        ("DSP", _) => "DSP: dispatch, signals, output validation",
        ("FIN", _) => "FIN: post-execute, finalize, contexts, observers",
        ("SCH", _) => "SCH: scheduler",
        ("CAN", _) => "CAN: cancellation",
        ("LOG", _) => "LOG: session-log events and pairing",
        ("CODE", _) => "CODE: Code Mode sub-dispatch",
        ("FS", _) => "FS: filesystem read-before-write",
        ("TMO", _) => "TMO: timeouts and deadlines",
        ("LOOP", _) => "LOOP: agent-loop turn, inbox and cancel",
        _ => section,
    };
    format!("### {title}")
}

/// The rules file rewritten: `preamble` (the text above the first `## `) unchanged, then every
/// id that is cited or already has an entry, grouped, with its description and where it is held.
pub fn render(
    preamble: &str,
    citations: &[Citation],
    entries: &BTreeMap<String, String>,
) -> String {
    let mut ids: BTreeSet<&str> = entries.keys().map(String::as_str).collect();
    ids.extend(citations.iter().map(|c| c.id.as_str()));
    let mut ids: Vec<&str> = ids.into_iter().collect();
    ids.sort_by_key(|id| sort_key(id));

    let mut out = preamble.trim_end().to_owned();
    out.push('\n');
    let mut last: Option<(&str, bool)> = None;
    for id in ids {
        let section = section_of(id);
        if last.is_none_or(|(_, rule)| rule != section.1) {
            let part = if section.1 {
                "## Spec rules (`tool-pipeline.md`)"
            } else {
                "## Checklist lines (`conformance.md`)"
            };
            let _ = write!(out, "\n{part}\n");
        }
        if last != Some(section) {
            let _ = write!(out, "\n{}\n\n", heading(section.0, section.1));
        }
        last = Some(section);
        let desc = entries.get(id).map_or(PLACEHOLDER, String::as_str);
        let _ = writeln!(out, "- **{id}** {desc}");
        let cited: Vec<&Citation> = citations.iter().filter(|c| c.id == id).collect();
        let files: BTreeSet<&str> = cited
            .iter()
            .filter(|c| c.test.is_none())
            .map(|c| c.file.as_str())
            .collect();
        let tests: BTreeSet<(&str, &str)> = cited
            .iter()
            .filter_map(|c| Some((c.test.as_deref()?, c.file.as_str())))
            .collect();
        if !files.is_empty() {
            let list: Vec<String> = files.iter().map(|f| format!("`{f}`")).collect();
            let _ = writeln!(out, "  - cited in: {}", list.join(", "));
        }
        if !tests.is_empty() {
            let list: Vec<String> = tests
                .iter()
                .map(|(t, f)| format!("`{t}` (`{f}`)"))
                .collect();
            let _ = writeln!(out, "  - tests: {}", list.join(", "));
        }
        if files.is_empty() && tests.is_empty() {
            let _ = writeln!(out, "  - not cited in the sources");
        }
    }
    out
}

/// The text above the first `## ` heading.
fn preamble(rules_md: &str) -> &str {
    if rules_md.starts_with("## ") {
        return "";
    }
    rules_md
        .find("\n## ")
        .map_or(rules_md, |at| &rules_md[..at + 1])
}

/// Runs the check (or with `--write`, regenerates the file first).
pub fn cli(root: &Path, args: &[String]) -> Result<()> {
    let write = match args.first().map(String::as_str) {
        None => false,
        Some("--write") => true,
        Some(other) => bail!("unknown option `{other}` (check-rules takes only --write)"),
    };
    let path = root.join(RULES_MD);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let citations = scan(root)?;
    let mut known = entries(&text);
    if write {
        let new = render(preamble(&text), &citations, &known);
        std::fs::write(&path, &new).with_context(|| format!("writing {}", path.display()))?;
        known = entries(&new);
    }
    let problems = problems(&citations, &known);
    if problems.is_empty() {
        let ids: BTreeSet<&str> = citations.iter().map(|c| c.id.as_str()).collect();
        eprintln!(
            "check-rules: {} citations of {} ids, all in {RULES_MD}",
            citations.len(),
            ids.len()
        );
        return Ok(());
    }
    for p in &problems {
        eprintln!("{p}");
    }
    bail!(
        "{} problem(s): describe each id in {RULES_MD} (`cargo xtask check-rules --write` adds \
         the missing entries and refreshes where each id is held)",
        problems.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_name_and_a_comment_on_one_line_are_both_read() {
        let text = "// nothing here\nasync fn can_07_x() { // S2 and REG-52\n}\n";
        let got: Vec<(String, usize, Option<String>)> = citations_in("t.rs", text)
            .into_iter()
            .map(|c| (c.id, c.line, c.test))
            .collect();
        assert_eq!(
            got,
            [
                ("CAN-07".to_owned(), 2, Some("can_07_x".to_owned())),
                ("S2".to_owned(), 2, None),
                ("REG-52".to_owned(), 2, None),
            ]
        );
    }

    #[test]
    fn ids_in_strings_and_code_are_not_citations() {
        let text = "let s = \"CAN-07 // S2 fn can_07_x\"; let can_07 = S2;\nfn helper() {}\n";
        assert_eq!(citations_in("t.rs", text), []);
        let text = "let q = '\"'; // FIN-14\n";
        assert_eq!(
            citations_in("t.rs", text)
                .into_iter()
                .map(|c| c.id)
                .collect::<Vec<_>>(),
            ["FIN-14"]
        );
    }

    #[test]
    fn a_missing_id_is_named_with_its_file_and_line() {
        let citations = citations_in("a/b.rs", "\n// see FIN-14\nfn fin_14_y() {}\n");
        let mut known = BTreeMap::new();
        let found = problems(&citations, &known);
        assert_eq!(
            found,
            [
                "a/b.rs:2: comment cites FIN-14 which docs/rules.md lacks",
                "a/b.rs:3: test name `fin_14_y` cites FIN-14 which docs/rules.md lacks",
            ]
        );
        known.insert("FIN-14".to_owned(), "a description".to_owned());
        assert_eq!(problems(&citations, &known), Vec::<String>::new());
    }

    #[test]
    fn a_rendered_file_reads_back_and_refuses_its_placeholders() {
        let citations = citations_in("x.rs", "// S2, CAN-16, FS3, FS-26\nfn s2_z() {}\n");
        let mut known = BTreeMap::new();
        known.insert("FS-26".to_owned(), "described".to_owned());
        let text = render("# Rules\n\nintro\n", &citations, &known);
        assert!(
            text.starts_with("# Rules\n\nintro\n\n## Spec rules"),
            "{text}"
        );
        assert!(
            text.contains(
                "- **S2** (to describe)\n  - cited in: `x.rs`\n  - tests: `s2_z` (`x.rs`)\n"
            ),
            "{text}"
        );
        let spec = text.find("**FS3**").unwrap_or(usize::MAX);
        let checklist = text.find("**CAN-16**").unwrap_or(0);
        assert!(spec < checklist, "spec rules come first:\n{text}");
        let read = entries(&text);
        assert_eq!(read.get("FS-26").map(String::as_str), Some("described"));
        assert_eq!(problems(&citations, &read).len(), 3, "{text}");
        assert_eq!(preamble(&text), "# Rules\n\nintro\n\n");
        assert_eq!(entries("- **Spec rules** prose\n- **S2** two\n").len(), 1);
    }
}
