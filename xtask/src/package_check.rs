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
