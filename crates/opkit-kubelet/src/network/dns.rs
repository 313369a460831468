//! The cluster DNS as one pod reaches it: a hickory-server [`Server`] on UDP and TCP port
//! 53 of the `kube-dns` Service's ClusterIP (`10.96.0.10`), bound to the pod's host end
//! like the Service proxy (so every pod of every cluster on the host has its own), whose
//! handler answers from the latest [`ServiceTable`] as kube's DNS specification says:
//! `<svc>.<ns>.svc.cluster.local` is an A record of the ClusterIP, or of every ready
//! endpoint of a headless Service, whose endpoints with a hostname are
//! `<hostname>.<svc>.<ns>.svc.cluster.local`; any other name in `cluster.local` is
//! NXDOMAIN; `_<port>._<proto>.<svc>.<ns>.svc.cluster.local` is an SRV record of a named
//! port of a Service (for a headless one, a record per ready endpoint, whose name is its
//! hostname or its dashed address); `a-b-c-d.<ns>.pod.cluster.local` is an A record of
//! `a.b.c.d`; the `in-addr.arpa` name of a ClusterIP or of a headless Service's endpoint
//! is a PTR record of its name; every other name is forwarded over UDP to the host's
//! nameservers, and answered SERVFAIL when none answers within [`FORWARD_TIMEOUT`].
//! AAAA: the cluster is IPv4 only, so names that exist answer AAAA with no records.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_server::Server;
use hickory_server::net::runtime::Time;
use hickory_server::proto::op::{Message, MessageType, Metadata, ResponseCode};
use hickory_server::proto::rr::rdata::{A, PTR, SRV};
use hickory_server::proto::rr::{Name, RData, Record, RecordType};
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use tokio::net::UdpSocket;

use super::NetworkError;
use super::service_table::{ServiceAddress, ServiceTable, dashed};
use super::service_watch::Tables;
use crate::resolv_conf::CLUSTER_DOMAIN;

/// The DNS port.
const DNS_PORT: u16 = 53;
/// How long a forwarded query waits for the host's nameservers, all together.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a TCP client may stay idle.
const TCP_IDLE: Duration = Duration::from_secs(10);
/// The TTL of the answers (CoreDNS's default for the kubernetes plugin).
const TTL: u32 = 5;

/// What a name in the cluster's domain is.
#[derive(Debug, PartialEq, Eq)]
enum ClusterName {
    /// It exists with these addresses (none: no records of the type asked for).
    Addresses(Vec<Ipv4Addr>),
    /// A named port of a Service: its number and target, one per SRV record.
    Ports(Vec<(u16, String)>),
    /// An address's name (the PTR record).
    Pointer(String),
    /// It does not exist.
    Unknown,
    /// It is not in the cluster's domain.
    Outside,
}

/// What `name` (lower case, no trailing dot) is in `table`.
fn lookup(table: &ServiceTable, name: &str) -> ClusterName {
    if let Some(reversed) = name.strip_suffix(".in-addr.arpa") {
        let mut octets: Vec<&str> = reversed.split('.').collect();
        octets.reverse();
        let ip = octets.join(".").parse::<Ipv4Addr>().ok().filter(|_| octets.len() == 4);
        return match ip.and_then(|ip| table.name_of(ip, CLUSTER_DOMAIN)) {
            Some(name) => ClusterName::Pointer(name),
            None => ClusterName::Outside,
        };
    }
    let Some(rest) = name.strip_suffix(CLUSTER_DOMAIN) else { return ClusterName::Outside };
    if rest.is_empty() {
        return ClusterName::Addresses(Vec::new());
    }
    let Some(rest) = rest.strip_suffix('.') else { return ClusterName::Outside };
    let labels: Vec<&str> = rest.split('.').collect();
    match labels.as_slice() {
        ["svc"] | [_, "svc"] | ["pod"] | [_, "pod"] => ClusterName::Addresses(Vec::new()),
        // Pod records, as CoreDNS's `pods insecure` answers them: any dashed address.
        [address, _namespace, "pod"] => match address.replace('-', ".").parse::<Ipv4Addr>() {
            Ok(ip) if address.split('-').count() == 4 => ClusterName::Addresses(vec![ip]),
            _ => ClusterName::Unknown,
        },
        [service, namespace, "svc"] => match table.address(namespace, service) {
            Some(ServiceAddress::ClusterIp(ip)) => ClusterName::Addresses(vec![*ip]),
            Some(ServiceAddress::Headless(endpoints)) if !endpoints.is_empty() => {
                ClusterName::Addresses(endpoints.iter().map(|e| e.ip).collect())
            }
            _ => ClusterName::Unknown,
        },
        [port, protocol, service, namespace, "svc"] if port.starts_with('_') && protocol.starts_with('_') => {
            let Some(number) = table.named_port(namespace, service, &port[1..], &protocol[1..]) else {
                return ClusterName::Unknown;
            };
            let under = format!("{service}.{namespace}.svc.{CLUSTER_DOMAIN}.");
            match table.address(namespace, service) {
                Some(ServiceAddress::Headless(endpoints)) => {
                    ClusterName::Ports(endpoints.iter().map(|e| (number, format!("{}.{under}", e.name()))).collect())
                }
                _ => ClusterName::Ports(vec![(number, under)]),
            }
        }
        [host, service, namespace, "svc"] => match table.address(namespace, service) {
            Some(ServiceAddress::Headless(endpoints)) => {
                let named = |e: &&_| endpoint_is_named(e, host);
                let ips: Vec<Ipv4Addr> = endpoints.iter().filter(named).map(|e| e.ip).collect();
                if ips.is_empty() { ClusterName::Unknown } else { ClusterName::Addresses(ips) }
            }
            _ => ClusterName::Unknown,
        },
        _ => ClusterName::Unknown,
    }
}

