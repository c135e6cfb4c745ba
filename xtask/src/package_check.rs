//! `cargo xtask package-check`: `cargo package` for every published crate, in dependency order,
//! without uploading anything.
//!
//! `cargo package --workspace` packages the members together: a member's path dependencies on
//! other members not yet on crates.io resolve against the packages being made (cargo's
//! temporary local registry), so each `.crate` is built and verified (compiled from the packaged
//! sources alone) offline, with only the registry's index and cache for external crates.

use std::path::Path;

use anyhow::Result;

/// Workspace members that are never published.
const UNPUBLISHED: &[&str] = &["xtask"];

pub fn cli(root: &Path) -> Result<()> {
    forget_earlier_packages(root)?;
    let root = root.display().to_string();
    let mut args = vec!["package", "--workspace", "--allow-dirty", "--manifest-path"];
    let manifest = format!("{root}/Cargo.toml");
    args.push(&manifest);
    for krate in UNPUBLISHED {
        args.push("--exclude");
        args.push(krate);
    }
    crate::run("cargo", &args)
}

/// Removes what earlier runs left of the packages. Cargo unpacks a registry crate once per name
/// and version (`$CARGO_HOME/registry/src/-<hash>/dsh-*`), and a packaged file's time is fixed
/// (1980s), so an artifact built from an earlier package always looks fresh: without this a
/// second run would verify against the first run's sources. The fingerprints of our crates go
/// (those of the workspace build too: they cannot be told apart by name; the next build redoes
/// them), those of external crates stay.
fn forget_earlier_packages(root: &Path) -> Result<()> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    if let Ok(fingerprints) = std::fs::read_dir(target.join("debug/.fingerprint")) {
        for dir in fingerprints.flatten() {
            if dir.file_name().to_string_lossy().starts_with("dsh") {
                std::fs::remove_dir_all(dir.path())?;
            }
        }
    }
    let home = match std::env::var_os("CARGO_HOME") {
        Some(h) => std::path::PathBuf::from(h),
        None => match std::env::var_os("HOME") {
            Some(h) => Path::new(&h).join(".cargo"),
            None => return Ok(()),
        },
    };
    let Ok(sources) = std::fs::read_dir(home.join("registry/src")) else {
        return Ok(());
    };
    for source in sources.flatten() {
        // The temporary registry's directory is named for its path's hash, with no host.
        if !source.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        for unpacked in std::fs::read_dir(source.path())?.flatten() {
            if unpacked.file_name().to_string_lossy().starts_with("dsh") {
                std::fs::remove_dir_all(unpacked.path())?;
            }
        }
    }
    Ok(())
}
