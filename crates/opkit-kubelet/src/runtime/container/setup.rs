//! The system calls that make and join containers (Linux only): the root file
//! system's preparation and construction, the second fork into a new PID namespace,
//! and the drop to a container's privileges. See the parent module for the design.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::super::volumes::BindMount;
use super::{
    ETC_DIRS, JoinError, JoinPlan, OLD_ROOT, OLD_ROOT_C, OLD_ROOT_RELATIVE, PROC_MASKED, PROC_READ_ONLY, Privileges,
    RootPlan, SYSTEM_DIRS, SeccompProfile, all_capabilities, seccomp,
};
/// The pid of the container init process under `waiter` (its only child).
fn init_pid(waiter: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{waiter}/task/{waiter}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

/// The device and inode of a path, to tell root file systems apart.
fn identity(path: &str) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// A path as a C string.
fn c_path(path: &Path) -> std::io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    Ok(CString::new(path.as_os_str().as_bytes())?)
}

/// A bind mount prepared before the fork.
struct PreparedBind {
    /// The source seen through the old root, after the pivot.
    source: CString,
    target: CString,
    /// The target's ancestors, outermost first, made when missing.
    directories: Vec<CString>,
    /// The source is a file: the target is made as an empty file.
    file: bool,
    read_only: bool,
}

fn prepare_bind(mount: &BindMount) -> std::io::Result<PreparedBind> {
    let target = Path::new("/").join(&mount.target);
    let directories = target.ancestors().skip(1).collect::<Vec<_>>().into_iter().rev().skip(1).map(c_path);
    let file = std::fs::metadata(&mount.source)?.is_file();
    let mut source = PathBuf::from(OLD_ROOT);
    source.push(mount.source.strip_prefix("/").unwrap_or(&mount.source));
    Ok(PreparedBind {
        source: c_path(&source)?,
        target: c_path(&target)?,
        directories: directories.collect::<std::io::Result<_>>()?,
        file,
        read_only: mount.read_only,
    })
}

/// A system directory of the host as the root file system gets it.
enum SystemEntry {
    /// Bound read-only from the host path onto the path under the new root.
    Bind { source: CString, target: CString },
    /// A symbolic link (`target` → `link`).
    Link { link: CString, target: CString },
}

/// Privileges prepared before the fork.
struct PreparedPrivileges {
    uid: rustix::process::Uid,
    gid: rustix::process::Gid,
    groups: Vec<rustix::process::Gid>,
    keep: u64,
    /// Every capability bit the kernel knows (those not kept leave the bounding set).
    known: u64,
    no_new_privs: bool,
    /// The compiled seccomp filters (none when unconfined).
    seccomp: Vec<seccompiler::BpfProgram>,
}

fn prepare_privileges(p: &Privileges) -> Result<PreparedPrivileges, seccomp::CompileError> {
    Ok(PreparedPrivileges {
        uid: rustix::process::Uid::from_raw(p.uid),
        gid: rustix::process::Gid::from_raw(p.gid),
        groups: p.groups.iter().map(|g| rustix::process::Gid::from_raw(*g)).collect(),
        keep: p.capabilities,
        known: all_capabilities(),
        no_new_privs: p.no_new_privs,
        seccomp: match p.seccomp {
            SeccompProfile::Unconfined => Vec::new(),
            SeccompProfile::RuntimeDefault => seccomp::runtime_default(p.capabilities)?,
        },
    })
}

