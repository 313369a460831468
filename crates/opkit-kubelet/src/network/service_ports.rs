//! One pod's Service ports: a task that follows the latest [`ServiceTable`] and keeps, on
//! the pod's host end, an address for every ClusterIP and a [`ServiceProxy`] for every
//! TCP and UDP Service port with a ready endpoint (those of the `kubernetes` and `kube-dns`
//! Services are the sandbox's own, made with the link). Services added while the pod
//! runs get their address and listener, removed ones lose them; a port whose last
//! endpoint goes loses its listener, so its connections (or datagrams) are refused, and gets it back
//! with its first; other endpoint changes need nothing here, the proxies read the table
//! themselves. Dropping the handle stops the task and its proxies; the addresses go
//! with the link.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::AbortHandle;

use super::links;
use super::service_proxy::{ServiceProxy, Upstream};
use super::service_table::{ServicePort, ServiceTable};
use super::service_watch::Tables;

/// How long a new sandbox waits for the kubelet's first table of Services (listed in
/// milliseconds; bounded so that a kubelet whose Service watch cannot list, e.g. for
/// want of RBAC, still starts pods, whose Service ports then come with the first table).
const FIRST_TABLE_WAIT: Duration = Duration::from_secs(3);

/// The running task; dropping it stops the task and its proxies.
#[derive(Debug)]
pub(super) struct ServicePorts {
    task: AbortHandle,
}

impl ServicePorts {
    /// Serves, on `device`, the Service ports of `tables` but those at `own_ips`; the
    /// first table's ports are up before this returns.
    pub(super) async fn start(device: &str, mut tables: Tables, own_ips: &[Ipv4Addr]) -> ServicePorts {
        let mut served = Served { device: device.to_string(), own: own_ips.to_vec(), ..Default::default() };
        let first = tokio::time::timeout(FIRST_TABLE_WAIT, tables.wait_for(Option::is_some)).await.map(|r| r.is_ok());
        if first != Ok(true) {
            tracing::warn!(device, "no table of Services yet: the pod starts without Service ports");
        }
        served.sync(&mut tables).await;
        let task = tokio::spawn(async move {
            while tables.changed().await.is_ok() {
                served.sync(&mut tables).await;
            }
        })
        .abort_handle();
        ServicePorts { task }
    }
}

impl Drop for ServicePorts {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What is served on one host end.
#[derive(Debug, Default)]
struct Served {
    device: String,
    /// The sandbox's own Service addresses, left alone.
    own: Vec<Ipv4Addr>,
    addresses: BTreeSet<Ipv4Addr>,
    proxies: BTreeMap<ServicePort, ServiceProxy>,
}

impl Served {
    /// Makes the addresses and proxies those of the latest table.
    async fn sync(&mut self, tables: &mut Tables) {
        let Some(table): Option<Arc<ServiceTable>> = tables.borrow_and_update().clone() else { return };
        let all: BTreeSet<ServicePort> =
            table.ports().filter(|(_, p)| !matches!(p.ip(), IpAddr::V4(ip) if self.own.contains(&ip))).collect();
        let ips: BTreeSet<Ipv4Addr> = all
            .iter()
            .filter_map(|(_, p)| match p.ip() {
                IpAddr::V4(ip) => Some(ip),
                IpAddr::V6(_) => None,
            })
            .collect();
        // A port without ready endpoints has no listener: the kernel refuses its
        // connections (and answers its datagrams port unreachable), as kube-proxy's
        // REJECT rule does.
        let ports: BTreeSet<ServicePort> =
            all.into_iter().filter(|p| table.endpoints(*p).is_some_and(|e| !e.is_empty())).collect();
        self.proxies.retain(|port, _| ports.contains(port));
        let batch: String = self
            .addresses
            .difference(&ips)
            .map(|ip| format!("addr del {ip}/32 dev {}\n", self.device))
            .chain(ips.difference(&self.addresses).map(|ip| format!("addr add {ip}/32 dev {}\n", self.device)))
            .collect();
        if !batch.is_empty() {
            // `-force`: one failing line (an address already there) does not stop the rest.
            let mut ip = Command::new("ip");
            ip.arg("-force");
            let result = tokio::task::spawn_blocking(move || links::run_batch(ip, &batch)).await;
            if let Err(e) = result.map_err(|e| e.to_string()).and_then(|r| r.map_err(|e| e.to_string())) {
                tracing::warn!(device = %self.device, error = %e, "changing a pod's Service addresses");
            }
            self.addresses = ips;
        }
        for port in ports {
            let up = matches!(port.1.ip(), IpAddr::V4(ip) if self.addresses.contains(&ip));
            if !up || self.proxies.contains_key(&port) {
                continue;
            }
            match ServiceProxy::start(&self.device, port, Upstream::Endpoints(tables.clone())) {
                Ok(proxy) => {
                    self.proxies.insert(port, proxy);
                }
                Err(e) => {
                    tracing::warn!(protocol = ?port.0, port = %port.1, error = %e, "serving a Service port to a pod")
                }
            }
        }
    }
}
