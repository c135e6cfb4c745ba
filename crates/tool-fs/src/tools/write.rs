//! `write {file_path, content}`: creates or wholly replaces a text file. It announces
//! `fs/write-intent` before touching disk, writes under the answer as one compare-and-set, then
//! records its own write as observed, so a later edit needs no re-read. Its `meta` carries the
//! diff (`{diffs: [{path, oldText, newText}]}`).

use std::sync::Arc;

use dsh_core::{ContentBlock, CoreError, Failure, Json, ToolContext, ToolDefinition, ToolOutput};
use serde::Deserialize;
use serde_json::json;

use super::{ToolEnv, check_abort, decode, display_path, field, freeze, path_subject};
use crate::diff;
use crate::intent::Observation;
use crate::remedy::apply_remedy;
use crate::replay::observed_meta;

/// The tool's name.
pub const NAME: &str = "write";
/// The tool's description (the reference's).
pub const DESCRIPTION: &str = "Create or fully replace a UTF-8 text file.";

#[derive(Deserialize)]
struct Args {
    file_path: String,
    content: String,
}

fn parameters() -> Json {
    Json::from_shallow(json!({
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path to write, resolved by the filesystem backend."},
            "content": {"type": "string", "description": "Full UTF-8 text content to write."}
        },
        "required": ["file_path", "content"]
    }))
}

fn output_schema() -> Json {
    Json::from_shallow(json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "operation": {"enum": ["create", "update"]},
            "before": {"type": ["string", "null"]},
            "after": {"type": "string"},
            "version": {"type": "string"},
            "diffs": {"type": "array"}
        },
        "required": ["path", "operation", "before", "after", "version", "diffs"]
    }))
}

fn render(v: &Json) -> Result<dsh_core::Content, Failure> {
    let v = v.value();
    let path = field(v, "path").as_str().unwrap_or_default();
    let text = if field(v, "operation").as_str() == Some("create") {
        format!("Created file {path}.")
    } else {
        format!("The file {path} has been overwritten successfully.")
    };
    Ok(Arc::from(vec![ContentBlock::text(text)]))
}

/// The meta of a mutation: its diffs and what it leaves observed.
pub(crate) fn mutation_meta(v: &Json) -> Result<Option<Json>, Failure> {
    let v = v.value();
    let path = field(v, "path").as_str().unwrap_or_default();
    let version: crate::version::FileVersion = field(v, "version")
        .as_str()
        .unwrap_or_default()
        .parse()
        .map_err(|e: crate::version::VersionParseError| Failure::new(e.to_string()))?;
    freeze(json!({
        "diffs": field(v, "diffs"),
        "observed": observed_meta(std::path::Path::new(path), &version),
    }))
    .map(Some)
}

async fn run(env: &ToolEnv, ctx: ToolContext) -> Result<Json, Failure> {
    let args: Args = decode(&ctx)?;
    let fs = env.context(&ctx);
    let (workspace, path) = env.place(&ctx, &fs, &args.file_path).await?;
    check_abort(&ctx)?;
    let condition = env
        .hooks
        .decide_write(&ToolEnv::query(&fs, &path))
        .map_err(|f| apply_remedy(&f))?;
    let content = args.content;
    let outcome = workspace
        .write_if_cancellable(&path, condition, content.clone().into_bytes(), ctx.signal())
        .await
        .map_err(|e| e.to_failure())?;
    env.observed(&fs, &outcome.path, Observation::Present(outcome.version))?;
    let shown = display_path(&outcome.path, &fs.cwd);
    let before = outcome.before;
    let (diffs, before, content) = tokio::task::spawn_blocking(move || {
        let d = diff::for_rewrite(&shown, before.as_deref(), &content);
        (d, before, content)
    })
    .await
    .map_err(|e| Failure::new(format!("diff failed: {e}")))?;
    freeze(json!({
        "path": outcome.path.to_string_lossy(),
        "operation": if outcome.existed { "update" } else { "create" },
        "before": before,
        "after": content,
        "version": outcome.version.to_string(),
        "diffs": serde_json::to_value(&diffs).map_err(|e| Failure::new(e.to_string()))?,
    }))
}

pub(crate) fn definition(env: ToolEnv) -> Result<ToolDefinition, CoreError> {
    ToolDefinition::builder(NAME, DESCRIPTION)
        .validated_parameters(super::offered(&env, parameters()))
        .output(ToolOutput::new(output_schema(), render).with_presentation_meta(mutation_meta))
        .concurrency_safe(false)
        .permission_subjects(path_subject(&env, "file_path"))
        .execute(move |ctx| {
            let env = env.clone();
            async move { run(&env, ctx).await }
        })
        .build()
}
