//! `grep {pattern, path?, include?}`: a regular expression over file contents (ripgrep's
//! `grep-regex` and `grep-searcher`; binary files skipped), matches grouped by file (newest file
//! first) with line numbers, at most 250 shown with a note saying how to narrow the search, and
//! notes saying how many files were skipped as binary or ignored and how to search them (name
//! one as `path`: like ripgrep, a file named explicitly is searched even when binary or ignored).
//! A missing path is `FS_NOT_FOUND`, never "No matches found".

use std::sync::Arc;
use std::time::SystemTime;

use dsh_core::{ContentBlock, CoreError, Failure, Json, ToolContext, ToolDefinition, ToolOutput};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use serde::Deserialize;
use serde_json::{Value, json};

use super::walk::{self, PathGlob, WalkEnd};
use super::{ToolEnv, check_abort, decode, field, freeze, subject};
use crate::error::FsError;
use crate::text;

/// The tool's name.
pub const NAME: &str = "grep";
/// The tool's description.
pub const DESCRIPTION: &str = "Search file contents with a regular expression; matches are grouped by file with line numbers.";
/// The most matches one call shows.
pub const MAX_MATCHES: usize = 250;
/// The most matches one call collects (for ordering and counting) before it stops searching.
pub const MAX_COLLECTED: usize = 10_000;

#[derive(Deserialize)]
struct Args {
    pattern: String,
    path: Option<String>,
    include: Option<String>,
}

fn parameters() -> Json {
    Json::from_shallow(json!({
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression to search for in file contents (Rust regex syntax)."},
            "path": {"type": "string", "description": "File or directory to search. Defaults to the working directory."},
            "include": {"type": "string", "description": "Glob of files to search, for example `*.rs` or `*.{ts,tsx}`."}
        },
        "required": ["pattern"]
    }))
}

fn output_schema() -> Json {
    Json::from_shallow(json!({
        "type": "object",
        "properties": {
            "pattern": {"type": "string"},
            "path": {"type": "string"},
            "matches": {"type": "array", "items": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "line": {"type": "integer"}, "text": {"type": "string"}},
                "required": ["path", "line", "text"]
            }},
            "totalMatches": {"type": "integer"},
            "truncated": {"type": "boolean"},
            "complete": {"type": "boolean"},
            "skippedBinary": {"type": "integer"},
            "ignored": {"type": "object"},
            "deniedFiles": {"type": "array", "items": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "rule": {"type": "string"}},
                "required": ["path", "rule"]
            }}
        },
        "required": ["pattern", "path", "matches", "totalMatches", "truncated", "complete"]
    }))
}

fn render(v: &Json) -> Result<dsh_core::Content, Failure> {
    let v = v.value();
    let matches = field(v, "matches")
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let total = field(v, "totalMatches").as_u64().unwrap_or(0);
    let complete = field(v, "complete").as_bool() != Some(false);
    let mut notes = String::new();
    let binary = field(v, "skippedBinary").as_u64().unwrap_or(0);
    if binary > 0 {
        notes.push_str(&format!(
            "\n\n(Skipped {binary} binary file{}; pass one as `path` to search it.)",
            if binary == 1 { "" } else { "s" }
        ));
    }
    notes.push_str(&super::glob::ignored_note(v));
    notes.push_str(&denied_note(field(v, "deniedFiles")));
    if matches.is_empty() {
        return Ok(Arc::from(vec![ContentBlock::text(format!(
            "No matches found{notes}"
        ))]));
    }
    let at_least = if complete { "" } else { "at least " };
    let mut s = format!(
        "Found {at_least}{total} match{}",
        if total == 1 { "" } else { "es" }
    );
    let mut current: Option<&str> = None;
    for m in matches {
        let p = field(m, "path").as_str().unwrap_or_default();
        if current != Some(p) {
            s.push_str(if current.is_some() { "\n\n" } else { "\n" });
            s.push_str(p);
            s.push(':');
            current = Some(p);
        }
        let line = field(m, "line").as_u64().unwrap_or(0);
        let t = field(m, "text").as_str().unwrap_or_default();
        s.push_str(&format!("\n  Line {line}: {t}"));
    }
    if field(v, "truncated").as_bool() == Some(true) {
        s.push_str(&format!(
            "\n\n(Results are truncated: showing the first {} of {at_least}{total} matches. Use a more specific pattern, path or include filter to see the rest.)",
            matches.len()
        ));
    }
    s.push_str(&notes);
    Ok(Arc::from(vec![ContentBlock::text(s)]))
}

/// Collects one file's matching lines up to a budget and notes binary data (ripgrep's quit or
/// convert detection).
struct Lines<'a> {
    lines: &'a mut Vec<(u64, String)>,
    room: usize,
    binary: bool,
}

impl Sink for Lines<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let line = String::from_utf8_lossy(m.bytes());
        let line = line.trim_end_matches(['\n', '\r']);
        self.lines
            .push((m.line_number().unwrap_or(0), text::shown_line(line)));
        Ok(self.lines.len() < self.room)
    }

    fn binary_data(&mut self, s: &Searcher, _: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(s.binary_detection().quit_byte().is_none())
    }
}

struct FileMatches {
    mtime: SystemTime,
    path: String,
    lines: Vec<(u64, String)>,
}

