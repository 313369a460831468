//! Pod IPs unique on the whole host, even among several processes each running its own
//! cluster with the same pod CIDRs: an address is leased by holding an exclusive `flock`
//! on the file named after it under `/run/opkit/pod-ips/`. The kernel drops the lock when
//! the process dies, so a crash leaves no stale lease; a released lease removes its file.
//!
//! Addresses are taken from the top of the node's range down, while the simulated
//! kubelet's pool ([`crate::ip`]) hands them out from the bottom up, so real
//! and simulated pods of a node do not meet until its range is nearly full.

use std::fs::{File, OpenOptions, TryLockError};
use std::net::Ipv4Addr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use opkit_apimachinery::Ipv4Range;

use super::NetworkError;

/// The range of a node without a (usable IPv4) pod CIDR: the simulated kubelet's
/// overflow range.
const FALLBACK_RANGE: &str = "10.255.0.0/16";

/// One leased address; dropping it releases the address.
#[derive(Debug)]
pub(super) struct IpLease {
    ip: Ipv4Addr,
    path: PathBuf,
    /// Holds the lock while open.
    _file: File,
}

impl IpLease {
    /// Leases a free address of `pod_cidr` (or of the fallback range), skipping the
    /// network, gateway (first) and broadcast addresses.
    pub(super) fn acquire(dir: &Path, pod_cidr: Option<&str>) -> Result<IpLease, NetworkError> {
        let range = pod_cidr
            .and_then(|cidr| cidr.parse::<Ipv4Range>().ok().map(|pool| (cidr, pool)))
            .or_else(|| FALLBACK_RANGE.parse::<Ipv4Range>().ok().map(|pool| (FALLBACK_RANGE, pool)));
        let Some((cidr, pool)) = range else {
            return Err(NetworkError::Setup(format!("no pod range: {pod_cidr:?} and {FALLBACK_RANGE} do not parse")));
        };
        std::fs::create_dir_all(dir)
            .map_err(|source| NetworkError::Io { step: format!("creating {}", dir.display()), source })?;
        let gateway = pool.hosts().next();
        for ip in pool.hosts().rev().filter(|ip| Some(*ip) != gateway) {
            if let Some(lease) = IpLease::try_lease(dir, ip)? {
                return Ok(lease);
            }
        }
        Err(NetworkError::AddressesExhausted { range: cidr.to_string() })
    }

    /// Leases `ip` if no one holds it.
    fn try_lease(dir: &Path, ip: Ipv4Addr) -> Result<Option<IpLease>, NetworkError> {
        let path = dir.join(ip.to_string());
        let io = |step: &str| {
            let step = format!("{step} {}", path.display());
            move |source| NetworkError::Io { step, source }
        };
        let file = OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io("opening"))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(source)) => return Err(io("locking")(source)),
        }
        // The holder before us may have removed the file between our open and our lock:
        // then the lock is on a file no one else can find, and the address is not ours.
        let locked = file.metadata().map_err(io("reading"))?;
        match std::fs::metadata(&path) {
            Ok(named) if (named.dev(), named.ino()) == (locked.dev(), locked.ino()) => {
                Ok(Some(IpLease { ip, path, _file: file }))
            }
            _ => Ok(None),
        }
    }

    /// The leased address.
    pub(super) fn ip(&self) -> Ipv4Addr {
        self.ip
    }
}

impl Drop for IpLease {
    fn drop(&mut self) {
        // Removed while still locked; the lock goes when the file is closed right after.
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_exclusive_skip_the_gateway_and_are_released_on_drop() {
        let dir = tempfile::tempdir().expect("temp dir");
        let first = IpLease::acquire(dir.path(), Some("10.9.0.0/30")).expect("first");
        assert_eq!(first.ip(), Ipv4Addr::new(10, 9, 0, 2));
        // .1 is the gateway, .0 and .3 network and broadcast: the range is full.
        let full = IpLease::acquire(dir.path(), Some("10.9.0.0/30"));
        assert!(matches!(full, Err(NetworkError::AddressesExhausted { .. })), "{full:?}");
        drop(first);
        assert!(!dir.path().join("10.9.0.2").exists(), "the lease file is removed");
        let again = IpLease::acquire(dir.path(), Some("10.9.0.0/30")).expect("again");
        assert_eq!(again.ip(), Ipv4Addr::new(10, 9, 0, 2));
    }

    #[test]
    fn ranges_are_used_from_the_top_and_a_missing_range_uses_the_fallback() {
        let dir = tempfile::tempdir().expect("temp dir");
        let a = IpLease::acquire(dir.path(), Some("10.244.1.0/24")).expect("a");
        let b = IpLease::acquire(dir.path(), Some("10.244.1.0/24")).expect("b");
        assert_eq!((a.ip(), b.ip()), (Ipv4Addr::new(10, 244, 1, 254), Ipv4Addr::new(10, 244, 1, 253)));
        let c = IpLease::acquire(dir.path(), None).expect("fallback");
        assert_eq!(c.ip(), Ipv4Addr::new(10, 255, 255, 254));
        let d = IpLease::acquire(dir.path(), Some("fd00::/64")).expect("not IPv4");
        assert_eq!(d.ip(), Ipv4Addr::new(10, 255, 255, 253));
    }
}
