//! The seccomp filter of a contained mode: sockets of any family but `AF_UNIX` are refused
//! (`EPERM`), and `AF_UNIX` sockets too (`socket`, not `socketpair`) when Landlock cannot confine
//! which socket files a command connects to (kernels before Landlock ABI 9), as are `io_uring` (it can create sockets without the `socket` system call),
//! leaving the process group (`setsid`, `setpgid`: the tool kills the group on timeout), changing
//! owners, and — in `read-only`, or for a root caller whose files Landlock's path rules do not
//! cover for metadata — changing permission bits.
//!
//! Guarantees: the filter checks the architecture (another ABI's system calls kill the process)
//! and, on x86-64, also matches the x32 numbers of each refused call.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The filter could not be built or installed.
#[derive(Debug, thiserror::Error)]
#[error("seccomp: {0}")]
pub struct SeccompUnavailable(pub String);

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;

/// x32 system calls are the x86-64 numbers with this bit set.
#[cfg(target_arch = "x86_64")]
const X32_BIT: i64 = 0x4000_0000;

fn always_refused() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_io_uring_setup,
        libc::SYS_setsid,
        libc::SYS_setpgid,
        libc::SYS_fchown,
        libc::SYS_fchownat,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([libc::SYS_chown, libc::SYS_lchown]);
    v
}

fn chmod_calls() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        452, /* fchmodat2 */
    ];
    #[cfg(target_arch = "x86_64")]
    v.push(libc::SYS_chmod);
    v
}

/// Builds the filter. `deny_chmod` adds the permission-bit calls; `deny_unix_sockets` refuses
/// `socket(AF_UNIX, ..)` too (a connected pair from `socketpair` stays available: it reaches no
/// one outside).
pub fn build(deny_chmod: bool, deny_unix_sockets: bool) -> Result<BpfProgram, SeccompUnavailable> {
    let err = |e: &dyn std::fmt::Display| SeccompUnavailable(e.to_string());
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
    )
    .map_err(|e| err(&e))?;
    let socket_rule = SeccompRule::new(vec![not_unix]).map_err(|e| err(&e))?;
    let mut add = |nr: i64, rule: Option<&SeccompRule>| {
        let chain = rule.map(|r| vec![r.clone()]).unwrap_or_default();
        rules.insert(nr, chain.clone());
        #[cfg(target_arch = "x86_64")]
        rules.insert(nr | X32_BIT, chain);
    };
    add(libc::SYS_socketpair, Some(&socket_rule));
    if deny_unix_sockets {
        add(libc::SYS_socket, None);
    } else {
        add(libc::SYS_socket, Some(&socket_rule));
    }
    for nr in always_refused() {
        add(nr, None);
    }
    if deny_chmod {
        for nr in chmod_calls() {
            add(nr, None);
        }
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        ARCH,
    )
    .map_err(|e| err(&e))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| err(&e))
}

/// Installs the filter on the calling thread (needs `no_new_privs`, set before).
pub fn install(program: &BpfProgram) -> Result<(), SeccompUnavailable> {
    seccompiler::apply_filter(program).map_err(|e| SeccompUnavailable(e.to_string()))
}
