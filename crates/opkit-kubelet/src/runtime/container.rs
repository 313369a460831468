//! A contained container, as a container runtime (runc under containerd) makes one: its
//! own mount, PID and (unless its pod's sandbox holds them) IPC and UTS namespaces, a
//! root file system of its own, and the user, groups and capabilities its
//! `securityContext` asks for.
//!
//! - [`Privileges`]: who the process runs as — `runAsUser`, `runAsGroup`,
//!   `supplementalGroups`/`fsGroup`, the capabilities (containerd's default set with
//!   `add`/`drop`) and `allowPrivilegeEscalation: false` (`PR_SET_NO_NEW_PRIVS`), read
//!   from the pod by [`privileges`], which also refuses `runAsNonRoot` breaches with
//!   kube's words, and the seccomp profile ([`SeccompProfile`]: `RuntimeDefault` is
//!   containerd's default profile, compiled in `seccomp`).
//! - The root file system ([`RootPlan`]): a tmpfs with read-only binds of the host's
//!   `/usr`, `/lib*`, `/bin`, `/sbin` (what a loaded binary needs to run), a minimal
//!   `/etc` the kubelet writes ([`write_etc`]; not the host's: no `shadow`), a fresh
//!   `/proc` of the new PID namespace with runc's masked paths, a minimal `/dev`, a
//!   private `/tmp`, then `pivot_root`; the image's entrypoint, the ServiceAccount and
//!   the volumes are bound at their paths after the pivot, so a symlink in a volume
//!   resolves inside the container and never on the host.
//! - Joining a running container ([`JoinPlan`], for `pods/exec` and exec probes): `setns`
//!   into its init process's IPC, UTS, network, PID and mount namespaces, then the same
//!   privileges.
//!
//! A PID namespace applies to the children of the process that makes or joins it, not
//! to that process itself. The hooks therefore fork once more after `unshare`/`setns`
//! (the kubelet is a library linked into other programs, so it cannot re-exec itself as
//! a small init): the forked child becomes the container's process (PID 1 of a new
//! namespace, or a member of the joined one) and goes on to `exec`; the first process
//! stays outside as a waiter that reports the container's exit as its own, so the
//! kubelet's process handle, process group and exit codes work as before. Everything
//! between `fork` and `exec` is raw system calls on memory prepared before the first
//! fork.

#[cfg(target_os = "linux")]
mod seccomp;
#[cfg(target_os = "linux")]
mod setup;

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::volumes::BindMount;
#[cfg(target_os = "linux")]
pub(crate) use setup::{create, join};

/// Where the image's entrypoint is bound inside the container.
pub(crate) const ENTRYPOINT: &str = "/entrypoint";
/// Where the ServiceAccount's files are mounted (`/var/run` is a link to `/run`).
pub(crate) const SERVICE_ACCOUNT_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The user a loaded binary runs as under `runAsNonRoot` without `runAsUser`: a loaded
/// binary has no image `USER`, and the scaffolded projects' Dockerfile runs the manager
/// as distroless's `nonroot` (65532:65532).
pub(crate) const NONROOT_USER: u32 = 65532;
/// The name of the old root under the new one between `pivot_root` and its unmount.
const OLD_ROOT: &str = "/.opkit-old-root";
/// [`OLD_ROOT`] as the hook uses it: absolute after the pivot, relative to the new root
/// (the working directory) for `pivot_root` itself.
const OLD_ROOT_C: &std::ffi::CStr = c"/.opkit-old-root";
const OLD_ROOT_RELATIVE: &std::ffi::CStr = c".opkit-old-root";
/// The host directories bound read-only into every root file system (when the host has
/// them; a symbolic link, as `/bin` → `usr/bin` on merged-`/usr` systems, is copied as a
/// link).
const SYSTEM_DIRS: [&str; 6] = ["/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin"];
/// Host `/etc` entries bound read-only into the container's `/etc`: public certificates
/// and Debian's alternatives links (`/usr/bin/awk` → `/etc/alternatives/awk`).
const ETC_DIRS: [&str; 2] = ["ssl", "alternatives"];
/// `/proc` paths runc masks (bound over with `/dev/null`) and makes read-only.
const PROC_MASKED: [&str; 4] = ["kcore", "keys", "timer_list", "sched_debug"];
const PROC_READ_ONLY: [&str; 5] = ["sys", "sysrq-trigger", "irq", "bus", "fs"];

