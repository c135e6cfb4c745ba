//! The fs seam: a [`Workspace`] of confined roots with versioned reads, atomic writes and
//! compare-and-set mutations. All blocking I/O runs on `spawn_blocking`; every compare-and-set on
//! one path is serialized by a per-path async mutex, so its check and its write are one step.
//!
//! Every operation re-resolves its path inside the roots at the moment it runs, so a component
//! swapped for a symlink after an earlier check is refused too. Writes by other processes are not
//! serialized with ours: between our version check and our rename there is a window of a few
//! system calls in which an outside writer's change can be lost.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_core::Signal;
use parking_lot::RwLock;

use crate::atomic::{self, FaultHook, Keep};
use crate::confine::Roots;
use crate::error::FsError;
use crate::locks::PathLocks;
use crate::text;
use crate::version::FileVersion;

mod stream;
pub use stream::LinePage;

/// The largest file read into memory (by `read`, `edit` and guarded writes): 64 MiB.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The condition a write is applied under (the answer to `fs/write-intent`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteCondition {
    /// Write only if no file exists at the path.
    CreateIfAbsent,
    /// Write only if the file exists with exactly this version.
    ReplaceIfVersion(FileVersion),
    /// Write whatever is there (the default when no policy answers).
    Unconditional,
}

/// The condition an edit is applied under (the answer to `fs/edit-intent`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EditCondition {
    /// Edit only if the file still has this version (the compare-and-set basis).
    IfVersion(FileVersion),
    /// Edit the file as it is now (it must exist).
    Unconditional,
}

/// A file read whole.
#[derive(Clone, Debug)]
pub struct FileContents {
    /// The resolved path.
    pub path: PathBuf,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The version of exactly these bytes.
    pub version: FileVersion,
}

/// What a write did.
#[derive(Clone, Debug)]
pub struct WriteOutcome {
    /// The resolved path.
    pub path: PathBuf,
    /// The previous content (lossy UTF-8), `None` when the file was created or was too large.
    pub before: Option<String>,
    /// Whether the file existed.
    pub existed: bool,
    /// The new version.
    pub version: FileVersion,
}

/// What an edit did.
#[derive(Clone, Debug)]
pub struct EditOutcome<T> {
    /// The resolved path.
    pub path: PathBuf,
    /// The text before.
    pub before: String,
    /// The text after.
    pub after: String,
    /// What the edit function returned beside the new text.
    pub extra: T,
    /// The new version.
    pub version: FileVersion,
}

/// How many operations a workspace served, by kind (for tests and metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Version lookups outside a compare-and-set: each `stat` and each `read` counts one.
    pub stats: u64,
    /// Compare-and-set mutations (`write_if`, `edit_if`).
    pub cas: u64,
}

struct Inner {
    roots: Roots,
    locks: PathLocks,
    stats: AtomicU64,
    cas: AtomicU64,
    fault: RwLock<Option<FaultHook>>,
}

/// A set of confined workspace roots and the operations on files inside them. Cloning gives
/// another handle to the same workspace (same locks, same counters).
#[derive(Clone)]
pub struct Workspace {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("roots", &self.inner.roots.list())
            .finish_non_exhaustive()
    }
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, FsError> + Send + 'static,
) -> Result<T, FsError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(FsError::Io {
            op: "run",
            path: Arc::from(""),
            message: Arc::from(format!("filesystem task failed: {e}")),
        })
    })
}

/// Opens an existing regular file without following a final symlink and without blocking on a
/// FIFO; returns it with its `fstat` metadata.
fn open_regular(op: &'static str, path: &Path) -> Result<(File, std::fs::Metadata), FsError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                FsError::Stale {
                    op,
                    path: Arc::from(shown(path)),
                    detail: Arc::from(" (it was replaced by a symlink)"),
                }
            } else {
                FsError::io(op, &shown(path), &e)
            }
        })?;
    let meta = file
        .metadata()
        .map_err(|e| FsError::io(op, &shown(path), &e))?;
    if meta.is_dir() {
        return Err(FsError::NotAFile {
            op,
            path: Arc::from(shown(path)),
            what: Arc::from("it is a directory"),
        });
    }
    if !meta.is_file() {
        return Err(FsError::NotAFile {
            op,
            path: Arc::from(shown(path)),
            what: Arc::from("it is not a regular file"),
        });
    }
    Ok((file, meta))
}

