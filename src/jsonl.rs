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

/// dsh's state directory: `$XDG_STATE_HOME/dsh` (an absolute path), else
/// `~/.local/state/dsh`; `None` when neither is known.
pub fn state_dir() -> Option<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(xdg);
        if p.is_absolute() {
            return Some(p.join("dsh"));
        }
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(".local").join("state").join("dsh"))
}

/// A workspace's key among the state directory's sessions: its path with every character
/// other than an ASCII letter, digit, `.` or `_` turned into `-`, then `-` and a 64-bit FNV-1a
/// hash of the whole path (so `/a-b` and `/a/b` differ), e.g. `-home-u-proj-3f2a...`.
pub fn workspace_key(workspace: &Path) -> String {
    let text = workspace.to_string_lossy();
    let readable: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let tail: String = {
        let chars: Vec<char> = readable.chars().collect();
        chars[chars.len().saturating_sub(100)..].iter().collect()
    };
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in workspace.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{tail}-{hash:016x}")
}

/// Where a workspace's sessions are kept by default:
/// `<state dir>/sessions/<workspace key>/` (see [`state_dir`], [`workspace_key`]), outside the
/// workspace as other agents keep theirs; `<workspace>/.dsh/sessions` when no state directory
/// is known (neither `$XDG_STATE_HOME` nor `$HOME` is set).
pub fn sessions_dir(workspace: &Path) -> PathBuf {
    match state_dir() {
        Some(state) => state.join("sessions").join(workspace_key(workspace)),
        None => workspace.join(".dsh").join("sessions"),
    }
}

/// Where a workspace keeps the log of session `id` by default:
/// `<sessions_dir(workspace)>/<id>.jsonl`.
pub fn default_log_path(workspace: &Path, id: &str) -> PathBuf {
    sessions_dir(workspace).join(format!("{id}.jsonl"))
}

/// Whether `e` comes from the system refusing access (`EACCES`, `EPERM`) to a file or folder.
pub fn is_permission_denied(e: &SessionError) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let io = err.downcast_ref::<std::io::Error>().or_else(|| {
            err.downcast_ref::<std::sync::Arc<std::io::Error>>()
                .map(|a| &**a)
        });
        if io.is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied) {
            return true;
        }
        cur = err.source();
    }
    false
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