/// Whether the endpoint `e` is named `host` under its Service: its hostname, or its
/// dashed address when it has none.
fn endpoint_is_named(e: &super::service_table::NamedEndpoint, host: &str) -> bool {
    match &e.hostname {
        Some(hostname) => hostname == host,
        None => dashed(e.ip) == host,
    }
}

/// The handler: the cluster's names from the table, the rest from the host.
struct ClusterDns {
    tables: Tables,
    upstreams: Arc<Vec<SocketAddr>>,
}

#[async_trait::async_trait]
impl RequestHandler for ClusterDns {
    async fn handle_request<R: ResponseHandler, T: Time>(&self, request: &Request, mut response: R) -> ResponseInfo {
        let builder = MessageResponseBuilder::from_message_request(request);
        let Some(query) = request.queries.queries().first() else {
            return send(&mut response, builder.error_msg(&request.metadata, ResponseCode::FormErr)).await;
        };
        let name = query.name().to_string().to_ascii_lowercase();
        let table = self.tables.borrow().clone();
        let found = match table.as_deref() {
            Some(table) => lookup(table, name.trim_end_matches('.')),
            None => return send(&mut response, builder.error_msg(&request.metadata, ResponseCode::ServFail)).await,
        };
        let mut metadata = Metadata::response_from_request(&request.metadata);
        metadata.authoritative = true;
        metadata.recursion_available = true;
        match found {
            ClusterName::Outside => self.forward(request, response).await,
            ClusterName::Unknown => {
                metadata.response_code = ResponseCode::NXDomain;
                send(&mut response, builder.build_no_records(metadata)).await
            }
            ClusterName::Addresses(ips) => {
                let owner: Name = query.original().name().clone();
                let records: Vec<Record> = match query.query_type() {
                    RecordType::A | RecordType::ANY => {
                        ips.iter().map(|ip| Record::from_rdata(owner.clone(), TTL, RData::A(A(*ip)))).collect()
                    }
                    _ => Vec::new(),
                };
                send(&mut response, builder.build(metadata, records.iter(), [], [], [])).await
            }
            ClusterName::Ports(ports) => {
                let owner: Name = query.original().name().clone();
                let records: Vec<Record> = match query.query_type() {
                    RecordType::SRV | RecordType::ANY => ports
                        .iter()
                        .filter_map(|(port, target)| {
                            let target = Name::from_ascii(target).ok()?;
                            Some(Record::from_rdata(owner.clone(), TTL, RData::SRV(SRV::new(0, 100, *port, target))))
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                send(&mut response, builder.build(metadata, records.iter(), [], [], [])).await
            }
            ClusterName::Pointer(target) => {
                let owner: Name = query.original().name().clone();
                let records: Vec<Record> = match (query.query_type(), Name::from_ascii(&target)) {
                    (RecordType::PTR | RecordType::ANY, Ok(target)) => {
                        vec![Record::from_rdata(owner, TTL, RData::PTR(PTR(target)))]
                    }
                    _ => Vec::new(),
                };
                send(&mut response, builder.build(metadata, records.iter(), [], [], [])).await
            }
        }
    }
}

impl ClusterDns {
    /// Relays `request` to the host's nameservers and their answer back, SERVFAIL when
    /// none answers in time.
    async fn forward<R: ResponseHandler>(&self, request: &Request, mut response: R) -> ResponseInfo {
        let builder = MessageResponseBuilder::from_message_request(request);
        let answered = tokio::time::timeout(FORWARD_TIMEOUT, ask_upstreams(&self.upstreams, request.as_slice())).await;
        let Ok(Some(answer)) = answered else {
            return send(&mut response, builder.error_msg(&request.metadata, ResponseCode::ServFail)).await;
        };
        let mut metadata = answer.metadata;
        metadata.id = request.metadata.id;
        metadata.message_type = MessageType::Response;
        send(
            &mut response,
            builder.build(metadata, answer.answers.iter(), answer.authorities.iter(), [], answer.additionals.iter()),
        )
        .await
    }
}

/// The first answer of `upstreams` (each asked in turn) to the raw query `query`.
async fn ask_upstreams(upstreams: &[SocketAddr], query: &[u8]) -> Option<Message> {
    let per_server = FORWARD_TIMEOUT / u32::try_from(upstreams.len().max(1)).unwrap_or(1);
    for upstream in upstreams {
        let asked = async {
            let socket = UdpSocket::bind(if upstream.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }).await.ok()?;
            socket.connect(upstream).await.ok()?;
            socket.send(query).await.ok()?;
            let mut buf = vec![0u8; 65535];
            let n = socket.recv(&mut buf).await.ok()?;
            Message::from_vec(&buf[..n]).ok()
        };
        match tokio::time::timeout(per_server, asked).await {
            Ok(Some(answer)) => return Some(answer),
            _ => tracing::debug!(%upstream, "a host nameserver did not answer a pod's query"),
        }
    }
    None
}

/// Sends `message`, turning a failure into a SERVFAIL header for the server's books.
async fn send<'a, R: ResponseHandler>(
    response: &mut R,
    message: hickory_server::zone_handler::MessageResponse<
        '_,
        'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
    >,
) -> ResponseInfo {
    let metadata = *message.metadata();
    match response.send_response(message).await {
        Ok(info) => info,
        Err(e) => {
            tracing::debug!(error = %e, "answering a pod's DNS query");
            let mut failed = metadata;
            failed.response_code = ResponseCode::ServFail;
            hickory_server::proto::op::Header { metadata: failed, counts: Default::default() }.into()
        }
    }
}

/// A running DNS server; dropping it stops it.
pub(super) struct DnsServer {
    _server: Server<ClusterDns>,
}

impl std::fmt::Debug for DnsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DnsServer")
    }
}

