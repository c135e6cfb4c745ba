//! The file tools (`read`, `write`, `edit`, `glob`, `grep`) with the reference's model-facing
//! names and parameters, and what they share: the environment they run in, argument decoding,
//! session lookup and path resolution.

pub(crate) mod edit;
pub(crate) mod glob;
pub(crate) mod grep;
pub(crate) mod read;
mod walk;
pub(crate) mod write;

use std::path::{Path, PathBuf};

use dsh_core::{AgentId, Failure, Json, PermissionSubject, ToolContext};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::FsError;
use crate::intent::{FsHooks, IntentQuery, Observation, ObservedEvent};
use crate::seam::Workspace;
use crate::session::{FsContext, FsSessions};

/// What every file tool runs against.
#[derive(Clone)]
pub(crate) struct ToolEnv {
    pub(crate) workspace: Workspace,
    pub(crate) hooks: FsHooks,
    pub(crate) sessions: FsSessions,
    /// Calls approved to reach a file outside the roots (`None`: escalation is off).
    pub(crate) escalations: Option<crate::escalation::Escalations>,
}

impl ToolEnv {
    /// The session context of this call (from its agent, or the default).
    pub(crate) fn context(&self, ctx: &ToolContext) -> FsContext {
        self.sessions.context_for(ctx.exec().agent())
    }

    /// Resolves a model-given path inside the roots.
    pub(crate) async fn resolve(&self, fs: &FsContext, raw: &str) -> Result<PathBuf, Failure> {
        self.workspace
            .resolve(&fs.cwd, raw)
            .await
            .map_err(|e| e.to_failure())
    }

    /// Where this call's file is: inside the roots (the workspace and the resolved path), or,
    /// for a call approved to escalate, in a workspace of its own rooted at the file's
    /// directory (see `escalation.rs`).
    pub(crate) async fn place(
        &self,
        ctx: &ToolContext,
        fs: &FsContext,
        raw: &str,
    ) -> Result<(Workspace, PathBuf), Failure> {
        let Some(escalations) = &self.escalations else {
            return Ok((self.workspace.clone(), self.resolve(fs, raw).await?));
        };
        if escalations.is_escalated(ctx.exec().token()) {
            let cwd = fs.cwd.clone();
            let raw = raw.to_owned();
            return tokio::task::spawn_blocking(move || {
                crate::escalation::outside_place(&cwd, &raw)
            })
            .await
            .map_err(|e| Failure::new(format!("resolving the path failed: {e}")))?;
        }
        match self.workspace.resolve(&fs.cwd, raw).await {
            Ok(path) => Ok((self.workspace.clone(), path)),
            Err(e) => Err(crate::escalation::outside_hint(&e)),
        }
    }

    /// The intent query of this call for `path`.
    pub(crate) fn query(fs: &FsContext, path: &Path) -> IntentQuery {
        IntentQuery {
            owner: fs.session_id.clone(),
            path: path.to_path_buf(),
        }
    }

    /// Announces what this call saw of `path` (`fs/observed`).
    pub(crate) fn observed(
        &self,
        fs: &FsContext,
        path: &Path,
        observation: Observation,
    ) -> Result<(), Failure> {
        self.hooks.observed().emit(&ObservedEvent {
            owner: fs.session_id.clone(),
            path: path.to_path_buf(),
            observation,
        })
    }
}

/// Decodes the arguments into the tool's input type (`INVALID_ARGS` when they do not fit).
pub(crate) fn decode<T: DeserializeOwned>(ctx: &ToolContext) -> Result<T, Failure> {
    let Some(json) = ctx.arguments().json() else {
        return Err(Failure::invalid_args(&[
            "arguments must be a JSON object".to_owned()
        ]));
    };
    json.decode::<T>()
        .map_err(|e| Failure::invalid_args(&[e.to_string()]))
}

/// The failure for a cancelled call (the body was invoked, so `ABORTED`).
pub(crate) fn check_abort(ctx: &ToolContext) -> Result<(), Failure> {
    if ctx.signal().is_aborted() {
        return Err(FsError::Aborted.to_failure());
    }
    Ok(())
}

/// The path as the session names it: relative to its working directory when inside it.
pub(crate) fn display_path(path: &Path, cwd: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.to_string_lossy().into_owned(),
        _ => path.to_string_lossy().into_owned(),
    }
}

/// A tool's parameters as offered: with `sandbox_permissions` and `justification` when the
/// tools may escalate to a file outside the roots.
pub(crate) fn offered(env: &ToolEnv, parameters: Json) -> Json {
    if env.escalations.is_none() {
        return parameters;
    }
    let mut schema = parameters.value().clone();
    crate::escalation::parameters(&mut schema);
    Json::from_shallow(schema)
}

/// Freezes a value built by a tool.
pub(crate) fn freeze(v: Value) -> Result<Json, Failure> {
    Json::new(v).map_err(|e| Failure::new(e.to_string()))
}

/// The `permission_subject` reader for a string argument.
pub(crate) fn subject(key: &'static str) -> impl Fn(&Value) -> Option<String> + Send + Sync {
    move |v| v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The `permission_subject` reader for a path argument: the file the tool will open, resolved
/// from the calling agent's working directory exactly as the tool resolves it (normalized,
/// every symlink followed), spelled relative to its workspace root and absolute. A path outside
/// the roots (which the tool then refuses) is spelled by its absolute canonical form only.
pub(crate) fn path_subject(
    env: &ToolEnv,
    key: &'static str,
) -> impl Fn(&Value, Option<&AgentId>) -> Option<PermissionSubject> + Send + Sync + 'static {
    let workspace = env.workspace.clone();
    let sessions = env.sessions.clone();
    move |v, agent| {
        let raw = v.get(key)?.as_str()?;
        let cwd = sessions.context_for(agent).cwd;
        Some(file_subject(&workspace, &cwd, Path::new(raw)))
    }
}

/// A file's permission subject (see [`path_subject`]).
pub(crate) fn file_subject(workspace: &Workspace, cwd: &Path, raw: &Path) -> PermissionSubject {
    let absolute = match workspace.resolve_blocking(cwd, raw) {
        Ok(p) => p,
        Err(_) => {
            let joined = if raw.is_absolute() {
                raw.to_path_buf()
            } else {
                cwd.join(raw)
            };
            std::fs::canonicalize(&joined).unwrap_or_else(|_| lexical(&joined))
        }
    };
    spelled(workspace, &absolute)
}

/// The spellings of a canonical absolute path: relative to its root (when inside one), then
/// absolute. For a path the tool already holds canonically (a file a walk found), with no
/// further resolution.
pub(crate) fn spelled(workspace: &Workspace, absolute: &Path) -> PermissionSubject {
    let mut forms = Vec::with_capacity(2);
    if let Some(rel) = workspace
        .roots()
        .iter()
        .find_map(|r| absolute.strip_prefix(r).ok())
    {
        forms.push(if rel.as_os_str().is_empty() {
            ".".to_owned()
        } else {
            rel.to_string_lossy().into_owned()
        });
    }
    forms.push(absolute.to_string_lossy().into_owned());
    PermissionSubject::spelled(forms)
}

/// Lexical normalization (`.` dropped, `..` pops) of an absolute path.
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            std::path::Component::RootDir | std::path::Component::Prefix(_) => {
                out = PathBuf::from("/")
            }
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// Reads a field of a value in a render or projection (a missing field is an empty default).
pub(crate) fn field<'v>(v: &'v Value, key: &str) -> &'v Value {
    v.get(key).unwrap_or(&Value::Null)
}