/// Reads an open regular file whole (bounded by [`MAX_FILE_BYTES`]) and versions it.
fn read_versioned(
    op: &'static str,
    path: &Path,
    mut file: File,
    meta: &std::fs::Metadata,
) -> Result<(Vec<u8>, FileVersion), FsError> {
    if meta.len() > MAX_FILE_BYTES {
        return Err(FsError::TooLarge {
            op,
            path: Arc::from(shown(path)),
            size: meta.len(),
            limit: MAX_FILE_BYTES,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    (&mut file)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FsError::io(op, &shown(path), &e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(FsError::TooLarge {
            op,
            path: Arc::from(shown(path)),
            size: bytes.len() as u64,
            limit: MAX_FILE_BYTES,
        });
    }
    let version = FileVersion::of(meta, &bytes);
    Ok((bytes, version))
}

/// What is at a resolved path right now (without following a final symlink).
enum Present {
    Nothing,
    File,
}

fn probe(op: &'static str, path: &Path) -> Result<Present, FsError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Present::Nothing),
        Err(e) => Err(FsError::io(op, &shown(path), &e)),
        Ok(m) if m.is_dir() => Err(FsError::NotAFile {
            op,
            path: Arc::from(shown(path)),
            what: Arc::from("it is a directory"),
        }),
        Ok(m) if m.file_type().is_symlink() => Err(FsError::Stale {
            op,
            path: Arc::from(shown(path)),
            detail: Arc::from(" (it was replaced by a symlink)"),
        }),
        Ok(m) if !m.is_file() => Err(FsError::NotAFile {
            op,
            path: Arc::from(shown(path)),
            what: Arc::from("it is not a regular file"),
        }),
        Ok(_) => Ok(Present::File),
    }
}

impl Workspace {
    /// A workspace confined to `roots` (each an existing directory; canonicalized here, with
    /// blocking I/O: build it at start-up).
    pub fn new<P: AsRef<Path>>(roots: impl IntoIterator<Item = P>) -> Result<Workspace, FsError> {
        let roots = Roots::new(
            roots
                .into_iter()
                .map(|p| p.as_ref().to_path_buf())
                .collect(),
        )?;
        Ok(Workspace {
            inner: Arc::new(Inner {
                roots,
                locks: PathLocks::default(),
                stats: AtomicU64::new(0),
                cas: AtomicU64::new(0),
                fault: RwLock::new(None),
            }),
        })
    }

    /// The canonical roots.
    pub fn roots(&self) -> &[PathBuf] {
        self.inner.roots.list()
    }

    /// The first root: the working directory of a session that names none.
    pub fn default_cwd(&self) -> &Path {
        &self.inner.roots.list()[0]
    }

    /// Whether a canonical path lies inside one of the roots.
    pub fn contains(&self, path: &Path) -> bool {
        self.inner.roots.contains(path)
    }

    /// Operations served so far.
    pub fn op_counts(&self) -> OpCounts {
        OpCounts {
            stats: self.inner.stats.load(Ordering::Relaxed),
            cas: self.inner.cas.load(Ordering::Relaxed),
        }
    }

    /// Installs a hook consulted at each [`atomic::WriteStage`] of every write (tests only).
    #[doc(hidden)]
    pub fn set_fault_hook(&self, hook: Option<FaultHook>) {
        *self.inner.fault.write() = hook;
    }

    /// Resolves `raw` (relative to `cwd`, or absolute) to a canonical path inside the roots,
    /// refusing `..`, absolute paths elsewhere, escaping symlinks at any component and NUL bytes.
    pub async fn resolve(&self, cwd: &Path, raw: &str) -> Result<PathBuf, FsError> {
        let roots = self.inner.roots.clone();
        let cwd = cwd.to_path_buf();
        let raw = PathBuf::from(raw);
        blocking(move || roots.resolve(&cwd, &raw)).await
    }

    /// Resolution without spawning (for code already on a blocking thread).
    pub(crate) fn resolve_blocking(&self, cwd: &Path, raw: &Path) -> Result<PathBuf, FsError> {
        self.inner.roots.resolve(cwd, raw)
    }

    /// Resolves a path given to an operation (relative paths against the first root).
    async fn resolve_op(&self, path: &Path) -> Result<PathBuf, FsError> {
        let roots = self.inner.roots.clone();
        let path = path.to_path_buf();
        blocking(move || roots.resolve_here(&path)).await
    }

    /// The current version of the file at `path`, `None` if there is none.
    pub async fn stat(&self, path: &Path) -> Result<Option<FileVersion>, FsError> {
        self.inner.stats.fetch_add(1, Ordering::Relaxed);
        let roots = self.inner.roots.clone();
        let path = path.to_path_buf();
        blocking(move || {
            let path = roots.resolve_here(&path)?;
            match probe("stat", &path)? {
                Present::Nothing => Ok(None),
                Present::File => {
                    let (file, meta) = open_regular("stat", &path)?;
                    let (_, v) = read_versioned("stat", &path, file, &meta)?;
                    Ok(Some(v))
                }
            }
        })
        .await
    }

    /// Reads the file at `path` whole, with the version of exactly those bytes (one `fstat` of the
    /// open file). A missing file is [`FsError::NotFound`].
    pub async fn read(&self, path: &Path) -> Result<FileContents, FsError> {
        self.inner.stats.fetch_add(1, Ordering::Relaxed);
        let roots = self.inner.roots.clone();
        let path = path.to_path_buf();
        blocking(move || {
            let path = roots.resolve_here(&path)?;
            let (file, meta) = open_regular("read", &path)?;
            let (bytes, version) = read_versioned("read", &path, file, &meta)?;
            Ok(FileContents {
                path,
                bytes,
                version,
            })
        })
        .await
    }

    /// Writes `bytes` to `path` if `condition` holds, as one compare-and-set: the check and the
    /// atomic write run under the path's mutex. Missing parent directories (inside the roots)
    /// are created. Returns the new version.
    pub async fn write_if(
        &self,
        path: &Path,
        condition: WriteCondition,
        bytes: Vec<u8>,
    ) -> Result<WriteOutcome, FsError> {
        self.write_inner(path, condition, bytes, None).await
    }

    /// [`Workspace::write_if`], abandoned with [`FsError::Aborted`] if `signal` fires before the
    /// write starts (while it waits for the path's mutex); a started write is never cut short.
    pub async fn write_if_cancellable(
        &self,
        path: &Path,
        condition: WriteCondition,
        bytes: Vec<u8>,
        signal: &Signal,
    ) -> Result<WriteOutcome, FsError> {
        self.write_inner(path, condition, bytes, Some(signal)).await
    }

    /// Takes the path's mutex, or gives up when `signal` fires first.
    async fn lock_path(
        &self,
        path: &Path,
        signal: Option<&Signal>,
    ) -> Result<tokio::sync::OwnedMutexGuard<()>, FsError> {
        let lock = self.inner.locks.for_path(path);
        match signal {
            None => Ok(lock.lock_owned().await),
            Some(s) => tokio::select! {
                biased;
                _ = s.aborted() => Err(FsError::Aborted),
                held = lock.lock_owned() => Ok(held),
            },
        }
    }

    async fn write_inner(
        &self,
        path: &Path,
        condition: WriteCondition,
        bytes: Vec<u8>,
        signal: Option<&Signal>,
    ) -> Result<WriteOutcome, FsError> {
        self.inner.cas.fetch_add(1, Ordering::Relaxed);
        let resolved = self.resolve_op(path).await?;
        let _held = self.lock_path(&resolved, signal).await?;
        let roots = self.inner.roots.clone();
        let fault = self.inner.fault.read().clone();
        let given = path.to_path_buf();
        blocking(move || {
            let path = reconfine(&roots, "write", &given, &resolved)?;
            write_now(&path, condition, &bytes, fault.as_ref())
        })
        .await
    }

    /// Edits the text file at `path` if `condition` holds: reads it, checks the basis (before
    /// anything else, so a stale basis is reported even when the edit could not apply), runs
    /// `edit` on the text, and writes the result atomically, all under the path's mutex. A
    /// missing file is stale (an edit needs an existing file).
    pub async fn edit_if<T: Send + 'static>(
        &self,
        path: &Path,
        condition: EditCondition,
        edit: impl FnOnce(&str) -> Result<(String, T), FsError> + Send + 'static,
    ) -> Result<EditOutcome<T>, FsError> {
        self.edit_inner(path, condition, edit, None).await
    }

    /// [`Workspace::edit_if`], abandoned with [`FsError::Aborted`] if `signal` fires before the
    /// edit starts (while it waits for the path's mutex).
    pub async fn edit_if_cancellable<T: Send + 'static>(
        &self,
        path: &Path,
        condition: EditCondition,
        edit: impl FnOnce(&str) -> Result<(String, T), FsError> + Send + 'static,
        signal: &Signal,
    ) -> Result<EditOutcome<T>, FsError> {
        self.edit_inner(path, condition, edit, Some(signal)).await
    }

    async fn edit_inner<T: Send + 'static>(
        &self,
        path: &Path,
        condition: EditCondition,
        edit: impl FnOnce(&str) -> Result<(String, T), FsError> + Send + 'static,
        signal: Option<&Signal>,
    ) -> Result<EditOutcome<T>, FsError> {
        self.inner.cas.fetch_add(1, Ordering::Relaxed);
        let resolved = self.resolve_op(path).await?;
        let _held = self.lock_path(&resolved, signal).await?;
        let roots = self.inner.roots.clone();
        let fault = self.inner.fault.read().clone();
        let given = path.to_path_buf();
        blocking(move || {
            let path = reconfine(&roots, "edit", &given, &resolved)?;
            edit_now(&path, condition, edit, fault.as_ref())
        })
        .await
    }
}

