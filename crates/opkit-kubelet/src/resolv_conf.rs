//! A pod's `/etc/resolv.conf`, composed as kube's kubelet does (`pkg/kubelet/network/
//! dns`): `dnsPolicy: ClusterFirst` (the default) points at the cluster DNS with the
//! search path `<ns>.svc.cluster.local svc.cluster.local cluster.local` followed by the
//! host's search domains, and `options ndots:5`; `Default`, and `ClusterFirst` on the
//! host network, copy the host's; `ClusterFirstWithHostNet` is `ClusterFirst` for every
//! pod; `None` starts empty. The pod's `dnsConfig` is merged in last: its nameservers
//! after the others, its searches before, its options replacing those of the same name.
//! Where no cluster DNS serves the pod (the host-network fallback), cluster policies fall
//! back to the host's, as kubelet does without `--cluster-dns`.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;

/// The cluster's DNS domain.
pub(crate) const CLUSTER_DOMAIN: &str = "cluster.local";
/// kubelet's limit on nameservers.
const MAX_NAMESERVERS: usize = 3;
/// kubelet's limit on search domains.
const MAX_SEARCHES: usize = 32;

/// The parts of a `resolv.conf` kubelet reads and writes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ResolvConf {
    /// `nameserver` lines, in order.
    pub nameservers: Vec<String>,
    /// The `search` domains.
    pub searches: Vec<String>,
    /// The `options`, e.g. `ndots:5`.
    pub options: Vec<String>,
}

impl ResolvConf {
    /// The host's (`/etc/resolv.conf`; empty when it cannot be read).
    pub(crate) fn host() -> ResolvConf {
        ResolvConf::parse(&std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default())
    }

    /// Parses `text` as kubelet does: the last `search` line wins, `.` is dropped from it
    /// and trailing dots trimmed; comments and other lines are ignored.
    pub(crate) fn parse(text: &str) -> ResolvConf {
        let mut conf = ResolvConf::default();
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            match fields.next() {
                Some("nameserver") => conf.nameservers.extend(fields.next().map(str::to_string)),
                Some("search") => {
                    conf.searches = fields.filter(|s| *s != ".").map(|s| s.trim_end_matches('.').to_string()).collect()
                }
                Some("options") => conf.options.extend(fields.map(str::to_string)),
                _ => {}
            }
        }
        conf
    }

    /// The file's text.
    pub(crate) fn render(&self) -> String {
        let mut out: String = self.nameservers.iter().map(|n| format!("nameserver {n}\n")).collect();
        if !self.searches.is_empty() {
            out += &format!("search {}\n", self.searches.join(" "));
        }
        if !self.options.is_empty() {
            out += &format!("options {}\n", self.options.join(" "));
        }
        out
    }
}

/// The `resolv.conf` of `pod`, given the host's and the cluster DNS's address (`None`
/// where none serves this pod).
pub(crate) fn for_pod(pod: &Pod, host: &ResolvConf, cluster_dns: Option<IpAddr>) -> ResolvConf {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network) == Some(true);
    let policy = spec.and_then(|s| s.dns_policy.as_deref()).unwrap_or("ClusterFirst");
    let cluster = match policy {
        "None" | "Default" => None,
        "ClusterFirst" if host_network => None,
        _ => cluster_dns,
    };
    let mut conf = match (policy, cluster) {
        ("None", _) => ResolvConf::default(),
        (_, Some(dns)) => {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            let searches = [
                format!("{namespace}.svc.{CLUSTER_DOMAIN}"),
                format!("svc.{CLUSTER_DOMAIN}"),
                CLUSTER_DOMAIN.to_string(),
            ];
            ResolvConf {
                nameservers: vec![dns.to_string()],
                searches: searches.into_iter().chain(host.searches.iter().cloned()).collect(),
                options: vec!["ndots:5".to_string()],
            }
        }
        (_, None) => host.clone(),
    };
    if let Some(extra) = spec.and_then(|s| s.dns_config.as_ref()) {
        conf.nameservers = unique(conf.nameservers.into_iter().chain(extra.nameservers.iter().flatten().cloned()));
        conf.searches = unique(extra.searches.iter().flatten().cloned().chain(conf.searches));
        for option in extra.options.iter().flatten() {
            let Some(name) = option.name.as_deref() else { continue };
            let merged = match &option.value {
                Some(value) => format!("{name}:{value}"),
                None => name.to_string(),
            };
            match conf.options.iter_mut().find(|o| o.split(':').next() == Some(name)) {
                Some(existing) => *existing = merged,
                None => conf.options.push(merged),
            }
        }
    }
    conf.nameservers.truncate(MAX_NAMESERVERS);
    conf.searches.truncate(MAX_SEARCHES);
    conf
}