impl DnsServer {
    /// Serves DNS at `ip` port 53 (UDP and TCP) for queries arriving on `device`, from
    /// `tables`, forwarding other names to `upstreams`. Needs a tokio runtime.
    pub(super) fn start(
        device: &str,
        ip: Ipv4Addr,
        tables: Tables,
        upstreams: Arc<Vec<SocketAddr>>,
    ) -> Result<DnsServer, NetworkError> {
        let addr = SocketAddr::new(IpAddr::V4(ip), DNS_PORT);
        let udp = super::service_udp_proxy::bind_on_device(device, addr)?;
        let tcp = super::service_proxy::listen_on_device(device, addr)?;
        let mut server = Server::new(ClusterDns { tables, upstreams });
        server.register_socket(udp);
        server.register_listener(tcp, TCP_IDLE, 64);
        Ok(DnsServer { _server: server })
    }
}

/// The nameservers of the host's `resolv.conf`, at port 53.
pub(super) fn host_nameservers() -> Vec<SocketAddr> {
    crate::resolv_conf::ResolvConf::host()
        .nameservers
        .iter()
        .filter_map(|n| n.parse::<IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, DNS_PORT))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::discovery::v1::EndpointSlice;

    fn table() -> ServiceTable {
        let web: Service = serde_json::from_value(serde_json::json!({"metadata": {"name": "web", "namespace": "a"},
            "spec": {"clusterIP": "10.96.3.4", "ports": [{"name": "http", "port": 80}]}}))
        .expect("svc");
        let db: Service = serde_json::from_value(serde_json::json!({"metadata": {"name": "db", "namespace": "a"},
            "spec": {"clusterIP": "None", "ports": [{"name": "pg", "port": 5432}]}}))
        .expect("svc");
        let slice: EndpointSlice =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "db-1", "namespace": "a",
            "labels": {"kubernetes.io/service-name": "db"}}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.244.0.8"], "hostname": "db-0"}, {"addresses": ["10.244.0.9"]}]}))
            .expect("slice");
        ServiceTable::build([&web, &db], [&slice], &[])
    }

    /// A raw A query for `name`.
    fn query(name: &str) -> Vec<u8> {
        let mut message = Message::query();
        message
            .add_query(hickory_server::proto::op::Query::query(Name::from_ascii(name).expect("name"), RecordType::A));
        message.to_vec().expect("encode")
    }

    #[tokio::test]
    async fn other_names_are_relayed_from_the_first_nameserver_that_answers() {
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let answering = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
        let upstreams = [silent.local_addr().expect("addr"), answering.local_addr().expect("addr")];
        let server = tokio::spawn(async move {
            let mut buf = vec![0u8; 512];
            let (n, from) = answering.recv_from(&mut buf).await.expect("recv");
            let mut answer = Message::from_vec(&buf[..n]).expect("query");
            answer.metadata.message_type = MessageType::Response;
            let owner = Name::from_ascii("example.org.").expect("name");
            answer.answers.push(Record::from_rdata(owner, 60, RData::A(A(Ipv4Addr::new(192, 0, 2, 7)))));
            answering.send_to(&answer.to_vec().expect("encode"), from).await.expect("send");
        });
        let answer = ask_upstreams(&upstreams, &query("example.org.")).await.expect("an answer");
        assert_eq!(answer.answers.len(), 1);
        server.await.expect("server");
    }

    #[tokio::test]
    async fn silent_nameservers_give_up_within_the_forward_timeout() {
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let (upstreams, raw) = ([silent.local_addr().expect("addr")], query("example.org."));
        let started = std::time::Instant::now();
        assert!(ask_upstreams(&upstreams, &raw).await.is_none());
        assert!(started.elapsed() < FORWARD_TIMEOUT + Duration::from_millis(500));
    }

    #[test]
    fn cluster_names_resolve_as_the_specification_says() {
        let t = table();
        let ip = |s: &str| s.parse::<Ipv4Addr>().expect("ip");
        assert_eq!(lookup(&t, "web.a.svc.cluster.local"), ClusterName::Addresses(vec![ip("10.96.3.4")]));
        assert_eq!(
            lookup(&t, "db.a.svc.cluster.local"),
            ClusterName::Addresses(vec![ip("10.244.0.8"), ip("10.244.0.9")])
        );
        assert_eq!(lookup(&t, "db-0.db.a.svc.cluster.local"), ClusterName::Addresses(vec![ip("10.244.0.8")]));
        assert_eq!(lookup(&t, "db-1.db.a.svc.cluster.local"), ClusterName::Unknown);
        assert_eq!(lookup(&t, "web.b.svc.cluster.local"), ClusterName::Unknown);
        assert_eq!(lookup(&t, "nothing.cluster.local"), ClusterName::Unknown);
        assert_eq!(lookup(&t, "a.svc.cluster.local"), ClusterName::Addresses(vec![]));
        assert_eq!(
            lookup(&t, "_http._tcp.web.a.svc.cluster.local"),
            ClusterName::Ports(vec![(80, "web.a.svc.cluster.local.".to_string())])
        );
        // A headless Service's SRV: one per ready endpoint, named by hostname or dashes.
        assert_eq!(
            lookup(&t, "_pg._tcp.db.a.svc.cluster.local"),
            ClusterName::Ports(vec![
                (5432, "db-0.db.a.svc.cluster.local.".to_string()),
                (5432, "10-244-0-9.db.a.svc.cluster.local.".to_string())
            ])
        );
        assert_eq!(lookup(&t, "10-244-0-9.db.a.svc.cluster.local"), ClusterName::Addresses(vec![ip("10.244.0.9")]));
        assert_eq!(lookup(&t, "10-244-0-8.db.a.svc.cluster.local"), ClusterName::Unknown);
        // Pod records and reverse lookups.
        assert_eq!(lookup(&t, "10-244-1-7.b.pod.cluster.local"), ClusterName::Addresses(vec![ip("10.244.1.7")]));
        assert_eq!(lookup(&t, "10-244-1.b.pod.cluster.local"), ClusterName::Unknown);
        assert_eq!(lookup(&t, "4.3.96.10.in-addr.arpa"), ClusterName::Pointer("web.a.svc.cluster.local.".into()));
        assert_eq!(lookup(&t, "8.0.244.10.in-addr.arpa"), ClusterName::Pointer("db-0.db.a.svc.cluster.local.".into()));
        assert_eq!(lookup(&t, "1.2.0.192.in-addr.arpa"), ClusterName::Outside);
        assert_eq!(lookup(&t, "_http._udp.web.a.svc.cluster.local"), ClusterName::Unknown);
        assert_eq!(lookup(&t, "example.com"), ClusterName::Outside);
        assert_eq!(lookup(&t, "notcluster.local"), ClusterName::Outside);
    }
}
