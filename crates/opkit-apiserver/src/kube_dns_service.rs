//! The `kube-dns` Service in `kube-system`, as kubeadm's CoreDNS addon creates it: type
//! ClusterIP at `10.96.0.10` (the tenth address of the Service range), ports `dns`
//! 53/UDP, `dns-tcp` 53/TCP and `metrics` 9153/TCP, label `k8s-app: kube-dns`. It is
//! created once at start, before any client can take its address; the cluster DNS that
//! answers it is served by the kubelets, on each real pod's host end, so it has no
//! selector and no endpoints. A Service a client deleted or changed is left so (on a
//! restart it is created again if its address is still free).

use serde_json::json;

use crate::auth::user::UserInfo;
use crate::error::ApiResult;
use crate::registry::{Registry, WriteOptions};

/// The Service's cluster IP.
pub(crate) const CLUSTER_IP: &str = "10.96.0.10";
/// The Service's name.
const SERVICE_NAME: &str = "kube-dns";
/// The Service's namespace.
const NAMESPACE: &str = "kube-system";

/// Creates the Service unless one of its name exists.
pub(crate) async fn create(registry: &Registry) -> ApiResult<()> {
    let catalog = registry.catalog().snapshot();
    let Some(info) = catalog.lookup("", "v1", "services") else {
        return Ok(());
    };
    let target = registry.target(info, "v1".into(), Some(NAMESPACE.into()));
    if registry.stored(&target.info.id, NAMESPACE, SERVICE_NAME).await?.is_some() {
        return Ok(());
    }
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE,
            "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
        "spec": {
            "type": "ClusterIP", "clusterIP": CLUSTER_IP, "clusterIPs": [CLUSTER_IP],
            "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153},
            ],
            "sessionAffinity": "None",
        },
    });
    let opts = WriteOptions { field_manager: "kubeadm".into(), user: UserInfo::apiserver(), ..Default::default() };
    match registry.create(&target, service, &opts).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
