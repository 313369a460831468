//! How real pods are networked: each pod in its own network namespace with a veth pair
//! to the host (its IP real and reachable from the host, every Service's ClusterIP and
//! the cluster DNS reachable from inside), or, where this machine cannot make
//! namespaces, on the host network.
//!
//! A namespaced sandbox is a holder process ([`holder`]), a host-wide IP lease
//! ([`leases`]), a veth pair with its routes ([`links`]), the `kubernetes` Service's
//! proxy ([`service_proxy`]), the other Services' TCP and UDP ports ([`service_ports`],
//! [`service_udp_proxy`]) and the
//! cluster DNS ([`dns`]), the last two reading the kubelet's table of Services
//! ([`service_table`], followed by [`service_watch`]); each part undoes itself when
//! dropped, so a sandbox leaks
//! nothing even when its owner forgets it, and a crash of the whole process leaves
//! nothing either (the holder dies with it, the kernel drops the namespace, the veth pair
//! and the lock).

#[cfg(target_os = "linux")]
mod dns;
#[cfg(target_os = "linux")]
mod holder;
#[cfg(target_os = "linux")]
mod leases;
#[cfg(target_os = "linux")]
mod links;
#[cfg(target_os = "linux")]
mod service_ports;
#[cfg(target_os = "linux")]
mod service_proxy;
#[cfg(target_os = "linux")]
mod service_table;
#[cfg(target_os = "linux")]
mod service_udp_proxy;
#[cfg(target_os = "linux")]
mod service_watch;
#[cfg(all(test, target_os = "linux"))]
mod tests;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// Where host-wide pod IP leases are kept (see [`leases`]).
const LEASE_DIR: &str = "/run/opkit/pod-ips";
/// The `kubernetes` Service's ClusterIP.
#[cfg(target_os = "linux")]
const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
/// The `kube-dns` Service's ClusterIP (kubeadm's and kind's), where pods reach the
/// cluster DNS.
pub(crate) const CLUSTER_DNS_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
/// The `kubernetes` Service's ClusterIP and port, as pods in a namespace reach it.
#[cfg(target_os = "linux")]
pub(crate) const KUBERNETES_SERVICE: SocketAddr = SocketAddr::new(IpAddr::V4(KUBERNETES_SERVICE_IP), 443);

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
#[cfg_attr(not(unix), allow(dead_code))] // used only by the unix-only real-pod runtime
pub(crate) enum NetworkError {
    /// A step of setting up the sandbox failed.
    #[error("pod network: {0}")]
    Setup(String),
    /// A system call or file operation of a step failed.
    #[error("pod network: {step}: {source}")]
    Io {
        /// What was being done.
        step: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A command (`ip`) failed.
    #[error("pod network: `{command}` failed: {message}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status and error output, or why it could not run.
        message: String,
    },
    /// Every address of the node's pod range is leased on this host.
    #[error("pod network: no free pod IP in {range}: every address is in use on this host")]
    AddressesExhausted {
        /// The range, e.g. `10.244.1.0/24`.
        range: String,
    },
}

/// The pod networks of one kubelet.
pub(crate) struct PodNetworks {
    mode: NetworkMode,
    /// Why namespaces are not used, when they were asked for or probed and failed.
    fallback_reason: Option<String>,
    api_server: SocketAddr,
    /// The client the Services are followed with (none: only the `kubernetes` Service).
    services_client: Option<kube::Client>,
    /// The Services, followed from the first namespaced sandbox on.
    #[cfg(target_os = "linux")]
    services: std::sync::OnceLock<service_watch::ServiceWatch>,
}

impl std::fmt::Debug for PodNetworks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodNetworks")
            .field("mode", &self.mode)
            .field("fallback_reason", &self.fallback_reason)
            .field("api_server", &self.api_server)
            .field("follows_services", &self.services_client.is_some())
            .finish()
    }
}

impl PodNetworks {
    /// Pod networks for a kubelet whose API server listens on `api_server` (a loopback
    /// address). `requested` `None` picks namespaces where this machine can make them;
    /// namespaces that cannot be made (`None` or `Some(Namespaces)`) fall back to the
    /// host network, and [`PodNetworks::fallback_reason`] says why. Whether they can is
    /// probed once per process, by making and destroying a sandbox.
    pub(crate) fn new(requested: Option<NetworkMode>, api_server: SocketAddr) -> PodNetworks {
        PodNetworks::choose(requested, api_server, namespaces_available)
    }

    /// Picks the mode, asking `namespaces_work` (a probe) unless the host network is
    /// asked for.
    fn choose(
        requested: Option<NetworkMode>,
        api_server: SocketAddr,
        namespaces_work: impl FnOnce() -> Result<(), String>,
    ) -> PodNetworks {
        let (mode, fallback_reason) = match requested {
            Some(NetworkMode::Host) => (NetworkMode::Host, None),
            None | Some(NetworkMode::Namespaces) => match namespaces_work() {
                Ok(()) => (NetworkMode::Namespaces, None),
                Err(reason) => (NetworkMode::Host, Some(reason)),
            },
        };
        PodNetworks {
            mode,
            fallback_reason,
            api_server,
            services_client: None,
            #[cfg(target_os = "linux")]
            services: std::sync::OnceLock::new(),
        }
    }

