//! The cluster's Services as pods reach them, built from Services, EndpointSlices and
//! the Nodes' addresses the way kube-proxy and kube's DNS read them: for every TCP and UDP
//! port of a Service with a ClusterIP, the ready endpoints (address and the slice port of the same
//! name) behind `ClusterIP:port`, behind `NodeIP:nodePort` on every node (NodePort and
//! LoadBalancer Services) and behind `ingressIP:port` (LoadBalancer Services); for
//! every Service name, its ClusterIP or, for a headless Service, its ready endpoints'
//! addresses and hostnames. A table is an immutable snapshot; [`super::service_watch`]
//! publishes a new one on every change.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// The label naming an EndpointSlice's Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A Service's answer to a name lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ServiceAddress {
    /// A Service with a ClusterIP: `<svc>.<ns>.svc` is that address.
    ClusterIp(Ipv4Addr),
    /// A headless Service: its ready endpoints.
    Headless(Vec<NamedEndpoint>),
}

/// A ready endpoint of a headless Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NamedEndpoint {
    /// Its address.
    pub ip: Ipv4Addr,
    /// Its hostname (`<hostname>.<svc>.<ns>.svc`), when the endpoint has one.
    pub hostname: Option<String>,
}

impl NamedEndpoint {
    /// Its name under the Service: the hostname, else the address with dashes
    /// (`10-244-0-9`), as CoreDNS names an endpoint without one.
    pub(super) fn name(&self) -> String {
        self.hostname.clone().unwrap_or_else(|| dashed(self.ip))
    }
}

/// `ip` with dashes for dots, as DNS names of pods and endpoints carry it.
pub(super) fn dashed(ip: Ipv4Addr) -> String {
    ip.to_string().replace('.', "-")
}

/// The transport of a Service port that pods reach through the proxies (SCTP is not
/// served).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Protocol {
    /// `TCP`, a Service port's default.
    Tcp,
    /// `UDP`.
    Udp,
}

impl Protocol {
    /// The protocol a Service or EndpointSlice port names (`None` is TCP, the default).
    fn of(name: Option<&str>) -> Option<Protocol> {
        match name.unwrap_or("TCP") {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            _ => None,
        }
    }
}

/// A Service port as pods reach it: its transport and `ClusterIP:port` (or
/// `NodeIP:nodePort`, or `ingressIP:port`).
pub(super) type ServicePort = (Protocol, SocketAddr);

/// One snapshot of the cluster's Services.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct ServiceTable {
    /// Every TCP and UDP Service port → its ready endpoints.
    ports: BTreeMap<ServicePort, Vec<SocketAddr>>,
    /// `(namespace, name)` → the Service's address.
    names: BTreeMap<(String, String), ServiceAddress>,
    /// `(namespace, name, port name, protocol)` of every named port of a Service
    /// (protocol in lower case, as SRV names carry it) → the port.
    named_ports: BTreeMap<(String, String, String, String), u16>,
}

