//! Workspace trust: a workspace's own settings (`.dsh/settings.json`, whose hooks run commands
//! with the user's rights, outside any sandbox) apply only once the user has trusted that
//! workspace with that exact file. Trust is remembered in the user's config directory
//! (`trusted-workspaces.json`) as the workspace's canonical path and the SHA-256 of the file:
//! a changed file is untrusted again.
//!
//! Guarantees: an unreadable or malformed store trusts nothing (and a write never loses the
//! other entries: the store is rewritten whole through a temp file and a rename).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::HooksError;
use crate::settings::{WORKSPACE_SETTINGS, user_config_dir};

/// The store's file name in the user's config directory.
pub const TRUST_FILE: &str = "trusted-workspaces.json";

/// A workspace's own settings file, as it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceSettingsFile {
    /// The file (`<workspace>/.dsh/settings.json`).
    pub path: PathBuf,
    /// The canonical workspace it belongs to.
    pub workspace: PathBuf,
    /// The SHA-256 of its bytes, in hex.
    pub digest: String,
}

impl WorkspaceSettingsFile {
    /// The workspace's settings file, if it has one (`Ok(None)`: no file).
    pub fn find(workspace: &Path) -> Result<Option<WorkspaceSettingsFile>, HooksError> {
        let path = workspace.join(WORKSPACE_SETTINGS);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(HooksError::Read { path, source }),
        };
        let workspace = std::fs::canonicalize(workspace).map_err(|source| HooksError::Read {
            path: workspace.to_path_buf(),
            source,
        })?;
        Ok(Some(WorkspaceSettingsFile {
            path,
            workspace,
            digest: digest(&bytes),
        }))
    }
}

/// The SHA-256 of `bytes`, in hex.
pub fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The remembered trust decisions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustStore {
    file: PathBuf,
}

impl TrustStore {
    /// The store in the user's config directory (`$XDG_CONFIG_HOME/dsh` or `~/.config/dsh`).
    pub fn standard() -> Option<TrustStore> {
        user_config_dir().map(|d| TrustStore::at(d.join(TRUST_FILE)))
    }

    /// A store kept in `file`.
    pub fn at(file: impl Into<PathBuf>) -> TrustStore {
        TrustStore { file: file.into() }
    }

    /// The store's file.
    pub fn file(&self) -> &Path {
        &self.file
    }

    fn entries(&self) -> BTreeMap<String, String> {
        std::fs::read(&self.file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Whether the user trusted `settings` (this workspace, this exact file).
    pub fn is_trusted(&self, settings: &WorkspaceSettingsFile) -> bool {
        self.entries()
            .get(&settings.workspace.to_string_lossy().into_owned())
            .is_some_and(|d| *d == settings.digest)
    }

    /// Remembers that the user trusts `settings`.
    pub fn trust(&self, settings: &WorkspaceSettingsFile) -> Result<(), HooksError> {
        let mut entries = self.entries();
        entries.insert(
            settings.workspace.to_string_lossy().into_owned(),
            settings.digest.clone(),
        );
        let write_err = |source| HooksError::Read {
            path: self.file.clone(),
            source,
        };
        if let Some(dir) = self.file.parent() {
            std::fs::create_dir_all(dir).map_err(write_err)?;
        }
        let text = serde_json::to_vec_pretty(&entries).map_err(|e| HooksError::Invalid {
            path: self.file.clone(),
            message: e.to_string(),
        })?;
        let tmp = self.file.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(write_err)?;
        std::fs::rename(&tmp, &self.file).map_err(write_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_for_this_workspace_and_this_exact_file() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".dsh")).unwrap();
        assert_eq!(WorkspaceSettingsFile::find(&ws).unwrap(), None);
        std::fs::write(ws.join(".dsh/settings.json"), "{}").unwrap();
        let store = TrustStore::at(dir.path().join("cfg").join(TRUST_FILE));
        let file = WorkspaceSettingsFile::find(&ws).unwrap().unwrap();
        assert!(!store.is_trusted(&file));
        store.trust(&file).unwrap();
        assert!(store.is_trusted(&file));
        std::fs::write(ws.join(".dsh/settings.json"), "{\"hooks\": {}}").unwrap();
        let changed = WorkspaceSettingsFile::find(&ws).unwrap().unwrap();
        assert!(!store.is_trusted(&changed), "a changed file is asked again");
    }
}
