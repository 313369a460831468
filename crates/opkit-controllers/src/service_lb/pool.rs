//! The address pool LoadBalancer Services take their ingress IP from (`opkit cluster start
//! --lb-range`), written as an inclusive range `FIRST-LAST` or as a CIDR, like MetalLB's
//! and kind's cloud provider's pools.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use opkit_apimachinery::{Ipv4Range, Ipv4RangeError};

/// An inclusive range of IPv4 addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadBalancerPool {
    first: Ipv4Addr,
    last: Ipv4Addr,
}

/// Why a pool could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PoolError {
    /// An address is not an IPv4 address.
    #[error("{0:?} is not an IPv4 address (only IPv4 pools are supported)")]
    NotIpv4(String),
    /// The range ends before it starts.
    #[error("the range {first}-{last} ends before it starts")]
    Reversed {
        /// The first address given.
        first: Ipv4Addr,
        /// The last address given.
        last: Ipv4Addr,
    },
    /// The CIDR prefix length is not a number from 0 to 32.
    #[error("{0:?} is not a prefix length from 0 to 32")]
    BadPrefix(String),
    /// Neither `FIRST-LAST` nor a CIDR.
    #[error(
        "{0:?} is neither a range FIRST-LAST (e.g. 172.18.255.200-172.18.255.250) nor a CIDR (e.g. 172.18.255.0/28)"
    )]
    Malformed(String),
}

impl LoadBalancerPool {
    /// The pool from `first` to `last`, both included.
    pub fn new(first: Ipv4Addr, last: Ipv4Addr) -> Result<Self, PoolError> {
        if u32::from(first) > u32::from(last) {
            return Err(PoolError::Reversed { first, last });
        }
        Ok(LoadBalancerPool { first, last })
    }

    /// Whether `ip` is in the pool.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        (u32::from(self.first)..=u32::from(self.last)).contains(&u32::from(ip))
    }

    /// Every address of the pool, in order (and from either end).
    pub fn addresses(&self) -> impl DoubleEndedIterator<Item = Ipv4Addr> + use<> {
        (u32::from(self.first)..=u32::from(self.last)).map(Ipv4Addr::from)
    }
}

fn ipv4(s: &str) -> Result<Ipv4Addr, PoolError> {
    s.trim().parse().map_err(|_| PoolError::NotIpv4(s.trim().to_string()))
}

impl FromStr for LoadBalancerPool {
    type Err = PoolError;

    /// Reads `FIRST-LAST` or `ADDRESS/PREFIX`. A CIDR of 30 bits or fewer leaves out its
    /// network and broadcast addresses.
    fn from_str(s: &str) -> Result<Self, PoolError> {
        if let Some((first, last)) = s.split_once('-') {
            return LoadBalancerPool::new(ipv4(first)?, ipv4(last)?);
        }
        let cidr: Ipv4Range = s.parse().map_err(|e| match e {
            Ipv4RangeError::Malformed(text) => PoolError::Malformed(text),
            Ipv4RangeError::NotIpv4(text) => PoolError::NotIpv4(text),
            Ipv4RangeError::BadPrefix(text) => PoolError::BadPrefix(text),
        })?;
        let (first, last) = cidr.host_bounds();
        LoadBalancerPool::new(first, last)
    }
}

impl fmt::Display for LoadBalancerPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_cidrs() {
        let range: LoadBalancerPool = "172.18.255.200-172.18.255.202".parse().expect("range");
        assert_eq!(
            range.addresses().map(|a| a.to_string()).collect::<Vec<_>>(),
            ["172.18.255.200", "172.18.255.201", "172.18.255.202"]
        );
        assert!(range.contains("172.18.255.201".parse().expect("ip")));
        assert!(!range.contains("172.18.255.203".parse().expect("ip")));
        let cidr: LoadBalancerPool = "10.9.0.0/30".parse().expect("cidr");
        assert_eq!(cidr.to_string(), "10.9.0.1-10.9.0.2");
        let one: LoadBalancerPool = "10.9.0.7/32".parse().expect("one address");
        assert_eq!(one.addresses().count(), 1);
    }

    #[test]
    fn bad_pools_say_why() {
        assert_eq!(
            "10.0.0.9-10.0.0.1".parse::<LoadBalancerPool>().map_err(|e| e.to_string()),
            Err("the range 10.0.0.9-10.0.0.1 ends before it starts".into())
        );
        assert!(matches!("fd00::1-fd00::9".parse::<LoadBalancerPool>(), Err(PoolError::NotIpv4(_))));
        assert!(matches!("10.0.0.0/33".parse::<LoadBalancerPool>(), Err(PoolError::BadPrefix(_))));
        assert!(matches!("somewhere".parse::<LoadBalancerPool>(), Err(PoolError::Malformed(_))));
    }
}
