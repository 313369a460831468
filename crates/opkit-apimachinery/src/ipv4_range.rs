//! IPv4 CIDR ranges (`"10.96.0.0/12"`), parsed once for all of opkit: the API server's
//! Service cluster-IP range, the kubelet's pod-IP leases and the LoadBalancer address pool.
//!
//! A range is kept as its network address and prefix length; host bits given in the text
//! are masked off, as Go's `net.ParseCIDR` does. Its *hosts* are every address but the
//! network and broadcast addresses when it has more than two (/31 and /32 keep all).

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 CIDR: a network address and a prefix length from 0 to 32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Range {
    network: Ipv4Addr,
    prefix: u8,
}

/// Why a text is not an IPv4 CIDR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Ipv4RangeError {
    /// The text has no `/PREFIX`.
    #[error("{0:?} is not a CIDR ADDRESS/PREFIX (e.g. 10.96.0.0/12)")]
    Malformed(String),
    /// The address part is not an IPv4 address.
    #[error("{0:?} is not an IPv4 address")]
    NotIpv4(String),
    /// The prefix length is not a number from 0 to 32.
    #[error("{0:?} is not a prefix length from 0 to 32")]
    BadPrefix(String),
}

impl Ipv4Range {
    /// The range of `address/prefix`, with the host bits of `address` cleared; `None` when
    /// `prefix` is over 32.
    pub const fn new(address: Ipv4Addr, prefix: u8) -> Option<Ipv4Range> {
        if prefix > 32 {
            return None;
        }
        let network = Ipv4Addr::from_bits(address.to_bits() & mask(prefix));
        Some(Ipv4Range { network, prefix })
    }

    /// The network (first) address.
    pub const fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The prefix length.
    pub const fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The broadcast (last) address.
    pub const fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from_bits(self.network.to_bits() | !mask(self.prefix))
    }

    /// How many addresses the range has, network and broadcast included.
    pub const fn size(&self) -> u64 {
        1u64 << (32 - self.prefix as u32)
    }

    /// Whether `ip` lies in the range (network and broadcast addresses included).
    pub const fn contains(&self, ip: Ipv4Addr) -> bool {
        ip.to_bits() & mask(self.prefix) == self.network.to_bits()
    }

    /// The first and last host address: without the network and broadcast addresses
    /// when the range has more than two addresses.
    pub const fn host_bounds(&self) -> (Ipv4Addr, Ipv4Addr) {
        let (network, broadcast) = (self.network.to_bits(), self.broadcast().to_bits());
        if self.prefix <= 30 {
            (Ipv4Addr::from_bits(network + 1), Ipv4Addr::from_bits(broadcast - 1))
        } else {
            (Ipv4Addr::from_bits(network), Ipv4Addr::from_bits(broadcast))
        }
    }

    /// How many host addresses the range has.
    pub const fn host_count(&self) -> u64 {
        let (first, last) = self.host_bounds();
        (last.to_bits() - first.to_bits()) as u64 + 1
    }

    /// The `n`th host address (from 0), if the range has that many.
    pub fn nth_host(&self, n: u64) -> Option<Ipv4Addr> {
        let first = u64::from(self.host_bounds().0.to_bits());
        (n < self.host_count()).then(|| Ipv4Addr::from_bits((first + n) as u32))
    }

    /// Every host address, in order (and from either end).
    pub fn hosts(&self) -> impl DoubleEndedIterator<Item = Ipv4Addr> + use<> {
        let (first, last) = self.host_bounds();
        (first.to_bits()..=last.to_bits()).map(Ipv4Addr::from_bits)
    }
}

/// The netmask of a prefix length (at most 32).
const fn mask(prefix: u8) -> u32 {
    if prefix == 0 { 0 } else { u32::MAX << (32 - prefix as u32) }
}

impl FromStr for Ipv4Range {
    type Err = Ipv4RangeError;

    /// Reads `ADDRESS/PREFIX`, with surrounding spaces allowed around either part.
    fn from_str(s: &str) -> Result<Self, Ipv4RangeError> {
        let Some((addr, prefix)) = s.split_once('/') else {
            return Err(Ipv4RangeError::Malformed(s.to_string()));
        };
        let address: Ipv4Addr = addr.trim().parse().map_err(|_| Ipv4RangeError::NotIpv4(addr.trim().to_string()))?;
        let prefix = prefix.trim();
        // Only plain decimal digits: `u8::from_str` would also take a leading `+`.
        let bits = Some(prefix)
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u8>().ok());
        bits.and_then(|bits| Ipv4Range::new(address, bits)).ok_or_else(|| Ipv4RangeError::BadPrefix(prefix.to_string()))
    }
}

