//! `read {file_path, offset?, limit?}`: line-numbered text in the reference's envelope, bounded
//! (2,000 lines, 50 KiB of text, 2,000 characters a line) with a note on how to see more. It
//! records what it saw (`fs/observed`): the version of the bytes read, or that the file is absent.
//! A file over the size cap is streamed when `offset` or `limit` asks for a window of it.

use std::sync::Arc;

use dsh_core::{ContentBlock, CoreError, Failure, Json, ToolContext, ToolDefinition, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ToolEnv, check_abort, decode, field, freeze, path_subject};
use crate::error::FsError;
use crate::intent::Observation;
use crate::replay::observed_meta;
use crate::text::{self, DEFAULT_READ_LINES, MAX_READ_BYTES};

/// The tool's name.
pub const NAME: &str = "read";
/// The tool's description (the reference's).
pub const DESCRIPTION: &str = "Read a UTF-8 text file and return line-numbered content.";

#[derive(Deserialize)]
struct Args {
    file_path: String,
    offset: Option<f64>,
    limit: Option<f64>,
}

fn parameters() -> Json {
    Json::from_shallow(json!({
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path to read, resolved by the filesystem backend."},
            "offset": {"type": "number", "description": "1-based first line to return. Defaults to 1."},
            "limit": {"type": "number", "description": "Maximum number of lines to return. Defaults to 2000."}
        },
        "required": ["file_path"]
    }))
}

fn text_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "offset": {"type": "integer"},
            "lines": {"type": "array", "items": {
                "type": "object",
                "properties": {"number": {"type": "integer"}, "text": {"type": "string"}},
                "required": ["number", "text"]
            }},
            "totalLines": {"type": "integer"},
            "version": {"type": "string"}
        },
        "required": ["path", "offset", "lines", "totalLines", "version"]
    })
}

/// A text read, or an image read (see `image.rs`).
fn output_schema() -> Json {
    Json::from_shallow(json!({"anyOf": [text_schema(), crate::image::schema()]}))
}

/// A whole positive count from a JSON number (`2.0` is 2); `None` when it is not one.
fn count(n: f64) -> Option<u64> {
    (n.is_finite() && n >= 0.0 && n.fract() == 0.0 && n <= 9.0e15).then_some(n as u64)
}

fn render(v: &Json) -> Result<dsh_core::Content, Failure> {
    let v = v.value();
    if field(v, "type").as_str() == Some("image") {
        return Ok(Arc::from(crate::image::content(v)));
    }
    let path = field(v, "path").as_str().unwrap_or_default();
    let offset = field(v, "offset").as_u64().unwrap_or(1);
    let total = field(v, "totalLines").as_u64().unwrap_or(0);
    let lines = field(v, "lines")
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let mut s = format!("<path>{path}</path>\n<type>file</type>\n<content>\n");
    for l in lines {
        let n = field(l, "number").as_u64().unwrap_or(0);
        let t = field(l, "text").as_str().unwrap_or_default();
        s.push_str(&format!("{n}: {t}\n"));
    }
    if !lines.is_empty() {
        s.push('\n');
    }
    let last = offset + lines.len() as u64 - u64::from(!lines.is_empty());
    if !lines.is_empty() && last < total {
        s.push_str(&format!(
            "(Showing lines {offset}-{last} of {total}. Use offset={} to continue.)",
            last + 1
        ));
    } else {
        s.push_str(&format!("(End of file - total {total} lines)"));
    }
    s.push_str("\n</content>");
    Ok(Arc::from(vec![ContentBlock::text(s)]))
}

fn meta(v: &Json) -> Result<Option<Json>, Failure> {
    let v = v.value();
    let path = field(v, "path").as_str().unwrap_or_default();
    let version: crate::version::FileVersion = field(v, "version")
        .as_str()
        .unwrap_or_default()
        .parse()
        .map_err(|e: crate::version::VersionParseError| Failure::new(e.to_string()))?;
    if field(v, "type").as_str() == Some("image") {
        let observed = observed_meta(std::path::Path::new(path), &version);
        return freeze(json!({"path": path, "observed": observed})).map(Some);
    }
    let m = json!({
        "path": path,
        "offset": field(v, "offset"),
        "lines": field(v, "lines"),
        "totalLines": field(v, "totalLines"),
        "observed": observed_meta(std::path::Path::new(path), &version),
    });
    freeze(m).map(Some)
}

