//! What a Service's endpoints should be, computed from its pods: the legacy `Endpoints`
//! subsets (ready `addresses` versus `notReadyAddresses`) and the `discovery.k8s.io/v1`
//! EndpointSlice endpoints with ready/serving/terminating conditions, ports resolved from
//! each service port's `targetPort` (a number, or a container port's name).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset, ObjectReference, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort as SlicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use crate::common::pods::{is_ready, is_terminal, is_terminating};

/// One resolved port of a pod: the service port's name and protocol, the target number.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Port {
    /// The service port's name.
    pub name: Option<String>,
    /// The resolved target port.
    pub port: i32,
    /// TCP, UDP or SCTP.
    pub protocol: String,
    /// The service port's appProtocol.
    pub app_protocol: Option<String>,
}

/// One pod's endpoint.
#[derive(Debug, Clone)]
pub(crate) struct PodEndpoint {
    /// The pod's IP.
    pub ip: String,
    /// Counted ready (or the service publishes not-ready addresses).
    pub ready: bool,
    /// The pod is Ready regardless of termination.
    pub serving: bool,
    /// The pod is being deleted.
    pub terminating: bool,
    /// The hostname, when the pod's subdomain is the service.
    pub hostname: Option<String>,
    /// The node.
    pub node_name: Option<String>,
    /// The pod reference.
    pub target_ref: ObjectReference,
}

/// Resolves a service's ports against a pod's container ports; `None` when a named
/// target port does not exist in the pod.
pub(crate) fn resolve_ports(svc: &Service, pod: &Pod) -> Option<Vec<Port>> {
    let spec = svc.spec.as_ref()?;
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default();
    let mut out = Vec::new();
    for sp in spec.ports.iter().flatten() {
        let protocol = sp.protocol.clone().unwrap_or_else(|| "TCP".into());
        let port = match &sp.target_port {
            None => sp.port,
            Some(IntOrString::Int(n)) => *n,
            Some(IntOrString::String(s)) => match s.parse::<i32>() {
                Ok(n) => n,
                Err(_) => containers
                    .iter()
                    .flat_map(|c| c.ports.iter().flatten())
                    .find(|cp| {
                        cp.name.as_deref() == Some(s.as_str()) && cp.protocol.as_deref().unwrap_or("TCP") == protocol
                    })
                    .map(|cp| cp.container_port)?,
            },
        };
        out.push(Port { name: sp.name.clone(), port, protocol, app_protocol: sp.app_protocol.clone() });
    }
    Some(out)
}

/// The endpoints of `svc` from `pods` (already filtered by the selector), grouped by the
/// pods' resolved port lists. Pods without an IP, finished pods and pods with an
/// unresolvable named port are left out; terminating pods are included (the legacy
/// Endpoints drop them unless not-ready addresses are published).
pub(crate) fn pod_endpoints(svc: &Service, pods: &[&Pod]) -> BTreeMap<Vec<Port>, Vec<PodEndpoint>> {
    let publish_not_ready = svc.spec.as_ref().and_then(|s| s.publish_not_ready_addresses).unwrap_or(false);
    let mut groups: BTreeMap<Vec<Port>, Vec<PodEndpoint>> = BTreeMap::new();
    for pod in pods {
        let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).filter(|ip| !ip.is_empty()) else { continue };
        if is_terminal(pod) {
            continue;
        }
        let Some(ports) = resolve_ports(svc, pod) else { continue };
        let spec = pod.spec.clone().unwrap_or_default();
        let hostname =
            spec.hostname.filter(|h| !h.is_empty() && spec.subdomain.as_deref() == Some(svc.name_any().as_str()));
        let terminating = is_terminating(pod);
        let serving = publish_not_ready || is_ready(pod);
        groups.entry(ports).or_default().push(PodEndpoint {
            ip,
            ready: serving && (!terminating || publish_not_ready),
            serving,
            terminating,
            hostname,
            node_name: spec.node_name.filter(|n| !n.is_empty()),
            target_ref: ObjectReference {
                kind: Some("Pod".into()),
                name: Some(pod.name_any()),
                namespace: pod.namespace(),
                uid: pod.uid(),
                ..Default::default()
            },
        });
    }
    for eps in groups.values_mut() {
        eps.sort_by(|a, b| a.ip.cmp(&b.ip));
    }
    groups
}

