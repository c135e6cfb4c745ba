//! The seccomp filter of a contained mode: sockets of any family but `AF_UNIX` are refused
//! (`EPERM`), and `AF_UNIX` sockets too when Landlock cannot confine which socket files a command
//! reaches (kernels before Landlock ABI 9): `socket` entirely, and `socketpair` of datagrams (an
//! unbound datagram socket, even one of a pair, can `sendto` or re-`connect` to any socket file);
//! a stream or seqpacket pair stays (it is connected for good). Refused as well: `io_uring` (it
//! can create sockets without the `socket` system call),
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

/// The bits of a socket type that name the type (`SOCK_NONBLOCK` and `SOCK_CLOEXEC` are above).
const SOCK_TYPE_MASK: u64 = 0xf;

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
/// `socket(AF_UNIX, ..)` and `socketpair(AF_UNIX, SOCK_DGRAM, ..)` too (a stream or seqpacket
/// pair stays available: it is connected to itself for good, so it reaches no one outside).
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
    // The type's low bits, without SOCK_NONBLOCK and SOCK_CLOEXEC.
    let datagram = SeccompCondition::new(
        1,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK),
        libc::SOCK_DGRAM as u64,
    )
    .map_err(|e| err(&e))?;
    let datagram_rule = SeccompRule::new(vec![datagram]).map_err(|e| err(&e))?;
    // A call is refused when any rule of its chain matches (an empty chain: always).
    let mut add = |nr: i64, chain: Vec<SeccompRule>| {
        rules.insert(nr, chain.clone());
        #[cfg(target_arch = "x86_64")]
        rules.insert(nr | X32_BIT, chain);
    };
    if deny_unix_sockets {
        add(libc::SYS_socket, Vec::new());
        add(libc::SYS_socketpair, vec![socket_rule, datagram_rule]);
    } else {
        add(libc::SYS_socket, vec![socket_rule.clone()]);
        add(libc::SYS_socketpair, vec![socket_rule]);
    }
    for nr in always_refused() {
        add(nr, Vec::new());
    }
    if deny_chmod {
        for nr in chmod_calls() {
            add(nr, Vec::new());
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