/// Resolves `given` again under the path's mutex; if it no longer resolves to the path the
/// mutex was taken for (a component was swapped for a symlink meanwhile), the basis is stale.
fn reconfine(
    roots: &Roots,
    op: &'static str,
    given: &Path,
    locked: &Path,
) -> Result<PathBuf, FsError> {
    let now = roots.resolve_here(given)?;
    if now != locked {
        return Err(FsError::Stale {
            op,
            path: Arc::from(shown(locked)),
            detail: Arc::from(format!(" (it now resolves to \"{}\")", now.display())),
        });
    }
    Ok(now)
}

fn write_now(
    path: &Path,
    condition: WriteCondition,
    bytes: &[u8],
    fault: Option<&FaultHook>,
) -> Result<WriteOutcome, FsError> {
    const OP: &str = "write";
    let path = path.to_path_buf();
    let shown_path = shown(&path);
    let current = probe(OP, &path)?;
    let (existed, before, keep) = match (&current, condition) {
        (Present::File, WriteCondition::CreateIfAbsent) => {
            return Err(FsError::NotObserved {
                path: Arc::from(shown_path),
            });
        }
        (Present::Nothing, WriteCondition::ReplaceIfVersion(_)) => {
            return Err(FsError::Stale {
                op: OP,
                path: Arc::from(shown_path),
                detail: Arc::from(" (it no longer exists)"),
            });
        }
        (Present::Nothing, _) => (false, None, None),
        (Present::File, WriteCondition::ReplaceIfVersion(expected)) => {
            let (file, meta) = open_regular(OP, &path)?;
            let (old, now) = read_versioned(OP, &path, file, &meta)?;
            if now != expected {
                return Err(FsError::Stale {
                    op: OP,
                    path: Arc::from(shown_path),
                    detail: Arc::from(""),
                });
            }
            (
                true,
                Some(String::from_utf8_lossy(&old).into_owned()),
                Some(Keep::of(&meta)),
            )
        }
        (Present::File, _) => {
            let (file, meta) = open_regular(OP, &path)?;
            let before = read_versioned(OP, &path, file, &meta)
                .ok()
                .map(|(old, _)| String::from_utf8_lossy(&old).into_owned());
            (true, before, Some(Keep::of(&meta)))
        }
    };
    if !existed && let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| FsError::io(OP, &shown(parent), &e))?;
    }
    let version = atomic::replace(&path, bytes, keep.as_ref(), fault)
        .map_err(|e| FsError::io(OP, &shown(&path), &e))?;
    Ok(WriteOutcome {
        path,
        before,
        existed,
        version,
    })
}