/// The capabilities by their kube names (`CAP_` dropped), at their bit numbers.
const CAPABILITIES: [&str; 41] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// containerd's (and Docker's) default capabilities, the 14 a container gets unless its
/// `securityContext` adds or drops some.
pub(crate) const DEFAULT_CAPABILITIES: [&str; 14] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
];

/// The bit of capability `name` (`NET_ADMIN` or `CAP_NET_ADMIN`, any case).
fn capability_bit(name: &str) -> Option<u64> {
    let upper = name.to_ascii_uppercase();
    let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
    CAPABILITIES.iter().position(|c| *c == bare).map(|i| 1u64 << i)
}

/// A set of capability names as bits (unknown names are ignored, as runc warns and goes on).
fn capability_bits<'a>(names: impl IntoIterator<Item = &'a str>) -> u64 {
    names.into_iter().filter_map(capability_bit).fold(0, |a, b| a | b)
}

/// Every capability this kernel knows (`/proc/sys/kernel/cap_last_cap`).
fn all_capabilities() -> u64 {
    let last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(40)
        .min(63);
    if last == 63 { u64::MAX } else { (1u64 << (last + 1)) - 1 }
}

/// Who a container's processes run as, and with which privileges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Privileges {
    /// The user (`runAsUser`; root by default, a loaded binary having no image `USER`).
    pub uid: u32,
    /// The primary group (`runAsGroup`; the user's, 0 or 65532, by default).
    pub gid: u32,
    /// Supplementary groups: `fsGroup` and `supplementalGroups`.
    pub groups: Vec<u32>,
    /// The capabilities (bounding, permitted and effective sets), as bits.
    pub capabilities: u64,
    /// `allowPrivilegeEscalation: false`: `PR_SET_NO_NEW_PRIVS`.
    pub no_new_privs: bool,
    /// `seccompProfile`: the system calls the process may make.
    pub seccomp: SeccompProfile,
}

/// A container's seccomp profile (`securityContext.seccompProfile.type`, the
/// container's over the pod's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum SeccompProfile {
    /// No filter (`Unconfined`, and kube's default without `seccompProfile`).
    #[default]
    Unconfined,
    /// containerd's default profile: a filter refusing the system calls it refuses (with
    /// `EPERM`), lifted by the capabilities that guard them. Installed before the
    /// container drops its capabilities, so it needs no `no_new_privs`, as runc does.
    RuntimeDefault,
}

/// Where the kubelet looks for `Localhost` seccomp profiles (kube's `--root-dir`'s
/// `seccomp` directory); opkit's kubelet loads none of them.
const LOCALHOST_SECCOMP_DIR: &str = "/var/lib/kubelet/seccomp";

/// The seccomp profile of container `c` (the container's `seccompProfile` over the
/// pod's). A `Localhost` profile is refused, with containerd's words: opkit compiles only
/// the runtime's default profile.
fn seccomp_profile(
    pod_sc: Option<&k8s_openapi::api::core::v1::PodSecurityContext>,
    c: &Container,
) -> Result<SeccompProfile, SecurityError> {
    let profile = c.security_context.as_ref().and_then(|s| s.seccomp_profile.as_ref());
    let Some(profile) = profile.or(pod_sc.and_then(|s| s.seccomp_profile.as_ref())) else {
        return Ok(SeccompProfile::Unconfined);
    };
    match profile.type_.as_str() {
        "Unconfined" => Ok(SeccompProfile::Unconfined),
        "RuntimeDefault" => Ok(SeccompProfile::RuntimeDefault),
        "Localhost" => {
            let file = profile.localhost_profile.as_deref().unwrap_or_default();
            Err(SecurityError(format!(
                "failed to generate seccomp spec opts: cannot load seccomp profile \"{LOCALHOST_SECCOMP_DIR}/{file}\": \
                 opkit's kubelet loads no Localhost profiles, only RuntimeDefault (container: {})",
                c.name
            )))
        }
        other => Err(SecurityError(format!("unknown seccomp profile type {other:?} (container: {})", c.name))),
    }
}