/// Drops to `p`: the seccomp filters first (while `CAP_SYS_ADMIN` lets them in without
/// `no_new_privs`; the calls below are none they refuse), the bounding set (while every
/// capability is still effective), `no_new_privs`, the groups and user (capabilities
/// kept across it), then the capability sets themselves, with no ambient ones.
fn apply_privileges(p: &PreparedPrivileges) -> std::io::Result<()> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    for program in &p.seccomp {
        seccomp::install(program)?;
    }
    for bit in 0..64 {
        let cap = 1u64 << bit;
        if p.known & cap != 0 && p.keep & cap == 0 {
            rustix::thread::remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(cap))?;
        }
    }
    if p.no_new_privs {
        rustix::thread::set_no_new_privs(true)?;
    }
    rustix::thread::set_keep_capabilities(true)?;
    rustix::thread::set_thread_groups(&p.groups)?;
    rustix::thread::set_thread_res_gid(p.gid, p.gid, p.gid)?;
    rustix::thread::set_thread_res_uid(p.uid, p.uid, p.uid)?;
    let keep = CapabilitySet::from_bits_retain(p.keep);
    rustix::thread::set_capabilities(
        None,
        CapabilitySets { effective: keep, permitted: keep, inheritable: CapabilitySet::empty() },
    )?;
    rustix::thread::set_keep_capabilities(false)?;
    // Ambient capabilities need the kernel's support; none are asked for.
    let _ = rustix::thread::clear_ambient_capability_set();
    Ok(())
}

/// Forks once more after namespaces were made or joined (see the module's comment):
/// returns in the child, which goes on to `exec`; the parent waits for it and exits as
/// it did, never returning.
///
/// Signals are blocked around the fork so the waiter ignores the SIGTERM the kubelet
/// sends the process group (the container decides what SIGTERM does; SIGKILL still
/// ends both); the child restores the mask. The waiter closes every descriptor at once,
/// so it holds neither the container's pipes nor the error pipe `spawn` waits on.
#[allow(unsafe_code)]
fn fork_into_namespaces() -> std::io::Result<()> {
    // SAFETY: runs between fork and exec in a single-threaded child: only raw system
    // calls and libc's async-signal-safe wrappers (sigfillset, sigprocmask, waitpid,
    // signal, kill, _exit) on stack memory; the clone system call is made directly, so
    // no atfork handler (which may take locks held by threads of the parent) runs.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        if libc::sigprocmask(libc::SIG_BLOCK, &all, &mut previous) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Every argument a full `long`, as the variadic `syscall` reads them: no stack, no
        // thread-id pointers, no TLS — a plain fork.
        let none: libc::c_long = 0;
        let pid = libc::syscall(libc::SYS_clone, libc::c_long::from(libc::SIGCHLD), none, none, none, none);
        if pid < 0 {
            let error = std::io::Error::last_os_error();
            libc::sigprocmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
            return Err(error);
        }
        if pid == 0 {
            libc::sigprocmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
            // The waiter is its parent now: it dies with it.
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            return Ok(());
        }
        let pid = pid as libc::pid_t;
        // close_range(0, ~0U, 0): the kernel reads the low 32 bits of each argument.
        let (first, last): (libc::c_long, libc::c_long) = (0, -1);
        if libc::syscall(libc::SYS_close_range, first, last, none) != 0 {
            for fd in 0..1024 {
                libc::close(fd);
            }
        }
        let mut status = 0;
        loop {
            let got = libc::waitpid(pid, &mut status, 0);
            if got == pid {
                break;
            }
            if got < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                libc::_exit(127);
            }
        }
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        let signal = libc::WTERMSIG(status);
        libc::signal(signal, libc::SIG_DFL);
        let mut only: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut only);
        libc::sigaddset(&mut only, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
        libc::kill(libc::getpid(), signal);
        libc::_exit(128 + signal)
    }
}

