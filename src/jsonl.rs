//! Durable sessions in the JSON Lines store: where a workspace keeps its logs and how one is
//! opened (created with its header, or read, crash-repaired and resumed).

use std::path::{Path, PathBuf};

use dsh_session::{OpenOptions, RepairReport, Session, SessionError};

/// A fresh session id: the time in milliseconds and the process id (`s<ms>-<pid>`).
pub fn session_id() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("s{t}-{}", std::process::id())
}

/// Where a workspace keeps the log of session `id`: `<workspace>/.dsh/sessions/<id>.jsonl`.
pub fn default_log_path(workspace: &Path, id: &str) -> PathBuf {
    workspace
        .join(".dsh")
        .join("sessions")
        .join(format!("{id}.jsonl"))
}

/// Opens the log at `path` (creating its folder and, for a new log, its header with `id` and
/// `cwd`); an existing log is repaired and resumed, and the report says what repair did.
pub async fn open_session(
    path: &Path,
    id: &str,
    cwd: &Path,
) -> Result<(Session, RepairReport), SessionError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        let dir = parent.to_path_buf();
        let made = tokio::task::spawn_blocking(move || std::fs::create_dir_all(dir))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
        made.map_err(|source| SessionError::Io {
            op: "create the folder of",
            path: path.to_path_buf(),
            source: std::sync::Arc::new(source),
        })?;
    }
    let options = OpenOptions::new().id(id).cwd(cwd.display().to_string());
    Session::open_jsonl(path, options).await
}
