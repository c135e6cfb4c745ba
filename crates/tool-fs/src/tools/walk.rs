//! Confined directory walking for `glob` and `grep`: ripgrep's `ignore` walker (hidden files and
//! `.gitignore`d paths skipped, links not followed), glob filters with gitignore-like semantics
//! (a pattern without `/` matches a file name at any depth; one with `/` matches the path relative
//! to the search directory), symlinked files kept only when they resolve inside the roots, and a
//! cancellation check at every entry.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use dsh_core::Signal;
use globset::{GlobBuilder, GlobMatcher};

use crate::error::FsError;
use crate::seam::Workspace;

/// The most directory entries one search visits.
pub(crate) const MAX_WALK_ENTRIES: usize = 200_000;

/// A compiled glob filter.
pub(crate) struct PathGlob {
    matcher: GlobMatcher,
    whole_path: bool,
    absolute: bool,
}

impl PathGlob {
    pub(crate) fn new(pattern: &str) -> Result<PathGlob, FsError> {
        let trimmed = pattern.strip_prefix("./").unwrap_or(pattern);
        let glob = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .build()
            .map_err(|e| FsError::InvalidPattern {
                kind: "glob",
                pattern: Arc::from(pattern),
                reason: Arc::from(e.kind().to_string()),
            })?;
        Ok(PathGlob {
            matcher: glob.compile_matcher(),
            whole_path: trimmed.contains('/'),
            absolute: trimmed.starts_with('/'),
        })
    }

    /// Whether the file at `path` (found under `base`) matches.
    pub(crate) fn matches(&self, base: &Path, path: &Path) -> bool {
        if self.absolute {
            return self.matcher.is_match(path);
        }
        if self.whole_path {
            let rel = path.strip_prefix(base).unwrap_or(path);
            return self.matcher.is_match(rel);
        }
        path.file_name().is_some_and(|n| self.matcher.is_match(n))
    }
}

/// A file found by a walk.
pub(crate) struct Found {
    /// The path under the search directory, as listed.
    pub(crate) path: PathBuf,
    /// The file to open (the resolved target of a symlinked file).
    pub(crate) real: PathBuf,
    /// Its modification time.
    pub(crate) mtime: SystemTime,
}

/// How a walk ended.
pub(crate) enum WalkEnd {
    /// Every entry was visited.
    Complete,
    /// The entry bound was reached.
    Bounded,
}

/// Visits the files under `base` (or `base` itself when it is a file) that `filter` admits, until
/// `visit` returns `false`.
pub(crate) fn files(
    ws: &Workspace,
    base: &Path,
    filter: Option<&PathGlob>,
    signal: &Signal,
    mut visit: impl FnMut(Found) -> bool,
) -> Result<WalkEnd, FsError> {
    let mut walker = ignore::WalkBuilder::new(base);
    walker.follow_links(false);
    let mut visited = 0usize;
    for entry in walker.build() {
        if signal.is_aborted() {
            return Err(FsError::Aborted);
        }
        visited += 1;
        if visited > MAX_WALK_ENTRIES {
            return Ok(WalkEnd::Bounded);
        }
        let Ok(entry) = entry else { continue };
        let Some(ft) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        let (real, meta) = if ft.is_symlink() {
            let Ok(real) = ws.resolve_blocking(Path::new("/"), path) else {
                continue;
            };
            match std::fs::metadata(&real) {
                Ok(m) if m.is_file() => (real, m),
                _ => continue,
            }
        } else if ft.is_file() {
            match entry.metadata() {
                Ok(m) => (path.to_path_buf(), m),
                Err(_) => continue,
            }
        } else {
            continue;
        };
        if let Some(f) = filter
            && entry.depth() > 0
            && !f.matches(base, path)
        {
            continue;
        }
        let found = Found {
            path: path.to_path_buf(),
            real,
            mtime: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        };
        if !visit(found) {
            break;
        }
    }
    Ok(WalkEnd::Complete)
}