/// Makes a directory, content when it exists.
fn make_dir(path: &std::ffi::CStr, mode: u32) -> std::io::Result<()> {
    match rustix::fs::mkdir(path, rustix::fs::Mode::from_raw_mode(mode)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Binds `source` on `target` (both existing), read-only when asked.
fn bind(source: &std::ffi::CStr, target: &std::ffi::CStr, read_only: bool) -> std::io::Result<()> {
    use rustix::mount::MountFlags;
    rustix::mount::mount_bind_recursive(source, target)?;
    if read_only {
        rustix::mount::mount_remount(target, MountFlags::BIND | MountFlags::RDONLY, c"")?;
    }
    Ok(())
}

/// Everything the new-container hook uses, prepared before the fork.
struct PreparedRoot {
    root: CString,
    system: Vec<SystemEntry>,
    etc: CString,
    etc_target: CString,
    etc_binds: Vec<(CString, CString)>,
    /// Paths under the new root: proc, dev, tmp, run, var, the old root.
    proc_dir: CString,
    dev_dir: CString,
    tmp_dir: CString,
    run_dir: CString,
    var_dir: CString,
    var_run: CString,
    old_root: CString,
    devices: Vec<(CString, u32, u32)>,
    dev_dirs: [CString; 2],
    dev_links: Vec<(CString, CString)>,
    dev_null: CString,
    proc_masked: Vec<CString>,
    proc_read_only: Vec<CString>,
    pts: CString,
    shm: CString,
    mounts: Vec<PreparedBind>,
    working_dirs: Vec<CString>,
    working_dir: CString,
    hostname: Option<Vec<u8>>,
    sandbox_namespaces: bool,
    read_only_root: bool,
    privileges: PreparedPrivileges,
}

fn prepare_root(plan: &RootPlan) -> std::io::Result<PreparedRoot> {
    let under = |p: &str| c_path(&plan.root_dir.join(p.trim_start_matches('/')));
    let mut system = Vec::new();
    for dir in SYSTEM_DIRS {
        let Ok(meta) = std::fs::symlink_metadata(dir) else { continue };
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(dir)?;
            system.push(SystemEntry::Link { link: under(dir)?, target: c_path(&target)? });
        } else if meta.is_dir() {
            system.push(SystemEntry::Bind { source: c_path(Path::new(dir))?, target: under(dir)? });
        }
    }
    let etc_binds = ETC_DIRS
        .iter()
        .filter(|d| Path::new("/etc").join(d).is_dir() && plan.etc_dir.join(d).is_dir())
        .map(|d| Ok((c_path(&Path::new("/etc").join(d))?, under(&format!("etc/{d}"))?)))
        .collect::<std::io::Result<_>>()?;
    let devices = [("null", 1, 3), ("zero", 1, 5), ("full", 1, 7), ("random", 1, 8), ("urandom", 1, 9), ("tty", 5, 0)]
        .into_iter()
        .map(|(n, major, minor)| Ok((under(&format!("dev/{n}"))?, major, minor)))
        .collect::<std::io::Result<_>>()?;
    let dev_links = [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ]
    .into_iter()
    .map(|(l, t)| Ok((under(&format!("dev/{l}"))?, CString::new(t)?)))
    .collect::<std::io::Result<_>>()?;
    let working_dir = Path::new("/").join(&plan.working_dir);
    let working_dirs = working_dir.ancestors().collect::<Vec<_>>().into_iter().rev().skip(1).map(c_path);
    Ok(PreparedRoot {
        root: c_path(&plan.root_dir)?,
        system,
        etc: c_path(&plan.etc_dir)?,
        etc_target: under("etc")?,
        etc_binds,
        proc_dir: under("proc")?,
        dev_dir: under("dev")?,
        tmp_dir: under("tmp")?,
        run_dir: under("run")?,
        var_dir: under("var")?,
        var_run: under("var/run")?,
        old_root: under(OLD_ROOT)?,
        devices,
        dev_dirs: [under("dev/pts")?, under("dev/shm")?],
        dev_links,
        dev_null: under("dev/null")?,
        proc_masked: PROC_MASKED.iter().map(|p| under(&format!("proc/{p}"))).collect::<std::io::Result<_>>()?,
        proc_read_only: PROC_READ_ONLY.iter().map(|p| under(&format!("proc/{p}"))).collect::<std::io::Result<_>>()?,
        pts: under("dev/pts")?,
        shm: under("dev/shm")?,
        mounts: plan.mounts.iter().map(prepare_bind).collect::<std::io::Result<_>>()?,
        working_dirs: working_dirs.collect::<std::io::Result<_>>()?,
        working_dir: c_path(&working_dir)?,
        hostname: plan.hostname.as_ref().map(|h| h.as_bytes().to_vec()),
        sandbox_namespaces: plan.sandbox_namespaces,
        read_only_root: plan.read_only_root,
        privileges: prepare_privileges(&plan.privileges).map_err(std::io::Error::other)?,
    })
}

/// Builds the container's root and enters it (runs in the container's PID 1, after the
/// fork): the root's tmpfs with the system and /etc binds, /dev, /proc, then pivot_root,
/// the volume mounts and the working directory.
fn build_root(r: &PreparedRoot) -> std::io::Result<()> {
    mount_root(r)?;
    mount_dev(r)?;
    mount_proc(r)?;
    if let Some(hostname) = &r.hostname {
        rustix::system::sethostname(hostname)?;
    }
    enter_root(r)
}

/// The root's tmpfs, its top directories, the system binds and links, and the pod's /etc
/// (read-only, with its per-file binds).
fn mount_root(r: &PreparedRoot) -> std::io::Result<()> {
    use rustix::fs::Mode;
    use rustix::mount::MountFlags;
    rustix::mount::mount(c"tmpfs", r.root.as_c_str(), c"tmpfs", MountFlags::NODEV, c"mode=0755")?;
    for dir in [&r.proc_dir, &r.dev_dir, &r.tmp_dir, &r.run_dir, &r.var_dir, &r.etc_target, &r.old_root] {
        make_dir(dir, 0o755)?;
    }
    rustix::fs::symlink(c"../run", r.var_run.as_c_str())?;
    rustix::fs::chmod(r.tmp_dir.as_c_str(), Mode::from_raw_mode(0o1777))?;
    for entry in &r.system {
        match entry {
            SystemEntry::Bind { source, target } => {
                make_dir(target, 0o755)?;
                bind(source, target, true)?;
            }
            SystemEntry::Link { link, target } => rustix::fs::symlink(target.as_c_str(), link.as_c_str())?,
        }
    }
    bind(&r.etc, &r.etc_target, false)?;
    for (source, target) in &r.etc_binds {
        bind(source, target, true)?;
    }
    rustix::mount::mount_remount(r.etc_target.as_c_str(), MountFlags::BIND | MountFlags::RDONLY, c"")?;
    Ok(())
}

/// /dev: a tmpfs of the usual character devices, its own pty instance and /dev/shm.
fn mount_dev(r: &PreparedRoot) -> std::io::Result<()> {
    use rustix::fs::{FileType, Mode};
    use rustix::mount::MountFlags;
    rustix::mount::mount(c"tmpfs", r.dev_dir.as_c_str(), c"tmpfs", MountFlags::NOSUID, c"mode=0755,size=65536k")?;
    for (path, major, minor) in &r.devices {
        let dev = rustix::fs::makedev(*major, *minor);
        let mode = Mode::from_raw_mode(0o666);
        rustix::fs::mknodat(rustix::fs::CWD, path.as_c_str(), FileType::CharacterDevice, mode, dev)?;
        rustix::fs::chmod(path.as_c_str(), mode)?;
    }
    for dir in &r.dev_dirs {
        make_dir(dir, 0o755)?;
    }
    let pts_flags = MountFlags::NOSUID | MountFlags::NOEXEC;
    rustix::mount::mount(c"devpts", r.pts.as_c_str(), c"devpts", pts_flags, c"newinstance,ptmxmode=0666,mode=0620")?;
    let shm_flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    rustix::mount::mount(c"shm", r.shm.as_c_str(), c"tmpfs", shm_flags, c"mode=1777,size=65536k")?;
    for (link, target) in &r.dev_links {
        rustix::fs::symlink(target.as_c_str(), link.as_c_str())?;
    }
    Ok(())
}

/// /proc of the new PID namespace, with runc's masked and read-only paths.
fn mount_proc(r: &PreparedRoot) -> std::io::Result<()> {
    use rustix::mount::MountFlags;
    let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    rustix::mount::mount(c"proc", r.proc_dir.as_c_str(), c"proc", flags, None)?;
    for path in &r.proc_masked {
        if rustix::fs::access(path.as_c_str(), rustix::fs::Access::EXISTS).is_ok() {
            rustix::mount::mount_bind(r.dev_null.as_c_str(), path.as_c_str())?;
        }
    }
    for path in &r.proc_read_only {
        if rustix::fs::access(path.as_c_str(), rustix::fs::Access::EXISTS).is_ok() {
            bind(path, path, true)?;
        }
    }
    Ok(())
}

/// Pivots into the root, binds the volume mounts, drops the old root and moves to the
/// working directory (remounting the root read-only when asked).
fn enter_root(r: &PreparedRoot) -> std::io::Result<()> {
    use rustix::fs::Mode;
    use rustix::mount::MountFlags;
    rustix::process::chdir(r.root.as_c_str())?;
    rustix::process::pivot_root(c".", OLD_ROOT_RELATIVE)?;
    rustix::process::chdir(c"/")?;
    for m in &r.mounts {
        for dir in &m.directories {
            make_dir(dir, 0o755)?;
        }
        if m.file {
            let flags = rustix::fs::OFlags::CREATE | rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC;
            drop(rustix::fs::open(m.target.as_c_str(), flags, Mode::from_raw_mode(0o755))?);
        } else {
            make_dir(&m.target, 0o755)?;
        }
        bind(&m.source, &m.target, m.read_only)?;
    }
    rustix::mount::unmount(OLD_ROOT_C, rustix::mount::UnmountFlags::DETACH)?;
    rustix::fs::unlinkat(rustix::fs::CWD, OLD_ROOT_C, rustix::fs::AtFlags::REMOVEDIR)?;
    for dir in &r.working_dirs {
        make_dir(dir, 0o755)?;
    }
    rustix::process::chdir(r.working_dir.as_c_str())?;
    if r.read_only_root {
        rustix::mount::mount_remount(c"/", MountFlags::BIND | MountFlags::RDONLY, c"")?;
    }
    Ok(())
}

#[allow(unsafe_code)]
pub(super) fn probe_containment() -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    if !rustix::process::geteuid().is_root() {
        return Err("the kubelet does not run as root".to_string());
    }
    let mut cmd = std::process::Command::new("true");
    cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    // SAFETY: one raw system call (unshare) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            use rustix::thread::UnshareFlags;
            let flags = UnshareFlags::NEWNS | UnshareFlags::NEWPID | UnshareFlags::NEWIPC | UnshareFlags::NEWUTS;
            rustix::thread::unshare_unsafe(flags)?;
            Ok(())
        });
    }
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("a process in new namespaces exited with {s}")),
        Err(e) => Err(format!("making mount, PID, IPC and UTS namespaces failed: {e}")),
    }
}

