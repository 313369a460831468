//! KUDO's manager as `kubectl kudo init` installs it in the cluster: namespace
//! `kudo-system`, ServiceAccount `kudo-manager` bound to `cluster-admin`, and the
//! one-replica StatefulSet `kudo-controller-manager` whose container runs the engine
//! (`opkit kudo manager` in the opkit image); [`manager_manifests`] builds them (for
//! `--dry-run`) and [`install_manager`] server-side applies them (idempotent).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::KudoError;
use crate::crds::FIELD_MANAGER;

/// KUDO's namespace for its manager.
pub const MANAGER_NAMESPACE: &str = "kudo-system";
/// The manager's ServiceAccount.
pub const MANAGER_SERVICE_ACCOUNT: &str = "kudo-manager";
/// The manager's StatefulSet (its pod is `kudo-controller-manager-0`).
pub const MANAGER_STATEFULSET: &str = "kudo-controller-manager";
/// The ClusterRoleBinding of the ServiceAccount to `cluster-admin`, as KUDO's init names it.
pub const MANAGER_ROLE_BINDING: &str = "kudo-manager-rolebinding";

/// How the manager is installed.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// The manager's image (`--kudo-image`).
    pub image: String,
    /// The command the container runs (the image's entrypoint then its arguments).
    pub command: Vec<String>,
}

/// The manager's objects, in the order they are applied: Namespace, ServiceAccount,
/// ClusterRoleBinding, StatefulSet.
pub fn manager_manifests(opts: &ManagerOptions) -> Vec<Value> {
    let labels = json!({"app": "kudo-manager", "control-plane": "controller-manager"});
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": MANAGER_NAMESPACE, "labels": {"app": "kudo-manager", "controller-tools.k8s.io": "1.0"}}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": MANAGER_SERVICE_ACCOUNT, "namespace": MANAGER_NAMESPACE, "labels": {"app": "kudo-manager"}}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": MANAGER_ROLE_BINDING},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": MANAGER_SERVICE_ACCOUNT, "namespace": MANAGER_NAMESPACE}]}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": MANAGER_STATEFULSET, "namespace": MANAGER_NAMESPACE, "labels": labels},
        "spec": {
            "replicas": 1,
            "serviceName": "kudo-controller-manager-service",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": MANAGER_SERVICE_ACCOUNT,
                    "terminationGracePeriodSeconds": 10,
                    "containers": [{
                        "name": "manager",
                        "image": opts.image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": opts.command,
                        // The pod: the leader names its container on the Lease, so a
                        // standby (with more replicas) takes over once it ends.
                        "env": [
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                        ],
                    }],
                },
            },
        }}),
    ]
}

/// Server-side applies the manager's objects (re-running it changes nothing).
pub async fn install_manager(client: &kube::Client, opts: &ManagerOptions) -> Result<(), KudoError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let decode = |v: Value| KudoError::Crd(format!("KUDO's manager manifests do not decode: {v}"));
    let mut objects = manager_manifests(opts).into_iter();
    let (Some(ns), Some(sa), Some(crb), Some(sts)) = (objects.next(), objects.next(), objects.next(), objects.next())
    else {
        return Err(KudoError::Crd("KUDO's manager manifests are incomplete".into()));
    };
    let ns: Namespace = serde_json::from_value(ns.clone()).map_err(|_| decode(ns))?;
    let sa: ServiceAccount = serde_json::from_value(sa.clone()).map_err(|_| decode(sa))?;
    let crb: ClusterRoleBinding = serde_json::from_value(crb.clone()).map_err(|_| decode(crb))?;
    let sts: StatefulSet = serde_json::from_value(sts.clone()).map_err(|_| decode(sts))?;
    Api::<Namespace>::all(client.clone()).patch(MANAGER_NAMESPACE, &params, &Patch::Apply(&ns)).await?;
    Api::<ServiceAccount>::namespaced(client.clone(), MANAGER_NAMESPACE)
        .patch(MANAGER_SERVICE_ACCOUNT, &params, &Patch::Apply(&sa))
        .await?;
    Api::<ClusterRoleBinding>::all(client.clone()).patch(MANAGER_ROLE_BINDING, &params, &Patch::Apply(&crb)).await?;
    Api::<StatefulSet>::namespaced(client.clone(), MANAGER_NAMESPACE)
        .patch(MANAGER_STATEFULSET, &params, &Patch::Apply(&sts))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifests_decode_and_run_the_given_command() {
        let opts = ManagerOptions {
            image: "opkit:dev".into(),
            command: vec!["opkit".into(), "kudo".into(), "manager".into()],
        };
        let objects = manager_manifests(&opts);
        assert_eq!(objects.len(), 4);
        let sts: StatefulSet = serde_json::from_value(objects[3].clone()).expect("a StatefulSet");
        let spec = sts.spec.expect("spec");
        assert_eq!(spec.replicas, Some(1));
        let pod = spec.template.spec.expect("pod spec");
        assert_eq!(pod.service_account_name.as_deref(), Some(MANAGER_SERVICE_ACCOUNT));
        assert_eq!(pod.containers[0].command.as_deref(), Some(opts.command.as_slice()));
        let crb: ClusterRoleBinding = serde_json::from_value(objects[2].clone()).expect("a ClusterRoleBinding");
        assert_eq!(crb.role_ref.name, "cluster-admin");
    }
}
