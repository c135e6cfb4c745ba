//! The durable JSON Lines store (spec L1, L3, I4): opening a log file for writing, with an
//! advisory lock, crash repair and resume.
//!
//! Guarantees: one writer per file (a second open, in this or another process, fails with
//! [`SessionError::Locked`]); a log with a bad line before its tail, an unknown header version,
//! or (in strict mode) pairing problems is refused without being changed; a new file gets its
//! header synced (file and directory) before the session is returned.

use std::fs::{File, TryLockError};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::SessionError;
use crate::header::Header;
use crate::invariant::InvariantChecker;
use crate::repair::{self, RepairReport};
use crate::session::{Resume, Session};
use crate::writer::FileSink;

/// How to open a log file.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    id: Option<String>,
    cwd: Option<String>,
    create: bool,
    strict: bool,
    invariants: bool,
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions {
            id: None,
            cwd: None,
            create: true,
            strict: true,
            invariants: false,
        }
    }
}

impl OpenOptions {
    /// Defaults: create the file if missing, strict, no invariant checks.
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }

    /// The session id for a NEW log (an existing log keeps its header's id). Default: fresh.
    pub fn id(mut self, id: impl Into<String>) -> OpenOptions {
        self.id = Some(id.into());
        self
    }

    /// The `cwd` for a NEW log's header. Default: the current directory.
    pub fn cwd(mut self, cwd: impl Into<String>) -> OpenOptions {
        self.cwd = Some(cwd.into());
        self
    }

    /// Whether a missing file is created (default true).
    pub fn create(mut self, create: bool) -> OpenOptions {
        self.create = create;
        self
    }

    /// Whether a log with pairing problems (spec L4) is refused (default true). Bad lines and
    /// unknown versions are always refused.
    pub fn strict(mut self, strict: bool) -> OpenOptions {
        self.strict = strict;
        self
    }

    /// Whether the append-time invariant checks are on (default false).
    pub fn invariants(mut self, on: bool) -> OpenOptions {
        self.invariants = on;
        self
    }

    /// Whether a log with pairing problems is refused.
    pub fn is_strict(&self) -> bool {
        self.strict
    }

    /// Whether the append-time invariant checks are on.
    pub fn has_invariants(&self) -> bool {
        self.invariants
    }
}

/// Takes the advisory write lock on an open log file.
pub(crate) fn lock(file: &File, path: &Path) -> Result<(), SessionError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(SessionError::Locked {
            path: path.to_path_buf(),
        }),
        Err(TryLockError::Error(e)) => Err(SessionError::io("lock", path, e)),
    }
}

fn sync_parent(path: &Path) -> Result<(), SessionError> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(parent)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| SessionError::io("sync the directory of", path, e))
}

impl Session {
    /// Opens a log file for writing: creates it with its header, or reads it, repairs a crash
    /// (spec I4) and resumes after its last event. Returns what repair did.
    pub async fn open_jsonl(
        path: &Path,
        options: OpenOptions,
    ) -> Result<(Session, RepairReport), SessionError> {
        let owned = path.to_path_buf();
        tokio::task::spawn_blocking(move || Session::open_jsonl_blocking(&owned, options))
            .await
            .map_err(|e| SessionError::io("open", path, std::io::Error::other(e.to_string())))?
    }

    /// [`Session::open_jsonl`] for callers outside an async runtime (blocking I/O).
    pub fn open_jsonl_blocking(
        path: &Path,
        options: OpenOptions,
    ) -> Result<(Session, RepairReport), SessionError> {
        let existed = path.exists();
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(options.create)
            .truncate(false)
            .open(path)
            .map_err(|e| SessionError::io("open", path, e))?;
        lock(&file, path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| SessionError::io("read", path, e))?;
        let plan = repair::plan(&bytes)?;
        drop(bytes);
        if options.strict && !plan.problems.is_empty() {
            return Err(SessionError::Invalid {
                problems: plan.problems,
            });
        }
        let invariants = if options.invariants {
            Some(InvariantChecker::seeded(
                plan.events.iter().map(|(_, e)| e),
            )?)
        } else {
            None
        };
        let new_header = match &plan.header {
            Some(_) => None,
            None => {
                let id = options
                    .id
                    .clone()
                    .unwrap_or_else(|| dsh_core::context::fresh_message_id().to_string());
                let cwd = options.cwd.clone().unwrap_or_else(|| {
                    std::env::current_dir()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                });
                Some(Header::new(&id, &cwd))
            }
        };
        repair::apply(&mut file, path, &plan, new_header.as_ref())?;
        if !existed {
            sync_parent(path)?;
        }
        let durable_len = file
            .metadata()
            .map_err(|e| SessionError::io("read", path, e))?
            .len();
        let Some(header) = new_header.or(plan.header) else {
            return Err(SessionError::Corrupt {
                line: 1,
                message: "the log has no header".to_owned(),
            });
        };
        let resume = Resume {
            header,
            path: Some(PathBuf::from(path)),
            events: plan.events,
            next_seq: plan.next_seq,
            framing: plan.framing,
            invariants,
        };
        let session = Session::resume(resume, Box::new(FileSink { file }), durable_len, None)?;
        Ok((session, plan.report))
    }
}