    /// These networks with every Service and the cluster DNS served to namespaced pods,
    /// following the cluster's Services with `client` (which may list and watch Services
    /// and EndpointSlices).
    pub(crate) fn with_services(mut self, client: kube::Client) -> PodNetworks {
        self.services_client = Some(client);
        self
    }

    /// The mode in use.
    pub(crate) fn mode(&self) -> NetworkMode {
        self.mode
    }

    /// Why network namespaces are not in use, if they were wanted.
    pub(crate) fn fallback_reason(&self) -> Option<&str> {
        self.fallback_reason.as_deref()
    }

    /// The sandbox of a `hostNetwork` pod, whatever the mode: the host's network, the API
    /// server at its own address.
    pub(crate) fn host_network(&self) -> PodSandbox {
        PodSandbox::host(self.api_server)
    }

    /// Makes the network sandbox of the pod `pod_uid`, whose hostname is `hostname`, on
    /// a node whose pod range is `pod_cidr`.
    pub(crate) async fn create(
        &self,
        pod_uid: &str,
        hostname: &str,
        pod_cidr: Option<&str>,
    ) -> Result<PodSandbox, NetworkError> {
        match self.mode {
            NetworkMode::Host => Ok(self.host_network()),
            #[cfg(target_os = "linux")]
            NetworkMode::Namespaces => {
                let tables = self.services_client.as_ref().map(|client| {
                    self.services.get_or_init(|| service_watch::ServiceWatch::start(client.clone())).tables()
                });
                let namespaced = NamespacedSandbox::create(hostname, pod_cidr, self.api_server, tables).await?;
                tracing::debug!(pod = pod_uid, ip = %namespaced.lease.ip(), link = namespaced.link.name(), "pod sandbox made");
                Ok(PodSandbox {
                    ip: IpAddr::V4(namespaced.lease.ip()),
                    netns: Some(namespaced.holder.netns_path()),
                    api_server: KUBERNETES_SERVICE,
                    namespaced: Some(namespaced),
                })
            }
            #[cfg(not(target_os = "linux"))]
            NetworkMode::Namespaces => {
                let _ = (pod_uid, hostname, pod_cidr);
                Err(NetworkError::Setup("network namespaces need Linux".to_string()))
            }
        }
    }
}

/// One pod's network: its IP, and the namespace its processes enter.
#[derive(Debug)]
pub(crate) struct PodSandbox {
    ip: IpAddr,
    netns: Option<PathBuf>,
    api_server: SocketAddr,
    /// The namespace, veth pair, lease and proxy (none on the host network).
    #[cfg(target_os = "linux")]
    namespaced: Option<NamespacedSandbox>,
}

impl PodSandbox {
    /// A pod on the host network.
    fn host(api_server: SocketAddr) -> PodSandbox {
        PodSandbox {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            netns: None,
            api_server,
            #[cfg(target_os = "linux")]
            namespaced: None,
        }
    }

    /// The pod's IP (the host's loopback on the host network).
    pub(crate) fn ip(&self) -> IpAddr {
        self.ip
    }

    /// The network namespace to enter (`/proc/<pid>/ns/net`), `None` on the host network.
    pub(crate) fn netns(&self) -> Option<&Path> {
        self.netns.as_deref()
    }

    /// The cluster DNS's address for this pod's `resolv.conf`, `None` when none serves
    /// it (the host network, or networks without Services).
    pub(crate) fn cluster_dns(&self) -> Option<IpAddr> {
        #[cfg(target_os = "linux")]
        if self.namespaced.as_ref().is_some_and(|n| n.dns.is_some()) {
            return Some(IpAddr::V4(CLUSTER_DNS_IP));
        }
        None
    }

    /// Where the pod's processes reach the API server: the `kubernetes` Service's
    /// ClusterIP and port inside a namespace, the server's own address on the host
    /// network.
    pub(crate) fn api_server(&self) -> SocketAddr {
        self.api_server
    }

    /// The host end of the pod's veth pair (`opk` and 12 hex digits), `None` on the host
    /// network.
    #[cfg(test)]
    pub(crate) fn host_interface(&self) -> Option<&str> {
        self.namespaced.as_ref().map(|n| n.link.name())
    }

    /// Makes `cmd` start inside this sandbox: in its network namespace, its UTS
    /// namespace (so `hostname` is the pod's) and its IPC namespace (shared by the pod's
    /// containers). Nothing changes on the host network.
    pub(crate) fn enter(&self, cmd: &mut tokio::process::Command) {
        #[cfg(target_os = "linux")]
        if let Some(namespaced) = &self.namespaced {
            namespaced.holder.enter(cmd.as_std_mut());
        }
        #[cfg(not(target_os = "linux"))]
        let _ = cmd;
    }

