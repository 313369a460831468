//! The `kubernetes` Service in `default`, as kube-apiserver's bootstrap controller keeps
//! it: type ClusterIP at the first address of the Service range (so no other Service gets
//! it), port `https` 443/TCP to the port the server listens on, labels `component:
//! apiserver` and `provider: kubernetes`, no selector; and its `Endpoints` and
//! EndpointSlice, both naming the address the server serves on. They are created at
//! start, recreated when deleted and repaired when changed: a task reconciles them on
//! every write to Services, Endpoints or EndpointSlices, and every
//! [`RECONCILE_PERIOD`] besides, as kube's controller does.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::auth::user::UserInfo;
use crate::error::ApiResult;
use crate::registry::{Registry, Subresource, WriteOptions};
use crate::storage::{ResourceId, WatchSubscription};

/// The `kubernetes` Service's cluster IP: the first address of the Service range.
pub(crate) const CLUSTER_IP: &str = "10.96.0.1";
/// The Service's name.
pub(crate) const SERVICE_NAME: &str = "kubernetes";
/// The Service's namespace.
pub(crate) const NAMESPACE: &str = "default";
/// The Service's port name.
const PORT_NAME: &str = "https";
/// The Service's port.
const SERVICE_PORT: u16 = 443;
/// How often the objects are checked even when nothing was written (kube's
/// `--endpoint-reconciler` interval).
pub(crate) const RECONCILE_PERIOD: Duration = Duration::from_secs(10);
/// The field manager of the server's writes to these objects.
const FIELD_MANAGER: &str = "kube-apiserver";

/// The three objects, as the server wants them for `endpoint` (where it listens).
struct Desired {
    service: Value,
    endpoints: Value,
    slice: Value,
}

impl Desired {
    fn for_endpoint(endpoint: SocketAddr) -> Desired {
        let ip = served_ip(endpoint);
        let port = endpoint.port();
        let ipv4 = ip.parse::<std::net::Ipv4Addr>().is_ok();
        let service = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE,
                "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {
                "type": "ClusterIP", "clusterIP": CLUSTER_IP, "clusterIPs": [CLUSTER_IP],
                "ports": [{"name": PORT_NAME, "port": SERVICE_PORT, "protocol": "TCP", "targetPort": port}],
                "sessionAffinity": "None",
            },
        });
        let endpoints = json!({
            "apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE,
                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": ip}], "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]}],
        });
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE,
                "labels": {"kubernetes.io/service-name": SERVICE_NAME}},
            "addressType": if ipv4 { "IPv4" } else { "IPv6" },
            "endpoints": [{"addresses": [ip], "conditions": {"ready": true}}],
            "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
        });
        Desired { service, endpoints, slice }
    }
}

/// The address clients of the Service reach the server at: the one it listens on, or
/// loopback when it listens on every address.
fn served_ip(endpoint: SocketAddr) -> String {
    match endpoint.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".into(),
        ip if ip.is_unspecified() => "::1".into(),
        ip => ip.to_string(),
    }
}

/// The fields of each object the server owns: a stored object whose value at one of
/// these paths differs from the desired one is repaired.
const SERVICE_FIELDS: &[&str] =
    &["/metadata/labels/component", "/metadata/labels/provider", "/spec/type", "/spec/ports", "/spec/selector"];
const ENDPOINTS_FIELDS: &[&str] = &["/metadata/labels/endpointslice.kubernetes.io~1skip-mirror", "/subsets"];
const SLICE_FIELDS: &[&str] = &["/metadata/labels/kubernetes.io~1service-name", "/addressType", "/endpoints", "/ports"];

/// Starts the task that keeps the objects true for a server listening at `endpoint`,
/// until `shutdown`. The first reconciliation is done before this returns.
pub(crate) async fn spawn(registry: Registry, endpoint: SocketAddr, shutdown: CancellationToken) -> ApiResult<()> {
    let desired = Desired::for_endpoint(endpoint);
    reconcile(&registry, &desired).await?;
    tokio::spawn(async move {
        let mut subscriptions = subscribe(&registry);
        loop {
            let written = async {
                if subscriptions.is_empty() {
                    return std::future::pending().await;
                }
                let (event, _, _) =
                    futures::future::select_all(subscriptions.iter_mut().map(|s| Box::pin(s.next()))).await;
                event
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(RECONCILE_PERIOD) => {
                    if subscriptions.is_empty() {
                        subscriptions = subscribe(&registry);
                    }
                }
                event = written => match event {
                    Ok(Some(_)) => {}
                    // The store failed: subscribe again at the next period, once it may
                    // have recovered.
                    Ok(None) => subscriptions.clear(),
                    // Fell behind the event log: subscribe from now.
                    Err(_) => subscriptions = subscribe(&registry),
                },
            }
            if let Err(e) = reconcile(&registry, &desired).await {
                tracing::warn!(error = %e.message, "keeping the kubernetes Service");
            }
        }
    });
    Ok(())
}

