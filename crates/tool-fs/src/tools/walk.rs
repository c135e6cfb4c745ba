//! Confined directory walking for `glob` and `grep`: ripgrep's `ignore` walker (hidden files and
//! `.gitignore`d paths skipped, links not followed), glob filters with gitignore-like semantics
//! (a pattern without `/` matches a file name at any depth; one with `/` matches the path relative
//! to the search directory), symlinked files kept only when they resolve inside the roots, and a
//! cancellation check at every entry.
//!
//! Two departures from ripgrep, both so that nothing is skipped silently: a pattern that names a
//! dot-folder or dot-file (`.github/**/*.yml`, `**/.env`) walks hidden entries (ripgrep would
//! need `--hidden`; `.git` itself stays out), and a walk that completes counts what the ignore
//! files (`.gitignore` in a git repository, `.ignore`, `.rgignore`) kept out, so the tool can say
//! so. A missing search path is `FS_NOT_FOUND`, as ripgrep's `No such file or directory`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
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
    names_hidden: bool,
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
            names_hidden: names_hidden(trimmed),
        })
    }

    /// Whether the pattern names a hidden component (`.github/...`, `**/.env`), so the walk must
    /// look at hidden entries for it to match at all.
    pub(crate) fn names_hidden(&self) -> bool {
        self.names_hidden
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

/// Whether a glob names a component that starts with a dot (not `.` or `..`).
pub(crate) fn names_hidden(pattern: &str) -> bool {
    pattern
        .split('/')
        .any(|c| c.starts_with('.') && c != "." && c != "..")
}

/// What the ignore files kept out of a completed walk.
#[derive(Default)]
pub(crate) struct Ignored {
    /// Files the filter admits that an ignore rule excluded.
    pub(crate) files: usize,
    /// Directories an ignore rule excluded (not searched at all).
    pub(crate) dirs: usize,
    /// A few of them, relative to the search directory.
    pub(crate) examples: Vec<String>,
}

impl Ignored {
    /// How many entries were kept out.
    pub(crate) fn total(&self) -> usize {
        self.files + self.dirs
    }

    /// The note a tool appends (empty when nothing was ignored).
    pub(crate) fn note(&self) -> String {
        if self.total() == 0 {
            return String::new();
        }
        let mut parts = Vec::new();
        if self.dirs > 0 {
            parts.push(format!(
                "{} director{}",
                self.dirs,
                if self.dirs == 1 { "y" } else { "ies" }
            ));
        }
        if self.files > 0 {
            parts.push(format!(
                "{} matching file{}",
                self.files,
                if self.files == 1 { "" } else { "s" }
            ));
        }
        format!(
            "\n\n(Skipped {} ignored by .gitignore or .ignore ({}{}); pass one as `path` to search it.)",
            parts.join(" and "),
            self.examples.join(", "),
            if self.total() > self.examples.len() {
                ", …"
            } else {
                ""
            }
        )
    }

    fn add(&mut self, rel: &Path, dir: bool) {
        if dir {
            self.dirs += 1;
        } else {
            self.files += 1;
        }
        if self.examples.len() < 3 {
            let mut shown = rel.to_string_lossy().into_owned();
            if dir {
                shown.push('/');
            }
            self.examples.push(shown);
        }
    }
}

/// How a walk ended and what it skipped.
pub(crate) struct WalkReport {
    /// How it ended.
    pub(crate) end: WalkEnd,
    /// What the ignore files kept out (counted only when the walk visited everything).
    pub(crate) ignored: Ignored,
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

/// Fails with `FS_NOT_FOUND` when `base` does not exist (ripgrep: "No such file or directory").
pub(crate) fn must_exist(op: &'static str, base: &Path) -> Result<std::fs::Metadata, FsError> {
    std::fs::metadata(base).map_err(|e| FsError::io(op, &base.to_string_lossy(), &e))
}

/// The `.git` directory stays out of walks that include hidden entries.
fn not_git_dir(e: &ignore::DirEntry) -> bool {
    e.depth() == 0 || e.file_name() != ".git"
}

/// Visits the files under `base` (or `base` itself when it is a file) that `filter` admits, until
/// `visit` returns `false`. `base` must exist (`FS_NOT_FOUND` otherwise).
pub(crate) fn files(
    op: &'static str,
    ws: &Workspace,
    base: &Path,
    filter: Option<&PathGlob>,
    signal: &Signal,
    mut visit: impl FnMut(Found) -> bool,
) -> Result<WalkReport, FsError> {
    must_exist(op, base)?;
    let hidden = !filter.is_some_and(PathGlob::names_hidden);
    let mut walker = ignore::WalkBuilder::new(base);
    walker.follow_links(false).hidden(hidden);
    if !hidden {
        walker.filter_entry(not_git_dir);
    }
    let mut visited = 0usize;
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut seen_dirs: HashSet<PathBuf> = HashSet::new();
    let mut stopped = false;
    for entry in walker.build() {
        if signal.is_aborted() {
            return Err(FsError::Aborted);
        }
        visited += 1;
        if visited > MAX_WALK_ENTRIES {
            return Ok(WalkReport {
                end: WalkEnd::Bounded,
                ignored: Ignored::default(),
            });
        }
        let Ok(entry) = entry else { continue };
        if entry.file_type().is_some_and(|t| t.is_dir()) {
            seen_dirs.insert(entry.path().to_path_buf());
        } else {
            seen.insert(entry.path().to_path_buf());
        }
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
            stopped = true;
            break;
        }
    }
    let ignored = if stopped {
        Ignored::default()
    } else {
        ignored_by_rules(base, filter, hidden, &seen, seen_dirs, signal)?
    };
    Ok(WalkReport {
        end: WalkEnd::Complete,
        ignored,
    })
}

/// Walks `base` again with the ignore files switched off, counting (without descending into)
/// every directory and every admitted file the first walk did not see: what the rules kept out.
fn ignored_by_rules(
    base: &Path,
    filter: Option<&PathGlob>,
    hidden: bool,
    seen: &HashSet<PathBuf>,
    seen_dirs: HashSet<PathBuf>,
    signal: &Signal,
) -> Result<Ignored, FsError> {
    let out_dirs: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
    let seen_dirs = Arc::new(seen_dirs);
    let mut walker = ignore::WalkBuilder::new(base);
    walker
        .standard_filters(false)
        .hidden(hidden)
        .follow_links(false);
    {
        let out_dirs = out_dirs.clone();
        let seen_dirs = seen_dirs.clone();
        walker.filter_entry(move |e| {
            if !not_git_dir(e) {
                return false;
            }
            let is_dir = e.file_type().is_some_and(|t| t.is_dir());
            if e.depth() == 0 || !is_dir || seen_dirs.contains(e.path()) {
                return true;
            }
            if let Ok(mut dirs) = out_dirs.lock() {
                dirs.push(e.path().to_path_buf());
            }
            false
        });
    }
    let mut files = Vec::new();
    let mut visited = 0usize;
    for entry in walker.build() {
        if signal.is_aborted() {
            return Err(FsError::Aborted);
        }
        visited += 1;
        if visited > MAX_WALK_ENTRIES {
            break;
        }
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        if entry.depth() == 0 || is_dir || seen.contains(path) {
            continue;
        }
        if filter.is_some_and(|f| !f.matches(base, path)) {
            continue;
        }
        files.push(path.to_path_buf());
    }
    let mut ignored = Ignored::default();
    let dirs = out_dirs.lock().map(|d| d.clone()).unwrap_or_default();
    for d in dirs {
        ignored.add(d.strip_prefix(base).unwrap_or(&d), true);
    }
    for f in files {
        ignored.add(f.strip_prefix(base).unwrap_or(&f), false);
    }
    Ok(ignored)
}
