//! `glob {pattern, path?}`: the files (never directories) under a directory that match a glob,
//! newest first, at most 100 with a note saying how to narrow the search.

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
            "complete": {"type": "boolean"}
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
    Ok(Arc::from(vec![ContentBlock::text(s)]))
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
    let (mut found, end) = tokio::task::spawn_blocking(move || {
        if !dir.is_dir() {
            return Err(FsError::NotAFile {
                op: "glob",
                path: Arc::from(dir.to_string_lossy().as_ref()),
                what: Arc::from("it is not a directory"),
            });
        }
        let mut found = Vec::new();
        let end = walk::files(&ws, &dir, Some(&filter), &signal, |f| {
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
        "complete": matches!(end, WalkEnd::Complete),
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