/// Makes `cmd` start as a new container of `plan`: it unshares mount and PID (and,
/// without a pod sandbox holding them, IPC and UTS) namespaces, forks its PID 1, builds
/// and enters its root and drops to its privileges. Registered after the sandbox's own
/// hook, so the network (UTS, IPC) namespaces are already the pod's.
#[allow(unsafe_code)]
pub(crate) fn create(cmd: &mut std::process::Command, plan: &RootPlan) -> std::io::Result<()> {
    use rustix::mount::MountPropagationFlags;
    use rustix::thread::UnshareFlags;
    use std::os::unix::process::CommandExt;
    std::fs::create_dir_all(&plan.root_dir)?;
    let prepared = prepare_root(plan)?;
    // A target's PID namespace, opened now (its init process is the waiter's child).
    let pid_namespace: Option<OwnedFd> = match plan.pid_namespace_of {
        None => None,
        Some(waiter) => {
            let init = init_pid(waiter).ok_or_else(|| std::io::Error::other(JoinError::NotReady(waiter)))?;
            Some(std::fs::File::open(format!("/proc/{init}/ns/pid"))?.into())
        }
    };
    let mut flags = UnshareFlags::NEWNS;
    if pid_namespace.is_none() {
        flags |= UnshareFlags::NEWPID;
    }
    if !prepared.sandbox_namespaces {
        flags |= UnshareFlags::NEWIPC | UnshareFlags::NEWUTS;
    }
    // SAFETY: the hook runs in the forked child before exec: raw system calls on memory
    // prepared above (see `fork_into_namespaces` for the second fork); it allocates
    // nothing and takes no lock. `unshare` gets no `CLONE_FILES`.
    unsafe {
        cmd.pre_exec(move || {
            rustix::thread::unshare_unsafe(flags)?;
            if let Some(fd) = &pid_namespace {
                rustix::thread::move_into_link_name_space(
                    fd.as_fd(),
                    Some(rustix::thread::LinkNameSpaceType::ProcessID),
                )?;
            }
            rustix::mount::mount_change(c"/", MountPropagationFlags::REC | MountPropagationFlags::PRIVATE)?;
            fork_into_namespaces()?;
            build_root(&prepared)?;
            apply_privileges(&prepared.privileges)
        });
    }
    Ok(())
}