impl fmt::Display for Ipv4Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(s: &str) -> Ipv4Range {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn a_slash_24_has_254_hosts_and_masks_host_bits() {
        let r = range("10.244.1.77/24");
        assert_eq!(r.to_string(), "10.244.1.0/24");
        assert_eq!((r.network(), r.broadcast()), (ip("10.244.1.0"), ip("10.244.1.255")));
        assert_eq!(r.size(), 256);
        assert_eq!(r.host_count(), 254);
        assert_eq!(r.hosts().next(), Some(ip("10.244.1.1")));
        assert_eq!(r.hosts().next_back(), Some(ip("10.244.1.254")));
        assert_eq!(r.nth_host(0), Some(ip("10.244.1.1")));
        assert_eq!(r.nth_host(253), Some(ip("10.244.1.254")));
        assert_eq!(r.nth_host(254), None);
        assert!(r.contains(ip("10.244.1.0")) && r.contains(ip("10.244.1.255")));
        assert!(!r.contains(ip("10.244.2.0")) && !r.contains(ip("10.244.0.255")));
    }

    #[test]
    fn edges_slash_30_31_32_and_0() {
        let thirty = range("10.9.0.0/30");
        assert_eq!(thirty.hosts().collect::<Vec<_>>(), [ip("10.9.0.1"), ip("10.9.0.2")]);
        let point_to_point = range("10.9.0.4/31");
        assert_eq!(point_to_point.hosts().collect::<Vec<_>>(), [ip("10.9.0.4"), ip("10.9.0.5")]);
        let one = range("10.9.0.7/32");
        assert_eq!(one.hosts().collect::<Vec<_>>(), [ip("10.9.0.7")]);
        assert_eq!((one.size(), one.host_count(), one.nth_host(1)), (1, 1, None));
        assert!(one.contains(ip("10.9.0.7")) && !one.contains(ip("10.9.0.6")));
        let all = range("1.2.3.4/0");
        assert_eq!(all.to_string(), "0.0.0.0/0");
        assert_eq!((all.size(), all.host_count()), (1 << 32, (1 << 32) - 2));
        assert_eq!(all.nth_host(0), Some(ip("0.0.0.1")));
        assert_eq!(all.hosts().next_back(), Some(ip("255.255.255.254")));
        assert!(all.contains(ip("255.255.255.255")));
    }

    #[test]
    fn the_const_constructor_agrees_with_parsing() {
        const SERVICES: Option<Ipv4Range> = Ipv4Range::new(Ipv4Addr::new(10, 96, 0, 0), 12);
        assert_eq!(SERVICES, Some(range("10.96.0.0/12")));
        assert_eq!(Ipv4Range::new(Ipv4Addr::LOCALHOST, 33), None);
        assert_eq!(range(" 10.96.0.0 / 12 ").broadcast(), ip("10.111.255.255"));
    }

    #[test]
    fn bad_ranges_say_why() {
        let err = |s: &str| s.parse::<Ipv4Range>().expect_err(s);
        assert_eq!(err("10.0.0.0"), Ipv4RangeError::Malformed("10.0.0.0".into()));
        assert_eq!(err(""), Ipv4RangeError::Malformed(String::new()));
        assert_eq!(err("10.0.0.256/8"), Ipv4RangeError::NotIpv4("10.0.0.256".into()));
        assert_eq!(err("10.0.0/8"), Ipv4RangeError::NotIpv4("10.0.0".into()));
        assert_eq!(err("10.0.0.-1/8"), Ipv4RangeError::NotIpv4("10.0.0.-1".into()));
        assert_eq!(err("fd00::/64"), Ipv4RangeError::NotIpv4("fd00::".into()));
        assert_eq!(err("10.0.0.0/33"), Ipv4RangeError::BadPrefix("33".into()));
        assert_eq!(err("10.0.0.0/"), Ipv4RangeError::BadPrefix(String::new()));
        assert_eq!(err("10.0.0.0/+8"), Ipv4RangeError::BadPrefix("+8".into()));
        assert_eq!(err("10.0.0.0/8/8"), Ipv4RangeError::BadPrefix("8/8".into()));
        assert_eq!(err("10.0.0.0/300"), Ipv4RangeError::BadPrefix("300".into()));
        assert_eq!(err("10.0.0.0/33").to_string(), "\"33\" is not a prefix length from 0 to 32");
    }
}
