//! `glob {pattern, path?}`: the files (never directories) under a directory that match a glob,
//! newest first, at most 100 with a note saying how to narrow the search and one saying what the
//! ignore files kept out. A missing directory is `FS_NOT_FOUND`, a file `FS_NOT_A_FILE`.

use std::sync::Arc;

use dsh_core::{ContentBlock, CoreError, Failure, Json, ToolContext, ToolDefinition, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};

use super::walk::{self, PathGlob, WalkEnd};
use super::{ToolEnv, check_abort, decode, field, freeze, subject};
use crate::error::FsError;

/// The tool's name.
pub const NAME: &str = "glob";
/// The tool's description.
pub const DESCRIPTION: &str = "Find files whose paths match a glob pattern (for example `**/*.rs` or `src/*.ts`), newest first.";
/// The most files one call lists.
pub const MAX_FILES: usize = 100;

#[derive(Deserialize)]
struct Args {
    pattern: String,
    path: Option<String>,
}

fn parameters() -> Json {
    Json::from_shallow(json!({
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob to match. Without a slash it matches file names at any depth (`*.rs`); with one it matches paths relative to the search directory (`src/**/*.rs`)."},
            "path": {"type": "string", "description": "Directory to search. Defaults to the working directory."}
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
            "files": {"type": "array", "items": {"type": "string"}},
            "total": {"type": "integer"},
            "truncated": {"type": "boolean"},
            "complete": {"type": "boolean"},
            "ignored": {"type": "object", "properties": {
                "files": {"type": "integer"}, "dirs": {"type": "integer"},
                "examples": {"type": "array", "items": {"type": "string"}}
            }}
        },
        "required": ["pattern", "path", "files", "total", "truncated", "complete"]
    }))
}

fn render(v: &Json) -> Result<dsh_core::Content, Failure> {
    let v = v.value();
    let files: Vec<&str> = field(v, "files")
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut s = if files.is_empty() {
        "No files found".to_owned()
    } else {
        files.join("\n")
    };
    let total = field(v, "total").as_u64().unwrap_or(0);
    if field(v, "truncated").as_bool() == Some(true) {
        s.push_str(&format!(
            "\n\n(Results are truncated: showing the first {} of {total} files, newest first. Use a more specific pattern or path to see the rest.)",
            files.len()
        ));
    }
    if field(v, "complete").as_bool() == Some(false) {
        s.push_str(&format!(
            "\n\n(The search stopped after {} entries. Use a more specific path to search the rest.)",
            walk::MAX_WALK_ENTRIES
        ));
    }
    s.push_str(&ignored_note(v));
    Ok(Arc::from(vec![ContentBlock::text(s)]))
}

/// The note about what the ignore files kept out, from the output's `ignored` object.
pub(crate) fn ignored_note(v: &Value) -> String {
    let ig = field(v, "ignored");
    let ignored = walk::Ignored {
        files: usize::try_from(field(ig, "files").as_u64().unwrap_or(0)).unwrap_or(0),
        dirs: usize::try_from(field(ig, "dirs").as_u64().unwrap_or(0)).unwrap_or(0),
        examples: field(ig, "examples")
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
    };
    ignored.note()
}

/// The output's `ignored` object.
pub(crate) fn ignored_json(ig: &walk::Ignored) -> Value {
    json!({"files": ig.files, "dirs": ig.dirs, "examples": ig.examples})
}

async fn run(env: &ToolEnv, ctx: ToolContext) -> Result<Json, Failure> {
    let args: Args = decode(&ctx)?;
    let fs = env.context(&ctx);
    let base = env
        .resolve(&fs, args.path.as_deref().unwrap_or("."))
        .await?;
    check_abort(&ctx)?;
    let filter = PathGlob::new(&args.pattern).map_err(|e| e.to_failure())?;
    let ws = env.workspace.clone();
    let signal = ctx.signal().clone();
    let dir = base.clone();
    let (mut found, report) = tokio::task::spawn_blocking(move || {
        if !walk::must_exist(NAME, &dir)?.is_dir() {
            return Err(FsError::NotAFile {
                op: "glob",
                path: Arc::from(dir.to_string_lossy().as_ref()),
                what: Arc::from("it is not a directory"),
            });
        }
        let mut found = Vec::new();
        let end = walk::files(NAME, &ws, &dir, Some(&filter), &signal, |f| {
            found.push((f.mtime, f.path));
            true
        })?;
        Ok((found, end))
    })
    .await
    .map_err(|e| Failure::new(format!("glob failed: {e}")))?
    .map_err(|e| e.to_failure())?;
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    let files: Vec<Value> = found
        .iter()
        .take(MAX_FILES)
        .map(|(_, p)| Value::String(p.to_string_lossy().into_owned()))
        .collect();
    freeze(json!({
        "pattern": args.pattern,
        "path": base.to_string_lossy(),
        "files": files,
        "total": total,
        "truncated": total > MAX_FILES,
        "complete": matches!(report.end, WalkEnd::Complete),
        "ignored": ignored_json(&report.ignored),
    }))
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
