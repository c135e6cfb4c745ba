//! `edit {file_path, old_string, new_string, replace_all?}`: replaces literal text in an existing
//! text file. It announces `fs/edit-intent` first; the basis is checked before the literal is
//! looked for (a stale file is reported as stale even when the text is gone); the match must be
//! unique unless `replace_all`. A CRLF file is matched with the model's `\n` turned into `\r\n`.

use std::sync::Arc;

use dsh_core::{ContentBlock, CoreError, Failure, Json, ToolContext, ToolDefinition, ToolOutput};
use serde::Deserialize;
use serde_json::json;

use super::write::mutation_meta;
use super::{ToolEnv, check_abort, decode, display_path, field, freeze, path_subject};
use crate::diff::{self, Diff, Span};
use crate::error::FsError;
use crate::intent::Observation;
use crate::remedy::apply_remedy;

/// The tool's name.
pub const NAME: &str = "edit";
/// The tool's description (the reference's).
pub const DESCRIPTION: &str = "Edit an existing UTF-8 text file by replacing literal text.";

#[derive(Deserialize)]
struct Args {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: Option<bool>,
}

fn parameters() -> Json {
    Json::from_shallow(json!({
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path to edit, resolved by the filesystem backend."},
            "old_string": {"type": "string", "description": "Literal text to replace. Must match exactly."},
            "new_string": {"type": "string", "description": "Literal replacement text. Use an empty string to delete the match."},
            "replace_all": {"type": "boolean", "description": "Replace all matches. Defaults to false; when false, old_string must appear exactly once."}
        },
        "required": ["file_path", "old_string", "new_string"]
    }))
}

fn output_schema() -> Json {
    Json::from_shallow(json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "before": {"type": "string"},
            "after": {"type": "string"},
            "version": {"type": "string"},
            "replacements": {"type": "integer"},
            "diffs": {"type": "array"}
        },
        "required": ["path", "before", "after", "version", "replacements", "diffs"]
    }))
}

fn render(v: &Json) -> Result<dsh_core::Content, Failure> {
    let path = field(v.value(), "path").as_str().unwrap_or_default();
    Ok(Arc::from(vec![ContentBlock::text(format!(
        "The file {path} has been updated successfully."
    ))]))
}

/// Applies the replacement to `text`: the new text, the spans replaced, and the diffs.
fn apply(
    text: &str,
    old: &str,
    new: &str,
    all: bool,
    path: &str,
    shown: &str,
) -> Result<(String, (usize, Vec<Diff>)), FsError> {
    let mut old = old.to_owned();
    let mut new = new.to_owned();
    let mut found: Vec<usize> = text.match_indices(old.as_str()).map(|(i, _)| i).collect();
    if found.is_empty() && text.contains("\r\n") && old.contains('\n') && !old.contains("\r\n") {
        old = old.replace('\n', "\r\n");
        new = new.replace('\n', "\r\n");
        found = text.match_indices(old.as_str()).map(|(i, _)| i).collect();
    }
    match found.len() {
        0 => {
            return Err(FsError::EditNotFound {
                path: Arc::from(path),
            });
        }
        1 => {}
        n if !all => {
            return Err(FsError::AmbiguousEdit {
                path: Arc::from(path),
                count: n,
            });
        }
        _ => {}
    }
    let after = text.replace(old.as_str(), &new);
    let spans: Vec<Span> = found
        .iter()
        .map(|&i| Span {
            old_start: i,
            old_len: old.len(),
            new_len: new.len(),
        })
        .collect();
    let diffs = diff::for_replacements(shown, text, &after, &spans);
    Ok((after, (found.len(), diffs)))
}

async fn run(env: &ToolEnv, ctx: ToolContext) -> Result<Json, Failure> {
    let args: Args = decode(&ctx)?;
    let fs = env.context(&ctx);
    let (workspace, path) = env.place(&ctx, &fs, &args.file_path).await?;
    let path_text = path.to_string_lossy().into_owned();
    if args.old_string.is_empty() {
        return Err(FsError::EditInvalid {
            path: Arc::from(path_text.as_str()),
            reason: Arc::from("old_string is empty; use write to create or replace a whole file"),
        }
        .to_failure());
    }
    if args.old_string == args.new_string {
        return Err(FsError::EditInvalid {
            path: Arc::from(path_text.as_str()),
            reason: Arc::from(
                "old_string and new_string are identical; there is nothing to change",
            ),
        }
        .to_failure());
    }
    check_abort(&ctx)?;
    let condition = env
        .hooks
        .decide_edit(&ToolEnv::query(&fs, &path))
        .map_err(|f| apply_remedy(&f))?;
    let shown = display_path(&path, &fs.cwd);
    let all = args.replace_all.unwrap_or(false);
    let (old, new) = (args.old_string, args.new_string);
    let outcome = workspace
        .edit_if_cancellable(
            &path,
            condition,
            move |text| apply(text, &old, &new, all, &path_text, &shown),
            ctx.signal(),
        )
        .await
        .map_err(|e| e.to_failure())?;
    env.observed(&fs, &outcome.path, Observation::Present(outcome.version))?;
    let (replacements, diffs) = outcome.extra;
    freeze(json!({
        "path": outcome.path.to_string_lossy(),
        "before": outcome.before,
        "after": outcome.after,
        "version": outcome.version.to_string(),
        "replacements": replacements,
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
