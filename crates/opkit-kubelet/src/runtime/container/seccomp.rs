//! The `RuntimeDefault` seccomp profile (Linux only), as containerd's and Docker's default
//! profile shapes it, compiled to seccomp-bpf with `seccompiler`.
//!
//! Their profile is an allow list of about 350 system calls; this one is its complement
//! written as a deny list (every call not named here is allowed), which refuses the same
//! calls on the architectures opkit runs on: kernel modules, `kexec`, the kernel keyring,
//! `bpf`, `perf_event_open`, `userfaultfd`, mounting and new namespaces (`mount`, the new
//! mount API, `unshare`, `setns`, `clone` with a namespace flag), clock setting,
//! `reboot`, swap, `ptrace`-like memory access across processes (`process_vm_*`),
//! `open_by_handle_at`, `iopl`/`ioperm` and the obsolete calls the kernel still has. As in their profile, a
//! capability the container holds lifts the calls it guards (`SYS_ADMIN` mounts and
//! namespaces, `SYS_MODULE` modules, `SYS_BOOT` reboot, and so on). A refused call
//! fails with `EPERM`, and `clone3` with `ENOSYS` so that the C library falls back to
//! `clone`, whose flags the filter can read. `ptrace` itself stays allowed, as their
//! profile allows it on kernels from 4.8.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

use super::capability_bit;

/// A system call refused unless the container holds `unless` (a kube capability name).
struct Denied {
    /// The call's number (`c_long`: 64 bits on the architectures seccompiler knows).
    call: i64,
    unless: &'static [&'static str],
}

const fn denied(call: i64, unless: &'static [&'static str]) -> Denied {
    Denied { call, unless }
}

/// Refused whatever the capabilities (no capability lifts them in containerd's profile).
const ALWAYS: &[&str] = &[];
const SYS_ADMIN: &[&str] = &["SYS_ADMIN"];
const SYS_PTRACE: &[&str] = &["SYS_PTRACE"];
const SYS_TIME: &[&str] = &["SYS_TIME"];
const SYS_NICE: &[&str] = &["SYS_NICE"];

