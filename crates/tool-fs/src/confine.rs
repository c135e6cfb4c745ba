//! Workspace confinement: a path resolves component by component, following each symlink by
//! hand, and is refused as soon as it steps anywhere that is neither inside a root nor on the way
//! down to one (a symlink leading back in excepted). Nothing outside the roots is ever opened.
//!
//! Guarantees: `..`, absolute paths elsewhere, symlinks at any component that lead out (including
//! dangling ones and `/proc/self/...` links), NUL bytes and symlink loops are all refused with an
//! error naming the path and the roots. For a path that does not exist yet, the existing prefix is
//! resolved and checked and the missing rest is appended lexically (it holds no symlinks).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::error::FsError;

/// How many symlinks one resolution may follow (Linux's own limit).
const MAX_SYMLINKS: usize = 40;

/// The canonical workspace roots.
#[derive(Clone, Debug)]
pub(crate) struct Roots {
    roots: Arc<[PathBuf]>,
    listed: Arc<str>,
}

impl Roots {
    /// Canonicalizes each root; each must be an existing directory.
    pub(crate) fn new(roots: Vec<PathBuf>) -> Result<Roots, FsError> {
        if roots.is_empty() {
            return Err(FsError::NoRoots);
        }
        let mut out = Vec::with_capacity(roots.len());
        for r in roots {
            let root = || Arc::from(r.display().to_string());
            let c = std::fs::canonicalize(&r).map_err(|e| FsError::RootUnreadable {
                root: root(),
                message: Arc::from(e.to_string()),
            })?;
            if !c.is_dir() {
                return Err(FsError::RootNotADirectory { root: root() });
            }
            out.push(c);
        }
        let listed = out
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Ok(Roots {
            roots: Arc::from(out),
            listed: Arc::from(listed),
        })
    }

    pub(crate) fn list(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Whether `p` (absolute, normalized) is a root or inside one.
    pub(crate) fn contains(&self, p: &Path) -> bool {
        self.roots.iter().any(|r| p.starts_with(r))
    }

    /// Whether `p` is inside a root or a strict ancestor of one (on the way down to a root).
    fn admits(&self, p: &Path) -> bool {
        self.roots
            .iter()
            .any(|r| p.starts_with(r) || r.starts_with(p))
    }

    fn outside(&self, raw: &str, reason: String) -> FsError {
        FsError::Outside {
            path: Arc::from(raw),
            roots: self.listed.clone(),
            reason: Arc::from(reason),
        }
    }

    /// Resolves `raw` (relative to `cwd`, or absolute) to a canonical path inside the roots.
    pub(crate) fn resolve(&self, cwd: &Path, raw: &Path) -> Result<PathBuf, FsError> {
        let shown = raw.to_string_lossy();
        if raw.as_os_str().is_empty() {
            return Err(FsError::InvalidPath {
                path: Arc::from(""),
                reason: Arc::from("the path is empty"),
            });
        }
        if raw.as_os_str().as_bytes().contains(&0) {
            return Err(FsError::InvalidPath {
                path: Arc::from(shown.replace('\0', "\\0")),
                reason: Arc::from("the path contains a NUL byte"),
            });
        }
        let joined = if raw.is_absolute() {
            raw.to_path_buf()
        } else if cwd.is_absolute() {
            cwd.join(raw)
        } else {
            self.roots[0].join(cwd).join(raw)
        };
        self.walk(&shown, &joined)
    }

    /// Resolves a path given to an operation: absolute, or relative to the first root.
    pub(crate) fn resolve_here(&self, raw: &Path) -> Result<PathBuf, FsError> {
        self.resolve(&self.roots[0], raw)
    }

    fn walk(&self, raw: &str, joined: &Path) -> Result<PathBuf, FsError> {
        let mut queue: VecDeque<OsString> = VecDeque::new();
        let mut resolved = PathBuf::from("/");
        push_front(&mut queue, joined);
        let mut follows = 0usize;
        let mut missing = false;
        while let Some(part) = queue.pop_front() {
            match part.to_str() {
                Some("/") => {
                    resolved = PathBuf::from("/");
                    continue;
                }
                Some(".") => continue,
                Some("..") => {
                    resolved.pop();
                    if !self.admits(&resolved) {
                        return Err(self
                            .outside(raw, format!("\"..\" leads to \"{}\"", resolved.display())));
                    }
                    continue;
                }
                _ => {}
            }
            let candidate = resolved.join(&part);
            // A step that is neither inside a root nor on the way down to one is refused, unless
            // it is a symlink leading back in (a host's `/tmp` -> `/private/tmp`): such a step is
            // only examined, never opened, and is refused alike if it leads anywhere else.
            let admitted = self.admits(&candidate);
            let deny = || self.outside(raw, format!("it leads to \"{}\"", candidate.display()));
            if missing {
                if !admitted {
                    return Err(deny());
                }
                resolved = candidate;
                continue;
            }
            match std::fs::symlink_metadata(&candidate) {
                Ok(m) if m.file_type().is_symlink() => {
                    follows += 1;
                    if follows > MAX_SYMLINKS {
                        return Err(FsError::InvalidPath {
                            path: Arc::from(raw),
                            reason: Arc::from("too many levels of symbolic links"),
                        });
                    }
                    let target = std::fs::read_link(&candidate).map_err(|e| {
                        if admitted {
                            FsError::io("resolve", raw, &e)
                        } else {
                            deny()
                        }
                    })?;
                    let dest = if target.is_absolute() {
                        target.clone()
                    } else {
                        resolved.join(&target)
                    };
                    if !self.admits(&lexical(&dest)) {
                        if !admitted {
                            return Err(deny());
                        }
                        return Err(self.outside(
                            raw,
                            format!(
                                "\"{}\" is a symlink to \"{}\"",
                                candidate.display(),
                                target.display()
                            ),
                        ));
                    }
                    push_front(&mut queue, &target);
                    if target.is_absolute() {
                        resolved = PathBuf::from("/");
                    }
                }
                _ if !admitted => return Err(deny()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    missing = true;
                    resolved = candidate;
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                    return Err(FsError::NotAFile {
                        op: "resolve",
                        path: Arc::from(raw),
                        what: Arc::from(format!("\"{}\" is not a directory", resolved.display())),
                    });
                }
                Err(e) => return Err(FsError::io("resolve", raw, &e)),
                Ok(_) => resolved = candidate,
            }
        }
        if !self.contains(&resolved) {
            return Err(self.outside(raw, format!("it resolves to \"{}\"", resolved.display())));
        }
        Ok(resolved)
    }
}

/// Puts the components of `p` in front of the queue, in order.
fn push_front(queue: &mut VecDeque<OsString>, p: &Path) {
    let parts: Vec<OsString> = p
        .components()
        .map(|c| match c {
            Component::RootDir | Component::Prefix(_) => OsString::from("/"),
            Component::CurDir => OsString::from("."),
            Component::ParentDir => OsString::from(".."),
            Component::Normal(n) => n.to_os_string(),
        })
        .collect();
    for part in parts.into_iter().rev() {
        queue.push_front(part);
    }
}

/// Lexical normalization (`.` dropped, `..` pops): only used to reject a symlink early when its
/// target is plainly elsewhere; the walk itself never trusts it.
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => out = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}