/// How a container's `securityContext` (with its pod's) asks it to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Security {
    /// `privileged: true`: as the kubelet, with every capability, in the host's
    /// namespaces except the pod's network (the uncontained mode).
    Privileged,
    /// Contained, with these privileges.
    Contained {
        /// The user, groups and capabilities.
        privileges: Privileges,
        /// `readOnlyRootFilesystem`.
        read_only_root: bool,
    },
}

/// A `securityContext` the kubelet refuses to run (the `CreateContainerConfigError`
/// message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct SecurityError(pub String);

/// The security settings of container `c` of `pod`: the container's `securityContext`
/// over the pod's, as the kubelet merges them. Refuses `runAsNonRoot` with an explicit
/// `runAsUser: 0`, as the kubelet's `verifyRunAsNonRoot` does.
pub(crate) fn privileges(pod: &Pod, c: &Container) -> Result<Security, SecurityError> {
    let spec = pod.spec.as_ref();
    let pod_sc = spec.and_then(|s| s.security_context.as_ref());
    let sc = c.security_context.as_ref();
    if sc.and_then(|s| s.privileged) == Some(true) {
        return Ok(Security::Privileged);
    }
    let run_as_user = sc.and_then(|s| s.run_as_user).or(pod_sc.and_then(|s| s.run_as_user));
    let run_as_group = sc.and_then(|s| s.run_as_group).or(pod_sc.and_then(|s| s.run_as_group));
    let non_root = sc.and_then(|s| s.run_as_non_root).or(pod_sc.and_then(|s| s.run_as_non_root)) == Some(true);
    let pod_name = format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    );
    let id = |v: i64, what: &str| {
        u32::try_from(v).map_err(|_| SecurityError(format!("{what} {v} is out of range (container: {})", c.name)))
    };
    let uid = match run_as_user {
        Some(0) if non_root => {
            return Err(SecurityError(format!(
                "container's runAsUser breaks non-root policy (pod: {pod_name:?}, container: {})",
                c.name
            )));
        }
        Some(v) => id(v, "runAsUser")?,
        None if non_root => NONROOT_USER,
        None => 0,
    };
    let gid = match run_as_group {
        Some(v) => id(v, "runAsGroup")?,
        None if run_as_user.is_none() => uid,
        None => 0,
    };
    let mut groups = Vec::new();
    if let Some(fs_group) = pod_sc.and_then(|s| s.fs_group) {
        groups.push(id(fs_group, "fsGroup")?);
    }
    for g in pod_sc.and_then(|s| s.supplemental_groups.as_ref()).into_iter().flatten() {
        let g = id(*g, "supplementalGroups")?;
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    // containerd's order: add ALL, drop ALL, then the named ones added, then dropped.
    let mut capabilities = capability_bits(DEFAULT_CAPABILITIES);
    if let Some(caps) = sc.and_then(|s| s.capabilities.as_ref()) {
        let add = caps.add.iter().flatten().map(String::as_str);
        let drop = caps.drop.iter().flatten().map(String::as_str);
        if add.clone().any(|c| c.eq_ignore_ascii_case("ALL")) {
            capabilities = all_capabilities();
        }
        if drop.clone().any(|c| c.eq_ignore_ascii_case("ALL")) {
            capabilities = 0;
        }
        capabilities |= capability_bits(add);
        capabilities &= !capability_bits(drop);
    }
    Ok(Security::Contained {
        privileges: Privileges {
            uid,
            gid,
            groups,
            capabilities: capabilities & all_capabilities(),
            no_new_privs: sc.and_then(|s| s.allow_privilege_escalation) == Some(false),
            seccomp: seccomp_profile(pod_sc, c)?,
        },
        read_only_root: sc.and_then(|s| s.read_only_root_filesystem) == Some(true),
    })
}