/// The calls refused on every architecture.
const DENIED: &[Denied] = &[
    denied(libc::SYS_add_key, ALWAYS),
    denied(libc::SYS_keyctl, ALWAYS),
    denied(libc::SYS_request_key, ALWAYS),
    denied(libc::SYS_kexec_load, ALWAYS),
    denied(libc::SYS_kexec_file_load, ALWAYS),
    denied(libc::SYS_userfaultfd, ALWAYS),
    denied(libc::SYS_swapon, ALWAYS),
    denied(libc::SYS_swapoff, ALWAYS),
    denied(libc::SYS_open_by_handle_at, &["DAC_READ_SEARCH"]),
    denied(libc::SYS_init_module, &["SYS_MODULE"]),
    denied(libc::SYS_finit_module, &["SYS_MODULE"]),
    denied(libc::SYS_delete_module, &["SYS_MODULE"]),
    denied(libc::SYS_reboot, &["SYS_BOOT"]),
    denied(libc::SYS_acct, &["SYS_PACCT"]),
    denied(libc::SYS_vhangup, &["SYS_TTY_CONFIG"]),
    denied(libc::SYS_bpf, &["SYS_ADMIN", "BPF"]),
    denied(libc::SYS_perf_event_open, &["SYS_ADMIN", "PERFMON"]),
    denied(libc::SYS_syslog, &["SYS_ADMIN", "SYSLOG"]),
    denied(libc::SYS_mount, SYS_ADMIN),
    denied(libc::SYS_umount2, SYS_ADMIN),
    denied(libc::SYS_mount_setattr, SYS_ADMIN),
    denied(libc::SYS_move_mount, SYS_ADMIN),
    denied(libc::SYS_open_tree, SYS_ADMIN),
    denied(libc::SYS_fsopen, SYS_ADMIN),
    denied(libc::SYS_fsconfig, SYS_ADMIN),
    denied(libc::SYS_fsmount, SYS_ADMIN),
    denied(libc::SYS_fspick, SYS_ADMIN),
    denied(libc::SYS_pivot_root, SYS_ADMIN),
    denied(libc::SYS_unshare, SYS_ADMIN),
    denied(libc::SYS_setns, SYS_ADMIN),
    denied(libc::SYS_sethostname, SYS_ADMIN),
    denied(libc::SYS_setdomainname, SYS_ADMIN),
    denied(libc::SYS_quotactl, SYS_ADMIN),
    denied(libc::SYS_quotactl_fd, SYS_ADMIN),
    denied(libc::SYS_fanotify_init, SYS_ADMIN),
    denied(libc::SYS_name_to_handle_at, SYS_ADMIN),
    denied(libc::SYS_lookup_dcookie, SYS_ADMIN),
    denied(libc::SYS_kcmp, SYS_PTRACE),
    denied(libc::SYS_pidfd_getfd, SYS_PTRACE),
    denied(libc::SYS_process_madvise, SYS_PTRACE),
    denied(libc::SYS_process_vm_readv, SYS_PTRACE),
    denied(libc::SYS_process_vm_writev, SYS_PTRACE),
    denied(libc::SYS_settimeofday, SYS_TIME),
    denied(libc::SYS_clock_settime, SYS_TIME),
    denied(libc::SYS_clock_adjtime, SYS_TIME),
    denied(libc::SYS_get_mempolicy, SYS_NICE),
    denied(libc::SYS_set_mempolicy, SYS_NICE),
    denied(libc::SYS_set_mempolicy_home_node, SYS_NICE),
    denied(libc::SYS_mbind, SYS_NICE),
    denied(libc::SYS_move_pages, SYS_NICE),
];

/// The obsolete and port-I/O calls only x86-64 has.
#[cfg(target_arch = "x86_64")]
const DENIED_ARCH: &[Denied] = &[
    denied(libc::SYS_nfsservctl, ALWAYS),
    denied(libc::SYS_sysfs, ALWAYS),
    denied(libc::SYS__sysctl, ALWAYS),
    denied(libc::SYS_uselib, ALWAYS),
    denied(libc::SYS_ustat, ALWAYS),
    denied(libc::SYS_iopl, &["SYS_RAWIO"]),
    denied(libc::SYS_ioperm, &["SYS_RAWIO"]),
];
#[cfg(not(target_arch = "x86_64"))]
const DENIED_ARCH: &[Denied] = &[];

/// The `clone` flags that make namespaces (containerd's mask `0x7E020000`): `clone` with
/// any of them is refused without `SYS_ADMIN`.
const NAMESPACE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// The address family `socket` is refused for (`AF_VSOCK`, as in containerd's profile).
const VSOCK: u64 = libc::AF_VSOCK as u64;