fn edit_now<T>(
    path: &Path,
    condition: EditCondition,
    edit: impl FnOnce(&str) -> Result<(String, T), FsError>,
    fault: Option<&FaultHook>,
) -> Result<EditOutcome<T>, FsError> {
    const OP: &str = "edit";
    let path = path.to_path_buf();
    let shown_path = shown(&path);
    if let Present::Nothing = probe(OP, &path)? {
        return Err(FsError::Stale {
            op: OP,
            path: Arc::from(shown_path),
            detail: Arc::from(" (it no longer exists)"),
        });
    }
    let (file, meta) = open_regular(OP, &path)?;
    let (old, now) = read_versioned(OP, &path, file, &meta)?;
    if let EditCondition::IfVersion(expected) = condition
        && now != expected
    {
        return Err(FsError::Stale {
            op: OP,
            path: Arc::from(shown_path),
            detail: Arc::from(""),
        });
    }
    let before = text::decode(&old).map_err(|why| FsError::NotText {
        op: OP,
        path: Arc::from(shown_path.as_str()),
        why: Arc::from(why.0),
    })?;
    let (after, extra) = edit(before)?;
    let version = atomic::replace(&path, after.as_bytes(), Some(&Keep::of(&meta)), fault)
        .map_err(|e| FsError::io(OP, &shown_path, &e))?;
    Ok(EditOutcome {
        path,
        before: before.to_owned(),
        after,
        extra,
        version,
    })
}
