//! The Landlock ruleset of a contained mode: read and execute everywhere; full access beneath the
//! writable directories; read and write on `/dev/null`; every TCP bind and connect refused (ABI 4+);
//! signals to processes outside the sandbox and connections to abstract Unix sockets created
//! outside it refused (ABI 6+); connections to Unix socket files outside the writable
//! directories refused (ABI 9+, `LANDLOCK_ACCESS_FS_RESOLVE_UNIX`; on older kernels the seccomp
//! filter refuses Unix sockets instead, see `net_filter.rs`).
//!
//! Guarantees: Landlock's first ABI (the filesystem rights) is a hard requirement — a kernel that
//! cannot enforce it makes [`restrict`] fail, never run uncontained. Newer rights are best effort
//! and reported in [`LandlockReport`].

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

/// The newest ABI whose rights we ask for.
const TARGET_ABI: ABI = ABI::V6;

/// The ABI that scopes connections to Unix socket files (`ResolveUnix`).
const RESOLVE_UNIX_ABI: ABI = ABI::V9;

/// What the kernel enforced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LandlockReport {
    /// The kernel's Landlock ABI (as far as the crate knows it).
    pub abi: String,
    /// Whether every requested right is enforced (`false`: an older kernel enforced a subset).
    pub fully_enforced: bool,
    /// Whether connections to Unix socket files are confined to the writable directories (the
    /// kernel has Landlock ABI 9); when not, Unix sockets must be refused another way.
    pub confines_unix_sockets: bool,
}

/// Why the ruleset could not be enforced.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LandlockUnavailable(pub String);

/// Restricts the calling thread (and what it executes) to `writable` for writes.
pub fn restrict(writable: &[PathBuf]) -> Result<LandlockReport, LandlockUnavailable> {
    let fail = |what: &str, e: &dyn std::fmt::Display| LandlockUnavailable(format!("{what}: {e}"));
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .map_err(|e| fail("Landlock is not supported by this kernel", &e))?
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(RESOLVE_UNIX_ABI))
        .and_then(|r| r.handle_access(AccessNet::from_all(TARGET_ABI)))
        .and_then(|r| r.scope(Scope::Signal))
        .and_then(|r| r.scope(Scope::AbstractUnixSocket))
        .map_err(|e| fail("Landlock ruleset", &e))?;
    let mut created = ruleset
        .create()
        .map_err(|e| fail("Landlock is not supported by this kernel", &e))?;
    created = created
        .add_rule(PathBeneath::new(
            open(Path::new("/"))?,
            AccessFs::from_read(TARGET_ABI),
        ))
        .map_err(|e| fail("Landlock rule for /", &e))?;
    created = created
        .add_rule(PathBeneath::new(
            open(Path::new("/dev/null"))?,
            AccessFs::from_file(TARGET_ABI) & !AccessFs::Execute,
        ))
        .map_err(|e| fail("Landlock rule for /dev/null", &e))?;
    for dir in writable {
        created = created
            .add_rule(PathBeneath::new(
                open(dir)?,
                AccessFs::from_all(RESOLVE_UNIX_ABI),
            ))
            .map_err(|e| fail(&format!("Landlock rule for {}", dir.display()), &e))?;
    }
    let status = created
        .restrict_self()
        .map_err(|e| fail("Landlock restrict_self", &e))?;
    let (abi, confines_unix_sockets) = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => {
            (effective_abi.to_string(), effective_abi >= RESOLVE_UNIX_ABI)
        }
        LandlockStatus::NotEnabled => ("not enabled".to_owned(), false),
        LandlockStatus::NotImplemented => ("not implemented".to_owned(), false),
    };
    match status.ruleset {
        RulesetStatus::NotEnforced => Err(LandlockUnavailable(format!(
            "Landlock is not enforced by this kernel (ABI {abi})"
        ))),
        RulesetStatus::FullyEnforced => Ok(LandlockReport {
            abi,
            fully_enforced: true,
            confines_unix_sockets,
        }),
        RulesetStatus::PartiallyEnforced => Ok(LandlockReport {
            abi,
            fully_enforced: false,
            confines_unix_sockets,
        }),
    }
}

fn open(path: &Path) -> Result<PathFd, LandlockUnavailable> {
    PathFd::new(path)
        .map_err(|e| LandlockUnavailable(format!("cannot open {}: {e}", path.display())))
}
