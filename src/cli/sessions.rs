//! `dsh sessions`: a workspace's session logs, newest first, one per line starting with its id;
//! and finding one for `--resume`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use clap::Args;

use super::Exit;

/// `dsh sessions` options.
#[derive(Args, Debug)]
pub struct SessionsArgs {
    /// The workspace (default: the current directory).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// With a store: every session of the store, each with its workspace, not only this
    /// workspace's.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub store: super::store::StoreArg,
}

/// One session log of a workspace.
pub(super) struct Entry {
    pub(super) id: String,
    pub(super) path: PathBuf,
    pub(super) modified: SystemTime,
    pub(super) size: u64,
}

/// The workspace's session logs, newest first.
pub(super) fn list(workspace: &Path) -> Result<Vec<Entry>, Exit> {
    list_dir(&dsh::jsonl::sessions_dir(workspace))
}

/// The session logs (`*.jsonl`) in `dir`, newest first; none when `dir` does not exist.
pub(super) fn list_dir(dir: &Path) -> Result<Vec<Entry>, Exit> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Exit::usage(format!("{}: {e}", dir.display()))),
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(id) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".jsonl"))
        else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        found.push(Entry {
            id: id.to_owned(),
            path: path.clone(),
            modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            size: meta.len(),
        });
    }
    found.sort_by(|a, b| b.modified.cmp(&a.modified).then(b.id.cmp(&a.id)));
    Ok(found)
}

/// The log `--resume WHICH` names: a file, a session id of the workspace, or (empty) the
/// workspace's most recent session.
#[cfg_attr(not(feature = "agent"), allow(dead_code))]
pub fn find(workspace: &Path, which: &str) -> Result<PathBuf, Exit> {
    let given = Path::new(which);
    if !which.is_empty() && given.is_file() {
        return Ok(given.to_path_buf());
    }
    let sessions = list(workspace)?;
    let found = if which.is_empty() {
        sessions.into_iter().next()
    } else {
        sessions.into_iter().find(|s| s.id == which)
    };
    match found {
        Some(s) => Ok(s.path),
        None if which.is_empty() => Err(Exit::usage(format!(
            "--resume: {} has no session yet",
            workspace.display()
        ))),
        None => Err(Exit::usage(format!(
            "--resume {which}: no such session in {} (`dsh sessions` lists them)",
            workspace.display()
        ))),
    }
}

/// The first prompt of a log (its first `user/message`), on one line, cut at 80 characters.
pub(super) fn first_prompt(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    for line in std::io::BufReader::new(file).lines().map_while(Result::ok) {
        if !line.contains("\"user/message\"") {
            continue;
        }
        let event: serde_json::Value = serde_json::from_str(&line).ok()?;
        let content = &event["data"]["content"];
        let text = match content {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join(" "),
            _ => continue,
        };
        let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut cut: String = one_line.chars().take(80).collect();
        if cut.len() < one_line.len() {
            cut.push('…');
        }
        return Some(cut);
    }
    None
}

/// A size as people read it.
fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / (1 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} kB", b as f64 / (1 << 10) as f64),
        b => format!("{b} B"),
    }
}

/// `text` on one line: each control character (a line break, a tab, an escape) written as its
/// escape (`\n`, `\t`, `\u{1b}`), so that a name holding one cannot split a listing's line
/// or drive the terminal.
pub fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().collect()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
}

/// Runs `dsh sessions`: the workspace's sessions, of its files or (with a store) those whose
/// header's `cwd` is the workspace, as a run in it writes; a workspace that does not exist is
/// refused.
pub async fn sessions(args: SessionsArgs) -> Result<i32, Exit> {
    let workspace = super::options::workspace_or_cwd(args.workspace.as_ref())?;
    let workspace = workspace
        .canonicalize()
        .map_err(|e| Exit::usage(format!("workspace {}: {e}", workspace.display())))?;
    if let Some(url) = args.store.url()? {
        return super::store::sessions(&url, &workspace, args.all).await;
    }
    if args.all {
        return Err(Exit::usage(
            "--all lists every session of a store: give --store URL (or DSH_STORE); without \
             one, sessions are files and listed per workspace",
        ));
    }
    for s in list(&workspace)? {
        let when = httpdate::fmt_http_date(s.modified);
        let prompt = first_prompt(&s.path).unwrap_or_else(|| "(no prompt)".to_owned());
        super::out(&format!(
            "{}  {when}  {:>8}  {}",
            one_line(&s.id),
            human(s.size),
            super::render::sanitize(&prompt)
        ));
    }
    Ok(0)
}
