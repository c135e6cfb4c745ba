//! Privileges of a contained command: `no_new_privs` (nothing it executes can gain rights), every
//! capability dropped (a root caller keeps its uid but loses the rights that would let it load
//! modules, bypass file permissions or signal anyone), and an optional file-size limit.

use rustix::process::{Resource, Rlimit, setrlimit};
use rustix::thread::{CapabilitySet, CapabilitySets};

/// A privilege step failed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PrivilegeError(pub String);

/// Sets `no_new_privs` on the calling thread.
pub fn no_new_privs() -> Result<(), PrivilegeError> {
    rustix::thread::set_no_new_privs(true).map_err(|e| PrivilegeError(format!("no_new_privs: {e}")))
}

/// Drops every capability: ambient, bounding (when permitted) and effective/permitted/inheritable.
/// With `no_new_privs` set, an `execve` cannot give them back, even to uid 0.
pub fn drop_capabilities() -> Result<(), PrivilegeError> {
    // The ambient set may be unsupported on old kernels; the bounding set needs CAP_SETPCAP,
    // which an unprivileged caller never had. Both are best effort; the sets below are not.
    let _ = rustix::thread::clear_ambient_capability_set();
    if rustix::thread::capabilities(None)
        .map(|c| c.effective.contains(CapabilitySet::SETPCAP))
        .unwrap_or(false)
    {
        for cap in CapabilitySet::all().iter() {
            let _ = rustix::thread::remove_capability_from_bounding_set(cap);
        }
    }
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(|e| PrivilegeError(format!("dropping capabilities: {e}")))
}

/// Caps the size of any file the command writes (`RLIMIT_FSIZE`; a larger write gets `SIGXFSZ`).
pub fn limit_file_size(bytes: u64) -> Result<(), PrivilegeError> {
    setrlimit(
        Resource::Fsize,
        Rlimit {
            current: Some(bytes),
            maximum: Some(bytes),
        },
    )
    .map_err(|e| PrivilegeError(format!("RLIMIT_FSIZE: {e}")))
}