/// What the kubelet writes as a pod's `/etc` (shared by its containers, bound
/// read-only): `passwd`, `group`, `hosts`, `hostname`, `resolv.conf` (`resolv_conf`, as
/// [`crate::resolv_conf`] composes it), `nsswitch.conf` and the dynamic linker's
/// cache, plus the mount points of [`ETC_DIRS`]. Never the host's `shadow`.
pub(crate) fn write_etc(dir: &Path, hostname: &str, pod_ip: &str, resolv_conf: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let passwd = "root:x:0:0:root:/root:/bin/sh\n\
                  nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
                  nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin\n";
    let group = "root:x:0:\nnogroup:x:65534:\nnonroot:x:65532:\n";
    let hosts = format!(
        "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{pod_ip}\t{hostname}\n"
    );
    let hostname_line = format!("{hostname}\n");
    let files: [(&str, &[u8]); 6] = [
        ("passwd", passwd.as_bytes()),
        ("group", group.as_bytes()),
        ("hosts", hosts.as_bytes()),
        ("hostname", hostname_line.as_bytes()),
        ("resolv.conf", resolv_conf.as_bytes()),
        ("nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files dns\n"),
    ];
    for (name, content) in files {
        std::fs::write(dir.join(name), content)?;
    }
    if let Ok(cache) = std::fs::read("/etc/ld.so.cache") {
        std::fs::write(dir.join("ld.so.cache"), cache)?;
    }
    for sub in ETC_DIRS {
        if Path::new("/etc").join(sub).is_dir() {
            std::fs::create_dir_all(dir.join(sub))?;
        }
    }
    Ok(())
}

/// The root file system of a new container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RootPlan {
    /// An empty host directory the root tmpfs is mounted on (in the container's own
    /// mount namespace only).
    pub root_dir: PathBuf,
    /// The pod's `/etc` ([`write_etc`]).
    pub etc_dir: PathBuf,
    /// The entrypoint, ServiceAccount and volume mounts (targets inside the container).
    pub mounts: Vec<BindMount>,
    /// The working directory inside the container (made when missing).
    pub working_dir: PathBuf,
    /// The hostname to set when the sandbox holds no UTS namespace (`None`: keep the
    /// host's, as a `hostNetwork` pod does).
    pub hostname: Option<String>,
    /// Whether the pod's sandbox holds IPC and UTS namespaces the container joined.
    pub sandbox_namespaces: bool,
    /// `readOnlyRootFilesystem`.
    pub read_only_root: bool,
    /// Who the container runs as.
    pub privileges: Privileges,
    /// The waiter of a running container whose PID namespace this one joins instead of
    /// making its own (an ephemeral container's `targetContainerName`).
    pub pid_namespace_of: Option<u32>,
}

/// A running container another process joins (`pods/exec`, exec probes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JoinPlan {
    /// The pid of the container's waiter (the kubelet's child; the container's init
    /// process is its only child).
    pub waiter: u32,
    /// The working directory inside the container.
    pub working_dir: PathBuf,
    /// Who the joining process runs as (the container's own privileges).
    pub privileges: Privileges,
}

/// Why joining a container failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JoinError {
    /// Its init process is gone or not set up yet.
    #[error("container is not running (its init process of {0} is not ready)")]
    NotReady(u32),
    /// Opening one of its namespaces failed.
    #[error("opening {path}: {source}")]
    Open {
        /// The namespace file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// Its seccomp profile could not be compiled.
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Seccomp(#[from] seccomp::CompileError),
}

/// How the kubelet isolates real pods' containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodIsolation {
    /// Each container in its own mount, PID, IPC and UTS namespaces and root file system,
    /// with the user and capabilities of its `securityContext`.
    Contained,
    /// Containers run as the kubelet's user on the host's file system and processes (only
    /// the pod's network namespace and a private mount namespace of its volumes).
    Host,
}

impl std::fmt::Display for PodIsolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PodIsolation::Contained => "contained (own mount, PID, IPC and UTS namespaces and root file system)",
            PodIsolation::Host => "host (the kubelet's user, the host's file system and processes)",
        })
    }
}

