//! Whether a workspace's own settings apply: asked once on a terminal and remembered, given by
//! `--trust-workspace`, otherwise not (said on stderr). A repository someone else wrote runs
//! nothing until its user says so.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use dsh::hooks::{TrustStore, WorkspaceSettingsFile};

use super::Exit;

/// Decides whether `<workspace>/.dsh/settings.json` applies (`false` when there is none).
pub fn decide(workspace: &Path, flag: bool) -> Result<bool, Exit> {
    let file = WorkspaceSettingsFile::find(workspace).map_err(|e| Exit::usage(e.to_string()))?;
    let Some(file) = file else {
        return Ok(false);
    };
    if flag {
        return Ok(true);
    }
    let store = TrustStore::standard();
    if store.as_ref().is_some_and(|s| s.is_trusted(&file)) {
        return Ok(true);
    }
    if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        return Ok(ask(&file, store.as_ref()));
    }
    err_line!(
        "dsh: not applying {}: this workspace is not trusted, and its hooks would run commands with your rights; pass --trust-workspace to apply it (or run dsh on a terminal to be asked once)",
        super::render::sanitize(&file.path.display().to_string())
    );
    Ok(false)
}

/// The commands a settings file would run, for the question.
fn commands(file: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(events) = value.get("hooks").and_then(|h| h.as_object()) {
        for (event, groups) in events {
            for group in groups.as_array().into_iter().flatten() {
                for hook in group
                    .get("hooks")
                    .and_then(|h| h.as_array())
                    .into_iter()
                    .flatten()
                {
                    if let Some(c) = hook.get("command").and_then(|c| c.as_str()) {
                        out.push(format!("{event}: {c}"));
                    }
                }
            }
        }
    }
    out
}

fn ask(file: &WorkspaceSettingsFile, store: Option<&TrustStore>) -> bool {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "dsh: this workspace has its own settings, {}, whose hooks run commands with your rights, outside the sandbox:",
        super::render::sanitize(&file.path.display().to_string())
    );
    for c in commands(&file.path) {
        let _ = writeln!(err, "  {}", super::render::sanitize(&c));
    }
    let _ = write!(err, "dsh: trust this workspace with this file? [y/N] ");
    let _ = err.flush();
    drop(err);
    let mut answer = String::new();
    let yes = std::io::stdin().lock().read_line(&mut answer).is_ok()
        && matches!(answer.trim(), "y" | "Y" | "yes");
    if !yes {
        err_line!("dsh: running without the workspace's settings");
        return false;
    }
    match store.map(|s| s.trust(file)) {
        Some(Ok(())) => {}
        Some(Err(e)) => err_line!("dsh: warning: the answer is not remembered: {e}"),
        None => err_line!("dsh: warning: the answer is not remembered: no config directory"),
    }
    true
}