/// `items` without repeats, first occurrences kept in order.
fn unique(items: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    const DNS: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 96, 0, 10));

    fn host() -> ResolvConf {
        ResolvConf::parse("# host\nnameserver 192.0.2.53\nsearch corp.example. .\noptions edns0 ndots:1\n")
    }

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p", "namespace": "team"}, "spec": spec}))
            .expect("pod")
    }

    #[test]
    fn parse_reads_what_kubelet_reads() {
        let h = host();
        assert_eq!(h.nameservers, ["192.0.2.53"]);
        assert_eq!(h.searches, ["corp.example"]);
        assert_eq!(h.options, ["edns0", "ndots:1"]);
    }

    #[test]
    fn cluster_first_points_at_the_cluster_dns_with_the_search_path() {
        let conf = for_pod(&pod(serde_json::json!({"containers": []})), &host(), Some(DNS));
        assert_eq!(
            conf.render(),
            "nameserver 10.96.0.10\n\
             search team.svc.cluster.local svc.cluster.local cluster.local corp.example\n\
             options ndots:5\n"
        );
    }

    #[test]
    fn default_and_host_network_cluster_first_copy_the_host() {
        let default = pod(serde_json::json!({"containers": [], "dnsPolicy": "Default"}));
        assert_eq!(for_pod(&default, &host(), Some(DNS)), host());
        let host_net = pod(serde_json::json!({"containers": [], "hostNetwork": true}));
        assert_eq!(for_pod(&host_net, &host(), Some(DNS)), host());
        let with_host_net =
            pod(serde_json::json!({"containers": [], "hostNetwork": true, "dnsPolicy": "ClusterFirstWithHostNet"}));
        assert_eq!(for_pod(&with_host_net, &host(), Some(DNS)).nameservers, ["10.96.0.10"]);
    }

    #[test]
    fn without_a_cluster_dns_cluster_first_falls_back_to_the_host() {
        assert_eq!(for_pod(&pod(serde_json::json!({"containers": []})), &host(), None), host());
    }

    #[test]
    fn none_is_only_the_dns_config() {
        let p = pod(serde_json::json!({"containers": [], "dnsPolicy": "None",
            "dnsConfig": {"nameservers": ["1.1.1.1"], "searches": ["a.example"], "options": [{"name": "ndots", "value": "2"}, {"name": "rotate"}]}}));
        assert_eq!(
            for_pod(&p, &host(), Some(DNS)).render(),
            "nameserver 1.1.1.1\nsearch a.example\noptions ndots:2 rotate\n"
        );
    }

    #[test]
    fn dns_config_merges_as_kubelet_does() {
        let p = pod(serde_json::json!({"containers": [],
            "dnsConfig": {"nameservers": ["10.96.0.10", "1.1.1.1"], "searches": ["first.example", "cluster.local"], "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}}));
        let conf = for_pod(&p, &host(), Some(DNS));
        assert_eq!(conf.nameservers, ["10.96.0.10", "1.1.1.1"]);
        assert_eq!(
            conf.searches,
            ["first.example", "cluster.local", "team.svc.cluster.local", "svc.cluster.local", "corp.example"]
        );
        assert_eq!(conf.options, ["ndots:2", "edns0"]);
    }
}
