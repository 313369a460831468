//! This process's host name, as Go's `os.Hostname` gives it to controller-runtime (leader
//! election identities, event reporting instances): `$HOSTNAME` when set (a pod's name in
//! a container), else the kernel's host name, else `/etc/hostname`, else `localhost`.

/// This process's host name.
pub(crate) fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}