    /// Removes the sandbox (its namespace, veth pair and address). Dropping a sandbox
    /// does the same, blocking the thread for the few milliseconds it takes.
    pub(crate) async fn destroy(self) {
        #[cfg(target_os = "linux")]
        if let Some(namespaced) = self.namespaced {
            // The `ip` run and the holder's reaping block: off the runtime's threads. If
            // the runtime is shutting down the closure is dropped, which cleans up too.
            let _ = tokio::task::spawn_blocking(move || drop(namespaced)).await;
        }
    }
}

/// The parts of a namespaced sandbox. Fields drop in order: the DNS server and proxies
/// stop, the veth pair goes, the holder (and with it the namespaces) dies, and the
/// address is released last, when nothing uses it any more.
#[cfg(target_os = "linux")]
#[derive(Debug)]
struct NamespacedSandbox {
    dns: Option<dns::DnsServer>,
    _ports: Option<service_ports::ServicePorts>,
    _proxy: service_proxy::ServiceProxy,
    link: links::HostLink,
    holder: holder::Holder,
    lease: leases::IpLease,
}

#[cfg(target_os = "linux")]
impl NamespacedSandbox {
    /// Makes a sandbox whose `kubernetes` Service forwards to `api_server` and, given
    /// `tables`, serving the other Services and the cluster DNS.
    async fn create(
        hostname: &str,
        pod_cidr: Option<&str>,
        api_server: SocketAddr,
        tables: Option<service_watch::Tables>,
    ) -> Result<NamespacedSandbox, NetworkError> {
        let (hostname, pod_cidr) = (hostname.to_string(), pod_cidr.map(str::to_string));
        // Starting processes and waiting for them blocks: off the runtime's threads.
        let (link, holder, lease) =
            tokio::task::spawn_blocking(move || make_network(Path::new(LEASE_DIR), &hostname, pod_cidr.as_deref()))
                .await
                .map_err(|e| NetworkError::Setup(format!("making the sandbox: {e}")))??;
        let upstream = service_proxy::Upstream::Fixed(api_server);
        let port = (service_table::Protocol::Tcp, KUBERNETES_SERVICE);
        let proxy = service_proxy::ServiceProxy::start(link.name(), port, upstream)?;
        let (dns, ports) = match tables {
            Some(tables) => {
                let upstreams = std::sync::Arc::new(dns::host_nameservers());
                let dns = dns::DnsServer::start(link.name(), CLUSTER_DNS_IP, tables.clone(), upstreams)?;
                let own = [KUBERNETES_SERVICE_IP, CLUSTER_DNS_IP];
                (Some(dns), Some(service_ports::ServicePorts::start(link.name(), tables, &own).await))
            }
            None => (None, None),
        };
        Ok(NamespacedSandbox { dns, _ports: ports, _proxy: proxy, link, holder, lease })
    }
}

/// The blocking part of a sandbox: lease, holder, veth pair.
#[cfg(target_os = "linux")]
fn make_network(
    lease_dir: &Path,
    hostname: &str,
    pod_cidr: Option<&str>,
) -> Result<(links::HostLink, holder::Holder, leases::IpLease), NetworkError> {
    let lease = leases::IpLease::acquire(lease_dir, pod_cidr)?;
    let holder = holder::Holder::start(hostname)?;
    let link = links::HostLink::create(&holder, lease.ip(), &[KUBERNETES_SERVICE_IP, CLUSTER_DNS_IP])?;
    Ok((link, holder, lease))
}

/// Whether this process can make namespaced sandboxes, probed once per process; the
/// error says why not.
fn namespaces_available() -> Result<(), String> {
    static PROBE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    PROBE.get_or_init(|| probe(Path::new(LEASE_DIR))).clone()
}

/// Makes a sandbox (leasing its address in `lease_dir`) without the Service proxy (which
/// needs a runtime), checks that the host reaches a listener at the pod's IP and that
/// the ClusterIP can be bound on the pod's host end, and removes it.
#[cfg(target_os = "linux")]
fn probe(lease_dir: &Path) -> Result<(), String> {
    let (link, holder, lease) = make_network(lease_dir, "opkit-probe", None).map_err(|e| e.to_string())?;
    let service = service_proxy::bind_on_device(link.name(), KUBERNETES_SERVICE).map_err(|e| e.to_string())?;
    let pod = holder.bind_inside(SocketAddr::new(IpAddr::V4(lease.ip()), 0)).map_err(|e| e.to_string())?;
    let target = pod.local_addr().map_err(|e| format!("pod network: reading the probe's address: {e}"))?;
    std::net::TcpStream::connect_timeout(&target, std::time::Duration::from_secs(2))
        .map_err(|e| format!("pod network: the host cannot reach a pod at {target}: {e}"))?;
    drop((service, pod, link, holder, lease));
    Ok(())
}

/// Namespaces are a Linux feature.
#[cfg(not(target_os = "linux"))]
fn probe(_lease_dir: &Path) -> Result<(), String> {
    Err("network namespaces need Linux".to_string())
}