/// Why the profile could not be compiled (an architecture seccompiler does not know).
#[derive(Debug, thiserror::Error)]
#[error("compiling the RuntimeDefault seccomp profile: {0}")]
pub(crate) struct CompileError(#[from] seccompiler::BackendError);

/// The `RuntimeDefault` filters for a container with `capabilities` (bits): one refusing
/// calls with `EPERM`, without `SYS_ADMIN` one making `clone3` fail with `ENOSYS`, and on
/// x86-64 one refusing x32 calls. Every installed filter applies.
pub(super) fn runtime_default(capabilities: u64) -> Result<Vec<BpfProgram>, CompileError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let holds = |names: &[&str]| names.iter().filter_map(|n| capability_bit(n)).any(|bit| capabilities & bit != 0);
    let admin = holds(SYS_ADMIN);
    let mut rules = std::collections::BTreeMap::new();
    for d in DENIED.iter().chain(DENIED_ARCH) {
        if !holds(d.unless) {
            rules.insert(d.call, Vec::new());
        }
    }
    if !admin {
        let flag = |f: libc::c_int| {
            let f = u64::from(f.cast_unsigned());
            SeccompRule::new(vec![SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(f), f)?])
        };
        let clone = NAMESPACE_FLAGS.into_iter().map(flag).collect::<Result<_, _>>()?;
        rules.insert(libc::SYS_clone, clone);
    }
    let vsock = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, VSOCK)?;
    rules.insert(libc::SYS_socket, vec![SeccompRule::new(vec![vsock])?]);
    let eperm = SeccompAction::Errno(libc::EPERM.cast_unsigned());
    let mut programs = vec![SeccompFilter::new(rules, SeccompAction::Allow, eperm, arch)?.try_into()?];
    let enosys = SeccompAction::Errno(libc::ENOSYS.cast_unsigned());
    if !admin {
        let clone3 = std::iter::once((libc::SYS_clone3, Vec::new())).collect();
        programs.push(SeccompFilter::new(clone3, SeccompAction::Allow, enosys.clone(), arch)?.try_into()?);
    }
    #[cfg(target_arch = "x86_64")]
    programs.push(no_x32(enosys));
    Ok(programs)
}

/// A filter refusing x32 system calls (numbers with `__X32_SYSCALL_BIT`): x32 shares
/// x86-64's audit architecture, so the deny list alone would not see them under their
/// other numbers. containerd's allow list refuses them by not listing them.
#[cfg(target_arch = "x86_64")]
fn no_x32(action: SeccompAction) -> BpfProgram {
    use seccompiler::sock_filter;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    // Classic BPF: load a word at an absolute offset, jump if greater or equal, return.
    const LD_W_ABS: u16 = 0x20;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        // seccomp_data.nr is at offset 0.
        op(LD_W_ABS, 0, 0, 0),
        op(JGE_K, 0, 1, X32_SYSCALL_BIT),
        op(RET_K, 0, 0, u32::from(action)),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Installs `program` on the calling thread without setting `no_new_privs` (which
/// `seccompiler::apply_filter` does): the caller still holds `CAP_SYS_ADMIN`, as runc
/// installs a profile before it drops capabilities when `no_new_privs` is not asked for.
/// One raw system call on memory prepared before the fork: safe between fork and exec.
#[allow(unsafe_code)]
pub(super) fn install(program: &[seccompiler::sock_filter]) -> std::io::Result<()> {
    #[repr(C)]
    struct SockFprog {
        len: libc::c_ushort,
        filter: *const seccompiler::sock_filter,
    }
    let len = libc::c_ushort::try_from(program.len()).map_err(|_| std::io::Error::from_raw_os_error(libc::E2BIG))?;
    let prog = SockFprog { len, filter: program.as_ptr() };
    let (mode, flags): (libc::c_long, libc::c_long) = (libc::SECCOMP_SET_MODE_FILTER.into(), 0);
    // SAFETY: the kernel copies the program (`len` instructions at `filter`, both from a
    // live slice) and keeps no reference to it.
    let rc = unsafe { libc::syscall(libc::SYS_seccomp, mode, flags, &raw const prog) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_compiles_and_capabilities_lift_what_they_guard() {
        let default = super::super::capability_bits(super::super::DEFAULT_CAPABILITIES);
        let confined = runtime_default(default).expect("compiles");
        let x32 = usize::from(cfg!(target_arch = "x86_64"));
        assert_eq!(confined.len(), 2 + x32, "the EPERM filter, clone3's ENOSYS one (and x32's)");
        let admin = capability_bit("SYS_ADMIN").expect("a capability");
        let lifted = runtime_default(default | admin).expect("compiles");
        assert_eq!(lifted.len(), 1 + x32, "SYS_ADMIN allows clone3");
        assert!(lifted[0].len() < confined[0].len(), "SYS_ADMIN lifts mount, unshare, setns, clone flags");
    }
}