/// Whether this process can contain containers, probed once per process (a root
/// process that unshares mount, PID, IPC and UTS namespaces); the error says why not.
pub(crate) fn containment_available() -> Result<(), String> {
    static PROBE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    #[cfg(target_os = "linux")]
    return PROBE.get_or_init(setup::probe_containment).clone();
    #[cfg(not(target_os = "linux"))]
    PROBE.get_or_init(|| Err("containers need Linux".to_string())).clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(container_sc: serde_json::Value, pod_sc: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"securityContext": pod_sc, "containers": [{"name": "c", "securityContext": container_sc}]},
        }))
        .expect("a pod")
    }

    fn of(pod: &Pod) -> Result<Security, SecurityError> {
        privileges(pod, &pod.spec.as_ref().expect("spec").containers[0])
    }

    #[test]
    fn the_default_is_root_with_containerds_fourteen_capabilities() {
        let Ok(Security::Contained { privileges, read_only_root }) = of(&pod(json!({}), json!({}))) else {
            panic!("contained")
        };
        assert_eq!((privileges.uid, privileges.gid, privileges.groups.len()), (0, 0, 0));
        // What `CapEff` shows in a default containerd or Docker container.
        assert_eq!(privileges.capabilities, 0xa80425fb);
        assert!(!privileges.no_new_privs && !read_only_root);
    }

    #[test]
    fn users_groups_and_capabilities_follow_the_security_contexts() {
        let p = pod(
            json!({"runAsUser": 1000, "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                   "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}),
            json!({"runAsUser": 5, "runAsGroup": 3000, "fsGroup": 2000, "supplementalGroups": [4000, 2000]}),
        );
        let Ok(Security::Contained { privileges, read_only_root }) = of(&p) else { panic!("contained") };
        assert_eq!((privileges.uid, privileges.gid), (1000, 3000));
        assert_eq!(privileges.groups, [2000, 4000]);
        assert_eq!(privileges.capabilities, 1 << 10);
        assert!(privileges.no_new_privs && read_only_root);
        let dropped = pod(json!({"capabilities": {"drop": ["CAP_NET_RAW", "mknod"]}}), json!({}));
        let Ok(Security::Contained { privileges, .. }) = of(&dropped) else { panic!("contained") };
        assert_eq!(privileges.capabilities, 0xa80425fb & !(1 << 13) & !(1 << 27));
    }

    #[test]
    fn run_as_non_root_refuses_uid_0_and_privileged_is_uncontained() {
        let err = of(&pod(json!({"runAsUser": 0}), json!({"runAsNonRoot": true}))).expect_err("refused");
        assert_eq!(err.0, "container's runAsUser breaks non-root policy (pod: \"p_ns(u)\", container: c)");
        let Ok(Security::Contained { privileges, .. }) = of(&pod(json!({"runAsNonRoot": true}), json!({}))) else {
            panic!("contained")
        };
        assert_eq!((privileges.uid, privileges.gid), (NONROOT_USER, NONROOT_USER));
        assert_eq!(of(&pod(json!({"privileged": true}), json!({}))), Ok(Security::Privileged));
    }

    #[test]
    fn the_containers_seccomp_profile_wins_and_localhost_is_refused() {
        let seccomp = |c: serde_json::Value, p: serde_json::Value| match of(&pod(c, p)) {
            Ok(Security::Contained { privileges, .. }) => Ok(privileges.seccomp),
            Ok(Security::Privileged) => Err("privileged".to_string()),
            Err(e) => Err(e.0),
        };
        let default = json!({"seccompProfile": {"type": "RuntimeDefault"}});
        let unconfined = json!({"seccompProfile": {"type": "Unconfined"}});
        assert_eq!(seccomp(json!({}), json!({})), Ok(SeccompProfile::Unconfined));
        assert_eq!(seccomp(json!({}), default.clone()), Ok(SeccompProfile::RuntimeDefault));
        assert_eq!(seccomp(unconfined.clone(), default.clone()), Ok(SeccompProfile::Unconfined));
        assert_eq!(seccomp(default, unconfined), Ok(SeccompProfile::RuntimeDefault));
        let local = json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"}});
        let err = seccomp(json!({}), local).expect_err("refused");
        assert!(err.contains("cannot load seccomp profile \"/var/lib/kubelet/seccomp/profiles/audit.json\""), "{err}");
    }
}