/// Subscriptions to the writes of Services, Endpoints and EndpointSlices from now on.
fn subscribe(registry: &Registry) -> Vec<WatchSubscription> {
    let from = registry.store().revision();
    [
        ResourceId::new("", "services"),
        ResourceId::new("", "endpoints"),
        ResourceId::new("discovery.k8s.io", "endpointslices"),
    ]
    .iter()
    .filter_map(|r| registry.store().watch(r, from).ok())
    .collect()
}

/// Creates, recreates or repairs the three objects.
async fn reconcile(registry: &Registry, desired: &Desired) -> ApiResult<()> {
    keep(registry, "", "services", &desired.service, SERVICE_FIELDS).await?;
    keep(registry, "", "endpoints", &desired.endpoints, ENDPOINTS_FIELDS).await?;
    keep(registry, "discovery.k8s.io", "endpointslices", &desired.slice, SLICE_FIELDS).await
}

/// Makes the stored `resource` object named [`SERVICE_NAME`] agree with `want` at
/// `fields` (creating it when missing).
async fn keep(registry: &Registry, group: &str, resource: &str, want: &Value, fields: &[&str]) -> ApiResult<()> {
    let catalog = registry.catalog().snapshot();
    let Some(info) = catalog.lookup(group, "v1", resource) else {
        return Ok(());
    };
    let target = registry.target(info, "v1".into(), Some(NAMESPACE.into()));
    let opts = WriteOptions { field_manager: FIELD_MANAGER.into(), user: UserInfo::apiserver(), ..Default::default() };
    let Some(stored) = registry.stored(&target.info.id, NAMESPACE, SERVICE_NAME).await? else {
        return match registry.create(&target, want.clone(), &opts).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        };
    };
    if stored["metadata"]["deletionTimestamp"].is_string() {
        return Ok(());
    }
    let mut repaired = stored.clone();
    for field in fields {
        let wanted = want.pointer(field).cloned();
        if stored.pointer(field) != wanted.as_ref() {
            set_pointer(&mut repaired, field, wanted);
        }
    }
    if repaired == stored {
        return Ok(());
    }
    match registry.update(&target, SERVICE_NAME, repaired, Subresource::Main, &opts).await {
        Ok(_) => Ok(()),
        // Changed or deleted meanwhile: the write that did it triggers the next round.
        Err(e) if e.code == 409 || e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Sets (or, for None, removes) the value at a JSON pointer whose parents are objects,
/// creating missing parents.
fn set_pointer(obj: &mut Value, pointer: &str, value: Option<Value>) {
    let tokens: Vec<String> = pointer.split('/').skip(1).map(|t| t.replace("~1", "/").replace("~0", "~")).collect();
    let Some((last, parents)) = tokens.split_last() else { return };
    let mut at = obj;
    for token in parents {
        if !at[token.as_str()].is_object() {
            if value.is_none() {
                return;
            }
            at[token.as_str()] = json!({});
        }
        at = &mut at[token.as_str()];
    }
    let Some(map) = at.as_object_mut() else { return };
    match value {
        Some(v) => {
            map.insert(last.clone(), v);
        }
        None => {
            map.remove(last);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn desired_objects_name_the_served_address() {
        let d = Desired::for_endpoint("127.0.0.1:6443".parse().expect("addr"));
        assert_eq!(d.service["spec"]["ports"][0]["targetPort"], 6443);
        assert_eq!(d.endpoints["subsets"][0]["addresses"][0]["ip"], "127.0.0.1");
        assert_eq!(d.slice["addressType"], "IPv4");
        assert_eq!(served_ip("0.0.0.0:1".parse().expect("addr")), "127.0.0.1");
    }

    #[test]
    fn set_pointer_sets_and_removes() {
        let mut v = json!({"metadata": {}});
        set_pointer(&mut v, "/metadata/labels/kubernetes.io~1service-name", Some(json!("kubernetes")));
        assert_eq!(v["metadata"]["labels"]["kubernetes.io/service-name"], "kubernetes");
        set_pointer(&mut v, "/metadata/labels/kubernetes.io~1service-name", None);
        assert_eq!(v["metadata"]["labels"], json!({}));
        set_pointer(&mut v, "/spec/selector", None);
        assert!(v.get("spec").is_none());
    }
}
