//! Pod IP allocation: each node hands out addresses from its `spec.podCIDR` (a `/24`,
//! skipping the network, `.1` gateway and broadcast addresses); nodes without one, or
//! whose range is full, use the shared overflow range `10.255.0.0/16`. Addresses are
//! unique among the pods the kubelet runs and are returned when a pod ends.

use std::collections::{BTreeSet, HashMap};

/// Addresses in use, per range.
#[derive(Debug, Default)]
pub(crate) struct IpPool {
    used: HashMap<String, BTreeSet<u32>>,
}

/// The first three octets of a `/24` CIDR such as `10.244.1.0/24`.
fn prefix24(cidr: &str) -> Option<String> {
    let (addr, bits) = cidr.split_once('/')?;
    if bits != "24" {
        return None;
    }
    let octets: Vec<u8> = addr.split('.').map(|o| o.parse().ok()).collect::<Option<_>>()?;
    (octets.len() == 4).then(|| format!("{}.{}.{}", octets[0], octets[1], octets[2]))
}

const OVERFLOW: &str = "10.255";

impl IpPool {
    /// Marks `ip` as used (e.g. found on a running pod after a restart).
    pub(crate) fn reserve(&mut self, ip: &str) {
        if let Some((range, host)) = split(ip) {
            self.used.entry(range).or_default().insert(host);
        }
    }

    /// Allocates an address for a pod on a node with `pod_cidr`.
    pub(crate) fn allocate(&mut self, pod_cidr: Option<&str>) -> Option<String> {
        if let Some(prefix) = pod_cidr.and_then(prefix24) {
            let used = self.used.entry(prefix.clone()).or_default();
            if let Some(host) = (2..=254u32).find(|h| !used.contains(h)) {
                used.insert(host);
                return Some(format!("{prefix}.{host}"));
            }
        }
        let used = self.used.entry(OVERFLOW.to_string()).or_default();
        let host = (2..=65_534u32).find(|h| h % 256 != 0 && h % 256 != 255 && !used.contains(h))?;
        used.insert(host);
        Some(format!("{OVERFLOW}.{}.{}", host / 256, host % 256))
    }

    /// Returns `ip` to the pool.
    pub(crate) fn release(&mut self, ip: &str) {
        if let Some((range, host)) = split(ip)
            && let Some(set) = self.used.get_mut(&range)
        {
            set.remove(&host);
        }
    }
}

/// Splits an address into its range key and host number within it.
fn split(ip: &str) -> Option<(String, u32)> {
    let o: Vec<u32> = ip.split('.').map(|x| x.parse().ok()).collect::<Option<_>>()?;
    if o.len() != 4 {
        return None;
    }
    if format!("{}.{}", o[0], o[1]) == OVERFLOW {
        return Some((OVERFLOW.to_string(), o[2] * 256 + o[3]));
    }
    Some((format!("{}.{}.{}", o[0], o[1], o[2]), o[3]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_unique_addresses_and_reuses_released_ones() {
        let mut p = IpPool::default();
        let a = p.allocate(Some("10.244.1.0/24"));
        let b = p.allocate(Some("10.244.1.0/24"));
        assert_eq!(a.as_deref(), Some("10.244.1.2"));
        assert_eq!(b.as_deref(), Some("10.244.1.3"));
        p.release("10.244.1.2");
        assert_eq!(p.allocate(Some("10.244.1.0/24")).as_deref(), Some("10.244.1.2"));
        p.reserve("10.244.1.4");
        assert_eq!(p.allocate(Some("10.244.1.0/24")).as_deref(), Some("10.244.1.5"));
    }

    #[test]
    fn overflows_when_full_or_unknown() {
        let mut p = IpPool::default();
        assert_eq!(p.allocate(None).as_deref(), Some("10.255.0.2"));
        for _ in 0..253 {
            let _ = p.allocate(Some("10.244.9.0/24"));
        }
        assert_eq!(p.allocate(Some("10.244.9.0/24")).as_deref(), Some("10.255.0.3"));
    }
}
