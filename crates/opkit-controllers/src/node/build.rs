//! What a simulated node looks like: the Node object a kubelet registers, the status it
//! reports (conditions, capacity, addresses, nodeInfo) and its heartbeat Lease.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    ContainerImage, DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;

pub(crate) use opkit_kubelet::node::{internal_ip, node_name};

use super::{KUBELET_VERSION, LEASE_NAMESPACE, SIMULATED_ANNOTATION};

/// How long node leases last (kubelet's default `nodeLeaseDurationSeconds`).
pub(crate) const LEASE_DURATION_SECONDS: i32 = 40;

/// How often a node re-reports an unchanged status (kubelet's `nodeStatusReportFrequency`).
pub(crate) const STATUS_REPORT_SECONDS: i64 = 300;

/// The pod CIDR (`/24`) of the `index`-th node: `10.244.<index>.0/24`, continuing into
/// `10.245.0.0/16` and beyond for large clusters.
pub(crate) fn pod_cidr(index: usize) -> String {
    let second = 244 + index / 256;
    format!("10.{}.{}.0/24", second.min(255), index % 256)
}

/// The Node object the `index`-th simulated kubelet registers.
pub(crate) fn new_node(index: usize) -> Node {
    let name = node_name(index);
    let labels: BTreeMap<String, String> = [
        ("beta.kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/hostname", name.as_str()),
        ("kubernetes.io/os", "linux"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let annotations: BTreeMap<String, String> = [
        ("node.alpha.kubernetes.io/ttl", "0"),
        ("volumes.kubernetes.io/controller-managed-attach-detach", "true"),
        (SIMULATED_ANNOTATION, "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let cidr = pod_cidr(index);
    Node {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(NodeSpec { pod_cidr: Some(cidr.clone()), pod_cidrs: Some(vec![cidr]), ..Default::default() }),
        status: None,
    }
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
}

/// The resources every simulated node offers.
pub(crate) fn default_capacity() -> BTreeMap<String, Quantity> {
    quantities(&[
        ("cpu", "8"),
        ("ephemeral-storage", "100Gi"),
        ("hugepages-2Mi", "0"),
        ("memory", "32Gi"),
        ("pods", "110"),
    ])
}

/// The four conditions a healthy kubelet reports, in kubelet's order; `ready_note` is
/// appended to the Ready condition's message, as kube's kubelet appends ". AppArmor
/// enabled" there.
fn healthy_conditions(now: &Time, ready_note: Option<&str>) -> Vec<NodeCondition> {
    let ready = match ready_note {
        Some(note) => format!("kubelet is posting ready status. {note}"),
        None => "kubelet is posting ready status".to_string(),
    };
    [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", ready.as_str()),
    ]
    .into_iter()
    .map(|(type_, status, reason, message)| NodeCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(now.clone()),
    })
    .collect()
}

/// A deterministic id (32 hex digits) derived from a node name and a salt.
fn machine_id(name: &str, salt: u64) -> String {
    let mut a: u64 = 0xcbf2_9ce4_8422_2325 ^ salt;
    for b in name.bytes() {
        a = (a ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let b = a.rotate_left(29).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    format!("{a:016x}{b:016x}")
}

fn node_info(name: &str) -> NodeSystemInfo {
    let id = machine_id(name, 1);
    let uuid = machine_id(name, 2);
    let boot = machine_id(name, 3);
    let dash = |s: &str| format!("{}-{}-{}-{}-{}", &s[0..8], &s[8..12], &s[12..16], &s[16..20], &s[20..32]);
    NodeSystemInfo {
        architecture: "amd64".into(),
        boot_id: dash(&boot),
        container_runtime_version: "containerd://2.0.3".into(),
        kernel_version: "6.8.0-opkit".into(),
        kube_proxy_version: String::new(),
        kubelet_version: KUBELET_VERSION.into(),
        machine_id: id,
        operating_system: "linux".into(),
        os_image: "opkit simulated node".into(),
        system_uuid: dash(&uuid),
        swap: None,
    }
}

/// The status the simulated kubelet of `node` reports, built from its current status:
/// missing capacity, addresses and nodeInfo are filled in, and the conditions are made
/// healthy (keeping transition times of unchanged conditions; heartbeats are refreshed
/// every [`STATUS_REPORT_SECONDS`]); the kubelet endpoint's port is `kubelet_port` when
/// the kubelet server runs, else 10250; `images` are the images loaded into the local
/// cluster (reported as a kubelet reports the images on its machine); `ready_note` ends
/// the Ready condition's message (how real pods are isolated, when they are not
/// contained). Returns `None` when nothing needs writing.
pub(crate) fn desired_status(
    node: &Node,
    now: Timestamp,
    kubelet_port: Option<u16>,
    images: &[ContainerImage],
    ready_note: Option<&str>,
) -> Option<NodeStatus> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let current = node.status.clone().unwrap_or_default();
    let mut next = current.clone();
    let now_t = Time(Timestamp::from_second(now.as_second()).unwrap_or(now));
    if next.capacity.as_ref().is_none_or(BTreeMap::is_empty) {
        next.capacity = Some(default_capacity());
    }
    if next.allocatable.as_ref().is_none_or(BTreeMap::is_empty) {
        next.allocatable = next.capacity.clone();
    }
    if next.addresses.as_ref().is_none_or(Vec::is_empty) {
        next.addresses = Some(vec![
            NodeAddress { type_: "InternalIP".into(), address: internal_ip(&name) },
            NodeAddress { type_: "Hostname".into(), address: name.clone() },
        ]);
    }
    if next.node_info.as_ref().is_none_or(|i| i.kubelet_version.is_empty()) {
        next.node_info = Some(node_info(&name));
    }
    let port = kubelet_port.map_or(10250, i32::from);
    let advertised = next.daemon_endpoints.as_ref().and_then(|d| d.kubelet_endpoint.as_ref()).map(|e| e.port);
    if advertised.is_none() || (kubelet_port.is_some() && advertised != Some(port)) {
        next.daemon_endpoints = Some(NodeDaemonEndpoints { kubelet_endpoint: Some(DaemonEndpoint { port }) });
    }
    let reported = (!images.is_empty()).then(|| images.to_vec());
    if next.images != reported {
        next.images = reported;
    }
    let old = current.conditions.clone().unwrap_or_default();
    let stale = |c: &NodeCondition| {
        c.last_heartbeat_time.as_ref().is_none_or(|t| now.as_second() - t.0.as_second() >= STATUS_REPORT_SECONDS)
    };
    let conditions = healthy_conditions(&now_t, ready_note)
        .into_iter()
        .map(|mut want| {
            if let Some(have) = old.iter().find(|c| c.type_ == want.type_)
                && have.status == want.status
            {
                want.last_transition_time = have.last_transition_time.clone().or(want.last_transition_time);
                if !stale(have) && have.reason == want.reason && have.message == want.message {
                    want.last_heartbeat_time = have.last_heartbeat_time.clone();
                }
            }
            want
        })
        .collect();
    next.conditions = Some(conditions);
    (next != current).then_some(next)
}

/// The images of `store` as a kubelet reports images in `status.images`: each loaded
/// image (the digest reference, then the tag reference, and the size), then the built-in
/// images (see [`opkit_kubelet::images::builtin`]; their digest and `:latest` references).
pub(crate) fn loaded_images(store: &opkit_kubelet::images::ImageStore) -> Vec<ContainerImage> {
    use opkit_kubelet::images::builtin;
    let images = store.list().unwrap_or_else(|e| {
        tracing::warn!(error = %e, "reading the image store failed");
        vec![]
    });
    let loaded = images.into_iter().map(|i| ContainerImage {
        names: Some(vec![format!("{}@{}", builtin::repository(&i.reference), i.digest), i.reference.clone()]),
        size_bytes: i64::try_from(i.size).ok(),
    });
    let built_in = builtin::ALL.into_iter().map(|b| ContainerImage {
        names: Some(vec![format!("{}@{}", b.repository(), b.digest()), format!("{}:latest", b.repository())]),
        size_bytes: None,
    });
    loaded.chain(built_in).collect()
}

/// The heartbeat Lease of `node` in `kube-node-lease`, renewed at `now`.
pub(crate) fn lease(node: &Node, now: Timestamp) -> Lease {
    let name = node.metadata.name.clone().unwrap_or_default();
    Lease {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(LEASE_NAMESPACE.into()),
            owner_references: node.metadata.uid.clone().map(|uid| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: name.clone(),
                    uid,
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(name),
            lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opkit_kubelet::node::node_index;

    #[test]
    fn names_and_addresses() {
        assert_eq!(node_name(2), "opkit-worker-2");
        assert_eq!(node_index("opkit-worker-12"), Some(12));
        assert_eq!(node_index("other"), None);
        assert_eq!(pod_cidr(1), "10.244.1.0/24");
        assert_eq!(pod_cidr(257), "10.245.1.0/24");
        assert_eq!(internal_ip("opkit-worker-0"), "10.0.0.2");
        assert!(internal_ip("custom").starts_with("10.0.255."));
    }

    #[test]
    fn new_node_has_kube_labels() {
        let n = new_node(0);
        let labels = n.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get("kubernetes.io/hostname").map(String::as_str), Some("opkit-worker-0"));
        assert_eq!(labels.get("kubernetes.io/os").map(String::as_str), Some("linux"));
        assert!(!labels.keys().any(|k| k.starts_with("node-role.kubernetes.io/")));
    }

    #[test]
    fn loaded_and_builtin_images_are_reported_as_a_kubelet_reports_images() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let store = opkit_kubelet::images::ImageStore::new(dir.path().join("images"));
        store.load("example.com/op:v1", std::path::Path::new("/bin/true"))?;
        let images = loaded_images(&store);
        let names = images[0].names.clone().unwrap_or_default();
        assert!(names[0].starts_with("example.com/op@sha256:"), "{names:?}");
        assert_eq!(names[1], "example.com/op:v1");
        let busybox = images[1].names.clone().unwrap_or_default();
        assert!(busybox[0].starts_with("docker.io/library/busybox@sha256:"), "{busybox:?}");
        assert_eq!(images.len(), 1 + opkit_kubelet::images::builtin::ALL.len());
        let now = Timestamp::from_second(1_700_000_000)?;
        let mut n = new_node(0);
        n.status = desired_status(&n, now, None, &[], None);
        let with_images = desired_status(&n, now, None, &images, None).ok_or("the new image is written")?;
        assert_eq!(with_images.images.as_deref(), Some(&images[..]));
        n.status = Some(with_images);
        assert!(desired_status(&n, now, None, &images, None).is_none(), "unchanged images are not rewritten");
        Ok(())
    }

    #[test]
    fn status_is_filled_then_stable() {
        let mut n = new_node(1);
        let now = Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let st = desired_status(&n, now, None, &[], None);
        let Some(st) = st else { panic!("expected a status") };
        let ready = st.conditions.iter().flatten().find(|c| c.type_ == "Ready").map(|c| c.status.clone());
        assert_eq!(ready.as_deref(), Some("True"));
        assert_eq!(st.capacity.as_ref().and_then(|c| c.get("pods")).map(|q| q.0.as_str()), Some("110"));
        assert_eq!(st.node_info.as_ref().map(|i| i.kubelet_version.as_str()), Some("v1.33.0"));
        n.status = Some(st);
        let later = Timestamp::from_second(1_700_000_010).unwrap_or(Timestamp::UNIX_EPOCH);
        assert!(desired_status(&n, later, None, &[], None).is_none(), "no write within the report period");
        let much_later = Timestamp::from_second(1_700_000_400).unwrap_or(Timestamp::UNIX_EPOCH);
        assert!(desired_status(&n, much_later, None, &[], None).is_some(), "heartbeat refreshed after 5 minutes");
    }

    #[test]
    fn unhealthy_condition_is_repaired() {
        let mut n = new_node(0);
        let now = Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let mut st = desired_status(&n, now, None, &[], None).unwrap_or_default();
        for c in st.conditions.iter_mut().flatten() {
            if c.type_ == "Ready" {
                c.status = "False".into();
            }
        }
        n.status = Some(st);
        assert!(desired_status(&n, now, None, &[], None).is_some());
    }

    #[test]
    fn lease_is_owned_by_node() {
        let mut n = new_node(0);
        n.metadata.uid = Some("u1".into());
        let l = lease(&n, Timestamp::UNIX_EPOCH);
        assert_eq!(l.metadata.namespace.as_deref(), Some("kube-node-lease"));
        assert_eq!(l.metadata.owner_references.unwrap_or_default()[0].uid, "u1");
        assert_eq!(l.spec.and_then(|s| s.lease_duration_seconds), Some(40));
    }
}