impl ServiceTable {
    /// The table of `services` and `slices`, with node ports on `node_ips`.
    pub(super) fn build<'a>(
        services: impl IntoIterator<Item = &'a Service>,
        slices: impl IntoIterator<Item = &'a EndpointSlice>,
        node_ips: &[Ipv4Addr],
    ) -> ServiceTable {
        let mut by_service: BTreeMap<(&str, &str), Vec<&EndpointSlice>> = BTreeMap::new();
        for slice in slices {
            let namespace = slice.metadata.namespace.as_deref().unwrap_or_default();
            if let Some(service) = slice.metadata.labels.as_ref().and_then(|l| l.get(SERVICE_NAME_LABEL)) {
                by_service.entry((namespace, service.as_str())).or_default().push(slice);
            }
        }
        let mut table = ServiceTable::default();
        for service in services {
            let (Some(namespace), Some(name)) = (&service.metadata.namespace, &service.metadata.name) else {
                continue;
            };
            let own = by_service.get(&(namespace.as_str(), name.as_str())).map(Vec::as_slice).unwrap_or_default();
            table.add(namespace, name, service, own, node_ips);
        }
        table
    }

    /// Adds one Service, whose slices are `slices`.
    fn add(
        &mut self,
        namespace: &str,
        name: &str,
        service: &Service,
        slices: &[&EndpointSlice],
        node_ips: &[Ipv4Addr],
    ) {
        let Some(spec) = &service.spec else { return };
        let with_node_ports = matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer"));
        let ingress: Vec<Ipv4Addr> = match spec.type_.as_deref() {
            Some("LoadBalancer") => service
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref()?.ingress.as_ref())
                .into_iter()
                .flatten()
                .filter_map(|i| i.ip.as_deref()?.parse().ok())
                .collect(),
            _ => Vec::new(),
        };
        if spec.type_.as_deref() == Some("ExternalName") {
            return;
        }
        for port in spec.ports.iter().flatten() {
            if let (Some(port_name), Ok(number)) =
                (port.name.as_deref().filter(|n| !n.is_empty()), u16::try_from(port.port))
            {
                let protocol = port.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase();
                let key = (namespace.to_string(), name.to_string(), port_name.to_string(), protocol);
                self.named_ports.insert(key, number);
            }
        }
        let key = (namespace.to_string(), name.to_string());
        let cluster_ip = spec.cluster_ip.as_deref().unwrap_or_default();
        if cluster_ip == "None" {
            let endpoints = ready_endpoints(slices).map(|(ip, hostname)| NamedEndpoint { ip, hostname }).collect();
            self.names.insert(key, ServiceAddress::Headless(endpoints));
            return;
        }
        let Ok(ip) = cluster_ip.parse::<Ipv4Addr>() else { return };
        self.names.insert(key, ServiceAddress::ClusterIp(ip));
        for port in spec.ports.iter().flatten() {
            let Some(protocol) = Protocol::of(port.protocol.as_deref()) else { continue };
            let Ok(service_port) = u16::try_from(port.port) else { continue };
            let targets = slices
                .iter()
                .flat_map(|slice| {
                    let target = slice.ports.iter().flatten().find(|p| {
                        p.name.as_deref().unwrap_or_default() == port.name.as_deref().unwrap_or_default()
                            && Protocol::of(p.protocol.as_deref()) == Some(protocol)
                    });
                    let target = target.and_then(|p| p.port).and_then(|p| u16::try_from(p).ok());
                    ready_endpoints(std::slice::from_ref(slice))
                        .filter_map(move |(ip, _)| Some(SocketAddr::new(IpAddr::V4(ip), target?)))
                        .collect::<Vec<_>>()
                })
                .collect::<BTreeSet<_>>();
            let targets: Vec<SocketAddr> = targets.into_iter().collect();
            // As kube-proxy's rules: every node's address at the nodePort, and the load
            // balancer's addresses at the Service's port, lead to the same endpoints.
            let node_port = port.node_port.and_then(|p| u16::try_from(p).ok()).filter(|_| with_node_ports);
            let on_nodes = node_port.into_iter().flat_map(|p| node_ips.iter().map(move |ip| (*ip, p)));
            let on_ingress = ingress.iter().map(|ip| (*ip, service_port));
            for (ip, port) in std::iter::once((ip, service_port)).chain(on_nodes).chain(on_ingress) {
                self.ports.insert((protocol, SocketAddr::new(IpAddr::V4(ip), port)), targets.clone());
            }
        }
    }

    /// Every `ClusterIP:port` of a TCP or UDP Service port (and its `NodeIP:nodePort`
    /// and `ingressIP:port`).
    pub(super) fn ports(&self) -> impl Iterator<Item = ServicePort> + '_ {
        self.ports.keys().copied()
    }

    /// The ready endpoints of the Service port `service`, `None` when no Service has it.
    pub(super) fn endpoints(&self, service: ServicePort) -> Option<&[SocketAddr]> {
        self.ports.get(&service).map(Vec::as_slice)
    }

    /// The port named `port` with `protocol` (lower case) of the Service `name` in
    /// `namespace`.
    pub(super) fn named_port(&self, namespace: &str, name: &str, port: &str, protocol: &str) -> Option<u16> {
        let key = (namespace.to_string(), name.to_string(), port.to_string(), protocol.to_string());
        self.named_ports.get(&key).copied()
    }

    /// The name (`<svc>.<ns>.svc.<domain>`, or `<endpoint>.<svc>.<ns>.svc.<domain>` for a
    /// headless Service's endpoint) whose address is `ip`, as its PTR record gives it.
    pub(super) fn name_of(&self, ip: Ipv4Addr, domain: &str) -> Option<String> {
        self.names.iter().find_map(|((namespace, service), address)| match address {
            ServiceAddress::ClusterIp(own) => (*own == ip).then(|| format!("{service}.{namespace}.svc.{domain}.")),
            ServiceAddress::Headless(endpoints) => endpoints
                .iter()
                .find(|e| e.ip == ip)
                .map(|e| format!("{}.{service}.{namespace}.svc.{domain}.", e.name())),
        })
    }

    /// The address of the Service `name` in `namespace`.
    pub(super) fn address(&self, namespace: &str, name: &str) -> Option<&ServiceAddress> {
        self.names.get(&(namespace.to_string(), name.to_string()))
    }
}

