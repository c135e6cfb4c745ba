//! Atomic replacement of a file: a temp file in the same directory, written, fsynced, given the
//! old file's permissions (and owner, where allowed), renamed over the target, and the directory
//! fsynced. A failure at any point before the rename removes the temp file and leaves the old file
//! whole; a process killed mid-write leaves at most a stray `.<name>.*.dsh-tmp` beside it.

use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use crate::version::{FileVersion, content_hash};

/// Where a write is when a fault hook is consulted (for crash and failure tests).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteStage {
    /// Half the bytes are in the temp file.
    PartlyWritten,
    /// Every byte is written and synced; the rename has not happened.
    BeforeRename,
}

/// A hook that may fail (or end the process) at a [`WriteStage`].
#[doc(hidden)]
pub type FaultHook = Arc<dyn Fn(WriteStage) -> io::Result<()> + Send + Sync>;

/// What is kept from the file being replaced.
pub(crate) struct Keep {
    pub(crate) mode: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

impl Keep {
    pub(crate) fn of(meta: &std::fs::Metadata) -> Keep {
        Keep {
            mode: meta.mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
        }
    }
}

/// Atomically replaces (or creates) `target` with `bytes`; returns the new file's version.
pub(crate) fn replace(
    target: &Path,
    bytes: &[u8],
    keep: Option<&Keep>,
    fault: Option<&FaultHook>,
) -> io::Result<FileVersion> {
    let dir = target
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path has no parent"))?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{name}.");
    let mut tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".dsh-tmp")
        .permissions(Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    if let Some(k) = keep {
        tmp.as_file()
            .set_permissions(Permissions::from_mode(k.mode))?;
        let meta = tmp.as_file().metadata()?;
        if meta.uid() != k.uid || meta.gid() != k.gid {
            // Best effort: only a privileged process may give a file away.
            let _ = std::os::unix::fs::fchown(tmp.as_file(), Some(k.uid), Some(k.gid));
            tmp.as_file()
                .set_permissions(Permissions::from_mode(k.mode))?;
        }
    }
    let half = bytes.len() / 2;
    tmp.write_all(&bytes[..half])?;
    if let Some(f) = fault {
        f(WriteStage::PartlyWritten)?;
    }
    tmp.write_all(&bytes[half..])?;
    tmp.as_file().sync_all()?;
    if let Some(f) = fault {
        f(WriteStage::BeforeRename)?;
    }
    let file: File = tmp.persist(target).map_err(|e| e.error)?;
    let meta = file.metadata()?;
    let version = FileVersion::with_hash(&meta, content_hash(bytes));
    File::open(dir)?.sync_all()?;
    Ok(version)
}