/// Makes `cmd` start inside the running container of `plan`: in its IPC, UTS, network,
/// PID and mount namespaces (so in its root), in its working directory, with its
/// privileges. Register it before any hook that must run in the joined process (a
/// terminal's `setsid`), and give `cmd` no `current_dir` (it would be the host's).
#[allow(unsafe_code)]
pub(crate) fn join(cmd: &mut std::process::Command, plan: &JoinPlan) -> Result<(), JoinError> {
    use rustix::thread::LinkNameSpaceType;
    use std::os::unix::process::CommandExt;
    let init = init_pid(plan.waiter).ok_or(JoinError::NotReady(plan.waiter))?;
    // Its root is set up once it is not the host's and the old root is gone.
    let root = format!("/proc/{init}/root");
    if identity(&root).is_none()
        || identity(&root) == identity("/")
        || Path::new(&root).join(OLD_ROOT.trim_start_matches('/')).exists()
    {
        return Err(JoinError::NotReady(plan.waiter));
    }
    let kinds = [
        ("ipc", LinkNameSpaceType::InterProcessCommunication),
        ("uts", LinkNameSpaceType::HostNameAndNISDomainName),
        ("net", LinkNameSpaceType::Network),
        ("pid", LinkNameSpaceType::ProcessID),
        ("mnt", LinkNameSpaceType::Mount),
    ];
    let mut namespaces: Vec<(OwnedFd, LinkNameSpaceType)> = Vec::new();
    for (name, kind) in kinds {
        let path = format!("/proc/{init}/ns/{name}");
        let file = std::fs::File::open(&path).map_err(|source| JoinError::Open { path, source })?;
        namespaces.push((file.into(), kind));
    }
    if init_pid(plan.waiter) != Some(init) {
        return Err(JoinError::NotReady(plan.waiter));
    }
    let working_dir = c_path(&Path::new("/").join(&plan.working_dir)).unwrap_or_else(|_| c"/".to_owned());
    let privileges = prepare_privileges(&plan.privileges)?;
    // SAFETY: the hook runs in the forked child before exec: `setns` on descriptors
    // opened above, the second fork (`fork_into_namespaces`), `chdir` and the
    // privilege calls, all raw system calls on memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            for (fd, kind) in &namespaces {
                rustix::thread::move_into_link_name_space(fd.as_fd(), Some(*kind))?;
            }
            fork_into_namespaces()?;
            if rustix::process::chdir(working_dir.as_c_str()).is_err() {
                rustix::process::chdir(c"/")?;
            }
            apply_privileges(&privileges)
        });
    }
    Ok(())
}