/// The IPv4 addresses (and hostnames) of the endpoints of `slices` that are ready (a
/// missing `ready` counts as ready, as the API says).
fn ready_endpoints<'a>(slices: &'a [&'a EndpointSlice]) -> impl Iterator<Item = (Ipv4Addr, Option<String>)> + 'a {
    slices
        .iter()
        .filter(|s| s.address_type == "IPv4")
        .flat_map(|s| s.endpoints.iter())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .flat_map(|e| e.addresses.iter().filter_map(|a| a.parse().ok()).map(|ip| (ip, e.hostname.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(v: serde_json::Value) -> Service {
        serde_json::from_value(v).expect("service")
    }

    fn slice(v: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(v).expect("slice")
    }

    #[test]
    fn ports_map_to_ready_endpoints_at_the_named_target_port_of_the_same_protocol() {
        let web = service(serde_json::json!({"metadata": {"name": "web", "namespace": "a"},
            "spec": {"clusterIP": "10.96.3.4", "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}]}}));
        let s = slice(serde_json::json!({"metadata": {"name": "web-x", "namespace": "a",
                "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}, {"name": "dns", "port": 5353, "protocol": "UDP"}],
            "endpoints": [{"addresses": ["10.244.0.5"]}, {"addresses": ["10.244.0.6"], "conditions": {"ready": false}}]}));
        let other = slice(serde_json::json!({"metadata": {"name": "web-y", "namespace": "b",
                "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 1}], "endpoints": [{"addresses": ["10.244.0.7"]}]}));
        let table = ServiceTable::build([&web], [&s, &other], &[]);
        let addr = |a: &str| a.parse::<SocketAddr>().expect("addr");
        let (http, dns) = ((Protocol::Tcp, addr("10.96.3.4:80")), (Protocol::Udp, addr("10.96.3.4:53")));
        assert_eq!(table.ports().collect::<Vec<_>>(), [http, dns]);
        assert_eq!(table.endpoints(http), Some(&[addr("10.244.0.5:8080")][..]));
        assert_eq!(table.endpoints(dns), Some(&[addr("10.244.0.5:5353")][..]));
        assert_eq!(table.endpoints((Protocol::Udp, addr("10.96.3.4:80"))), None);
        assert_eq!(table.address("a", "web"), Some(&ServiceAddress::ClusterIp(Ipv4Addr::new(10, 96, 3, 4))));
        assert_eq!(table.address("b", "web"), None);
        assert_eq!(
            (table.named_port("a", "web", "http", "tcp"), table.named_port("a", "web", "dns", "udp")),
            (Some(80), Some(53))
        );
        assert_eq!(table.named_port("a", "web", "http", "udp"), None);
    }

    #[test]
    fn node_ports_and_load_balancer_addresses_lead_to_the_same_endpoints() {
        let web = |type_: &str| {
            service(serde_json::json!({"metadata": {"name": "web", "namespace": "a"},
                "spec": {"type": type_, "clusterIP": "10.96.3.4", "ports": [{"name": "http", "port": 80, "nodePort": 30080}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.2"}]}}}))
        };
        let s = slice(serde_json::json!({"metadata": {"name": "web-x", "namespace": "a",
                "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": ["10.244.0.5"]}]}));
        let nodes = [Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 3)];
        let addr = |a: &str| a.parse::<SocketAddr>().expect("addr");
        let endpoint = [addr("10.244.0.5:8080")];
        let table = ServiceTable::build([&web("LoadBalancer")], [&s], &nodes);
        let tcp = |table: &ServiceTable| -> Vec<SocketAddr> { table.ports().map(|(_, a)| a).collect() };
        let ports = tcp(&table);
        assert_eq!(ports, [addr("10.0.0.2:80"), addr("10.0.0.2:30080"), addr("10.0.0.3:30080"), addr("10.96.3.4:80")]);
        assert!(ports.iter().all(|p| table.endpoints((Protocol::Tcp, *p)) == Some(&endpoint[..])));
        let node_port = ServiceTable::build([&web("NodePort")], [&s], &nodes);
        assert_eq!(tcp(&node_port), [addr("10.0.0.2:30080"), addr("10.0.0.3:30080"), addr("10.96.3.4:80")]);
        // A ClusterIP Service keeps a stale nodePort to itself, as kube-proxy does.
        let cluster_ip = ServiceTable::build([&web("ClusterIP")], [&s], &nodes);
        assert_eq!(tcp(&cluster_ip), [addr("10.96.3.4:80")]);
    }

    #[test]
    fn headless_services_name_their_ready_endpoints() {
        let db = service(serde_json::json!({"metadata": {"name": "db", "namespace": "a"},
            "spec": {"clusterIP": "None", "ports": [{"port": 5432}]}}));
        let s = slice(serde_json::json!({"metadata": {"name": "db-x", "namespace": "a",
                "labels": {"kubernetes.io/service-name": "db"}},
            "addressType": "IPv4", "ports": [{"port": 5432}],
            "endpoints": [{"addresses": ["10.244.0.8"], "hostname": "db-0"}, {"addresses": ["10.244.0.9"], "conditions": {"ready": false}}]}));
        let table = ServiceTable::build([&db], [&s], &[]);
        let want = vec![NamedEndpoint { ip: Ipv4Addr::new(10, 244, 0, 8), hostname: Some("db-0".into()) }];
        assert_eq!(table.address("a", "db"), Some(&ServiceAddress::Headless(want)));
        assert_eq!(table.ports().count(), 0);
    }
}