async fn run(env: &ToolEnv, ctx: ToolContext) -> Result<Json, Failure> {
    let args: Args = decode(&ctx)?;
    let fs = env.context(&ctx);
    let base = env
        .resolve(&fs, args.path.as_deref().unwrap_or("."))
        .await?;
    check_abort(&ctx)?;
    let matcher = RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
        .map_err(|e| {
            FsError::InvalidPattern {
                kind: "regular expression",
                pattern: Arc::from(args.pattern.as_str()),
                reason: Arc::from(e.to_string()),
            }
            .to_failure()
        })?;
    let include = match &args.include {
        Some(g) => Some(PathGlob::new(g).map_err(|e| e.to_failure())?),
        None => None,
    };
    let ws = env.workspace.clone();
    let signal = ctx.signal().clone();
    let dir = base.clone();
    let hooks = env.hooks.clone();
    let gated = hooks.has_read_gate();
    let (mut files, collected, end, binary, ignored, denied) =
        tokio::task::spawn_blocking(move || {
            // Files a permission rule refuses to read: skipped, and said (path, rule).
            let mut denied: Vec<(String, String)> = Vec::new();
            // As ripgrep: a file named explicitly is searched even when binary (its NULs become
            // line ends); files found by walking are skipped at the first NUL, and counted.
            let explicit = walk::must_exist(NAME, &dir)?.is_file();
            let detection = if explicit {
                BinaryDetection::convert(b'\x00')
            } else {
                BinaryDetection::quit(b'\x00')
            };
            let mut searcher = SearcherBuilder::new()
                .line_number(true)
                .binary_detection(detection)
                .build();
            let mut files: Vec<FileMatches> = Vec::new();
            let mut collected = 0usize;
            let mut binary = 0usize;
            let report = walk::files(NAME, &ws, &dir, include.as_ref(), &signal, |f| {
                if gated && let Some(rule) = hooks.read_refused(&super::spelled(&ws, &f.real), None)
                {
                    denied.push((f.path.to_string_lossy().into_owned(), rule));
                    return true;
                }
                let mut lines = Vec::new();
                let mut sink = Lines {
                    lines: &mut lines,
                    room: MAX_COLLECTED - collected,
                    binary: false,
                };
                let _ = searcher.search_path(&matcher, &f.real, &mut sink);
                if sink.binary && !explicit {
                    binary += 1;
                    lines.clear();
                }
                if !lines.is_empty() {
                    collected += lines.len();
                    files.push(FileMatches {
                        mtime: f.mtime,
                        path: f.path.to_string_lossy().into_owned(),
                        lines,
                    });
                }
                collected < MAX_COLLECTED
            })?;
            let complete = matches!(report.end, WalkEnd::Complete) && collected < MAX_COLLECTED;
            Ok::<_, FsError>((files, collected, complete, binary, report.ignored, denied))
        })
        .await
        .map_err(|e| Failure::new(format!("grep failed: {e}")))?
        .map_err(|e| e.to_failure())?;
    files.sort_by(|a, b| b.mtime.cmp(&a.mtime).then_with(|| a.path.cmp(&b.path)));
    let mut shown = Vec::new();
    'outer: for f in &files {
        for (n, t) in &f.lines {
            if shown.len() >= MAX_MATCHES {
                break 'outer;
            }
            shown.push(json!({"path": f.path, "line": n, "text": t}));
        }
    }
    freeze(json!({
        "pattern": args.pattern,
        "path": base.to_string_lossy(),
        "truncated": collected > shown.len(),
        "matches": Value::Array(shown),
        "totalMatches": collected,
        "complete": end,
        "skippedBinary": binary,
        "ignored": super::glob::ignored_json(&ignored),
        "deniedFiles": denied.iter().map(|(p, r)| json!({"path": p, "rule": r})).collect::<Vec<_>>(),
    }))
}

/// What the model is told of the files a permission rule kept the search out of.
fn denied_note(denied: &Value) -> String {
    let Some(list) = denied.as_array().filter(|l| !l.is_empty()) else {
        return String::new();
    };
    let shown: Vec<String> = list
        .iter()
        .take(5)
        .map(|d| {
            format!(
                "{} ({})",
                field(d, "path").as_str().unwrap_or_default(),
                field(d, "rule").as_str().unwrap_or_default()
            )
        })
        .collect();
    let more = if list.len() > shown.len() {
        format!(", and {} more", list.len() - shown.len())
    } else {
        String::new()
    };
    format!(
        "\n\n({} file{} not searched: reading {} is denied by a permission rule: {}{more})",
        list.len(),
        if list.len() == 1 { "" } else { "s" },
        if list.len() == 1 { "it" } else { "them" },
        shown.join(", ")
    )
}

pub(crate) fn definition(env: ToolEnv) -> Result<ToolDefinition, CoreError> {
    ToolDefinition::builder(NAME, DESCRIPTION)
        .validated_parameters(parameters())
        .output(ToolOutput::new(output_schema(), render))
        .concurrency_safe(true)
        .permission_subject(subject("pattern"))
        .execute(move |ctx| {
            let env = env.clone();
            async move { run(&env, ctx).await }
        })
        .build()
}