async fn run(env: &ToolEnv, ctx: ToolContext) -> Result<Json, Failure> {
    let args: Args = decode(&ctx)?;
    let bad =
        |what: &str| Failure::invalid_args(&[format!("\"{what}\" must be a positive integer")]);
    let offset = match args.offset {
        None => 1,
        Some(n) => count(n).ok_or_else(|| bad("offset"))?.max(1),
    };
    let limit = match args.limit {
        None => DEFAULT_READ_LINES as u64,
        Some(n) => count(n).filter(|l| *l > 0).ok_or_else(|| bad("limit"))?,
    };
    let fs = env.context(&ctx);
    let (workspace, path) = env.place(&ctx, &fs, &args.file_path).await?;
    check_abort(&ctx)?;
    // The permission rules decided on the path as resolved before the call ran; the file is
    // checked again as resolved now, right before it is opened (a symlink swapped in between
    // does not lead past a read deny, nor past an `ask` approved for another file).
    if let Some(rule) = env.hooks.read_refused(
        &super::file_subject(&env.workspace, &fs.cwd, &path),
        ctx.exec().approved_subject(),
    ) {
        return Err(Failure::new(format!(
            "reading \"{}\" is denied by permission rule {rule}",
            path.display()
        )));
    }
    let windowed = args.offset.is_some() || args.limit.is_some();
    let contents = match workspace.read(&path).await {
        Ok(c) => c,
        Err(FsError::TooLarge { .. }) if windowed => {
            return streamed(env, &workspace, &fs, &path, offset, limit).await;
        }
        Err(e @ FsError::TooLarge { .. }) => {
            return Err(e
                .to_failure()
                .with_suffix(" — read a window of it with offset and limit"));
        }
        Err(e @ FsError::NotFound { .. }) => {
            env.observed(&fs, &path, Observation::Absent)?;
            return Err(e.to_failure());
        }
        Err(e) => return Err(e.to_failure()),
    };
    env.observed(&fs, &path, Observation::Present(contents.version))?;
    let shown = path.to_string_lossy().into_owned();
    let version = contents.version;
    let bytes = contents.bytes;
    if let Some(mime) = crate::image::sniff(&bytes) {
        return freeze(crate::image::value(
            &shown,
            mime,
            &bytes,
            &version.to_string(),
        )?);
    }
    if bytes.len() <= INLINE_BYTES {
        return page(&bytes, shown, version, offset, limit);
    }
    tokio::task::spawn_blocking(move || page(&bytes, shown, version, offset, limit))
        .await
        .map_err(|e| Failure::new(format!("read failed: {e}")))?
}

/// A window of a file too large to read whole: its lines streamed (issue 17 item 6), with the
/// same value, range check and observation as a whole read.
async fn streamed(
    env: &ToolEnv,
    workspace: &crate::seam::Workspace,
    fs: &crate::session::FsContext,
    path: &std::path::Path,
    offset: u64,
    limit: u64,
) -> Result<Json, Failure> {
    let page = workspace
        .read_lines(path, offset, limit, MAX_READ_BYTES)
        .await
        .map_err(|e| e.to_failure())?;
    env.observed(fs, path, Observation::Present(page.version))?;
    let shown = page.path.to_string_lossy().into_owned();
    if offset > 1 && offset > page.total {
        return Err(FsError::InvalidRange {
            path: Arc::from(shown.as_str()),
            offset,
            total: usize::try_from(page.total).unwrap_or(usize::MAX),
        }
        .to_failure());
    }
    let lines: Vec<Value> = page
        .lines
        .into_iter()
        .map(|(number, text)| json!({"number": number, "text": text}))
        .collect();
    freeze(json!({
        "path": shown,
        "offset": offset,
        "lines": Value::Array(lines),
        "totalLines": page.total,
        "version": page.version.to_string(),
    }))
}

/// Files up to this size are decoded and paged on the calling task; larger ones on a blocking
/// thread.
const INLINE_BYTES: usize = 256 * 1024;

/// The value of one page of a file: decoded, split into lines and bounded.
fn page(
    bytes: &[u8],
    shown: String,
    version: crate::version::FileVersion,
    offset: u64,
    limit: u64,
) -> Result<Json, Failure> {
    let body = text::decode(bytes).map_err(|why| {
        FsError::NotText {
            op: "read",
            path: Arc::from(shown.as_str()),
            why: Arc::from(why.0),
        }
        .to_failure()
    })?;
    let all = text::lines(body);
    let total = all.len();
    if offset > 1 && offset as usize > total {
        return Err(FsError::InvalidRange {
            path: Arc::from(shown.as_str()),
            offset,
            total,
        }
        .to_failure());
    }
    let mut lines = Vec::new();
    let mut used = 0usize;
    for (i, line) in all.iter().enumerate().skip(offset as usize - 1) {
        if lines.len() as u64 >= limit {
            break;
        }
        let text = text::shown_line(line);
        used += text.len() + 1;
        if used > MAX_READ_BYTES && !lines.is_empty() {
            break;
        }
        lines.push(json!({"number": i + 1, "text": text}));
    }
    freeze(json!({
        "path": shown,
        "offset": offset,
        "lines": Value::Array(lines),
        "totalLines": total,
        "version": version.to_string(),
    }))
}

pub(crate) fn definition(env: ToolEnv) -> Result<ToolDefinition, CoreError> {
    ToolDefinition::builder(NAME, DESCRIPTION)
        .validated_parameters(super::offered(&env, parameters()))
        .output(ToolOutput::new(output_schema(), render).with_presentation_meta(meta))
        .concurrency_safe(true)
        .permission_subjects(path_subject(&env, "file_path"))
        .execute(move |ctx| {
            let env = env.clone();
            async move { run(&env, ctx).await }
        })
        .build()
}