/// The legacy Endpoints subsets.
pub(crate) fn subsets(
    groups: &BTreeMap<Vec<Port>, Vec<PodEndpoint>>,
    publish_not_ready: bool,
) -> Option<Vec<EndpointSubset>> {
    let mut out = Vec::new();
    for (ports, eps) in groups {
        let addr = |e: &PodEndpoint| EndpointAddress {
            ip: e.ip.clone(),
            hostname: e.hostname.clone(),
            node_name: e.node_name.clone(),
            target_ref: Some(e.target_ref.clone()),
        };
        let live = eps.iter().filter(|e| publish_not_ready || !e.terminating);
        let ready: Vec<EndpointAddress> = live.clone().filter(|e| e.ready).map(addr).collect();
        let not_ready: Vec<EndpointAddress> = live.filter(|e| !e.ready).map(addr).collect();
        if ready.is_empty() && not_ready.is_empty() {
            continue;
        }
        let ports: Vec<EndpointPort> = ports
            .iter()
            .map(|p| EndpointPort {
                name: p.name.clone(),
                port: p.port,
                protocol: Some(p.protocol.clone()),
                app_protocol: p.app_protocol.clone(),
            })
            .collect();
        out.push(EndpointSubset {
            addresses: (!ready.is_empty()).then_some(ready),
            not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
            ports: (!ports.is_empty()).then_some(ports),
        });
    }
    (!out.is_empty()).then_some(out)
}

/// The EndpointSlice endpoints of one group.
pub(crate) fn slice_endpoints(eps: &[PodEndpoint], zones: &BTreeMap<String, String>) -> Vec<Endpoint> {
    eps.iter()
        .map(|e| Endpoint {
            addresses: vec![e.ip.clone()],
            conditions: Some(EndpointConditions {
                ready: Some(e.ready),
                serving: Some(e.serving),
                terminating: Some(e.terminating),
            }),
            hostname: e.hostname.clone(),
            node_name: e.node_name.clone(),
            target_ref: Some(e.target_ref.clone()),
            zone: e.node_name.as_ref().and_then(|n| zones.get(n).cloned()),
            ..Default::default()
        })
        .collect()
}

/// The EndpointSlice ports of one group.
pub(crate) fn slice_ports(ports: &[Port]) -> Vec<SlicePort> {
    ports
        .iter()
        .map(|p| SlicePort {
            name: Some(p.name.clone().unwrap_or_default()),
            port: Some(p.port),
            protocol: Some(p.protocol.clone()),
            app_protocol: p.app_protocol.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc() -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}, {"name": "m", "port": 9000}]}
        }))
        .unwrap_or_default()
    }

    fn pod(name: &str, ip: &str, ready: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"nodeName": "n1", "hostname": name, "subdomain": "web", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap_or_default()
    }

    #[test]
    fn ready_and_not_ready_addresses_with_resolved_ports() {
        let s = svc();
        let (a, b, c) = (pod("a", "10.0.0.2", true), pod("b", "10.0.0.1", false), Pod::default());
        let groups = pod_endpoints(&s, &[&a, &b, &c]);
        assert_eq!(groups.len(), 1);
        let (ports, eps) = groups.iter().next().map(|(p, e)| (p.clone(), e.clone())).unwrap_or_default();
        assert_eq!(ports.iter().map(|p| p.port).collect::<Vec<_>>(), vec![8080, 9000]);
        assert_eq!(eps[0].ip, "10.0.0.1");
        let subsets = subsets(&groups, false).unwrap_or_default();
        let ready = subsets[0].addresses.clone().unwrap_or_default();
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].ip, "10.0.0.2");
        assert_eq!(ready[0].hostname.as_deref(), Some("a"));
        assert_eq!(subsets[0].not_ready_addresses.as_ref().map(Vec::len), Some(1));
        let slice = slice_endpoints(&eps, &BTreeMap::new());
        assert_eq!(slice[0].conditions.as_ref().and_then(|c| c.ready), Some(false));
        assert_eq!(slice[1].conditions.as_ref().and_then(|c| c.ready), Some(true));
    }

    #[test]
    fn unresolvable_named_port_skips_the_pod() {
        let s = svc();
        let mut p = pod("a", "10.0.0.2", true);
        if let Some(spec) = p.spec.as_mut() {
            spec.containers[0].ports = None;
        }
        assert!(pod_endpoints(&s, &[&p]).is_empty());
    }
}
