//! Who each built-in controller acts as, as kube-controller-manager runs each controller
//! under its own ServiceAccount (`--use-service-account-credentials`): the shared cache
//! reads as `system:kube-controller-manager`, and each controller writes as
//! `system:serviceaccount:kube-system:<controller>`, bound by the API server's bootstrap
//! policy to `system:controller:<controller>`. The scheduler is `system:kube-scheduler`,
//! the simulated nodes and kubelets are a node (`system:nodes`), and the loops that live
//! inside kube-apiserver (APIService availability, FlowSchema conditions) act as the
//! API server. The clients impersonate these users through the admin's credentials, so
//! RBAC decides every write exactly as it would for the real components.

use kube::{Client, Config};
use opkit::Manager;

use crate::ControllersConfig;

/// The identity of the cache (the shared informers) and of the controllers that run
/// with kube-controller-manager's own credentials (the token controller).
pub const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
/// The scheduler's user.
pub const SCHEDULER: &str = "system:kube-scheduler";
/// The simulated nodes' and kubelets' user (in group `system:nodes`).
pub const NODE: &str = "system:node:opkit-simulated-node";
/// kube-proxy's user (bound to `system:node-proxier`): the kubelets' Service proxy and
/// cluster DNS follow Services and EndpointSlices as it.
pub const KUBE_PROXY: &str = "system:kube-proxy";
/// The API server's own user (in `system:masters`), for its in-process loops.
pub const APISERVER: &str = "system:apiserver";

/// The local cert-manager stand-in (`certmanager`): cert-manager's chart grants its
/// controllers read and write access to Secrets and to every kind it injects CAs into
/// across the cluster; the stand-in acts with the cluster administrators' group.
pub const CERT_MANAGER: Identity =
    Identity { user: "system:serviceaccount:cert-manager:cert-manager", groups: &["system:masters"] };

/// The user and groups a built-in controller acts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// The user name.
    pub user: &'static str,
    /// Groups to assert (empty: the server's own for the user, e.g. a ServiceAccount's).
    pub groups: &'static [&'static str],
}

const fn account(user: &'static str) -> Identity {
    Identity { user, groups: &[] }
}

/// The identity of the controller called `name` (see [`crate::ALL`]).
pub fn of(name: &str) -> Identity {
    match name {
        "namespace" => account("system:serviceaccount:kube-system:namespace-controller"),
        "serviceaccount" => account("system:serviceaccount:kube-system:service-account-controller"),
        "root-ca-cert-publisher" => account("system:serviceaccount:kube-system:root-ca-cert-publisher"),
        "garbagecollector" => account("system:serviceaccount:kube-system:generic-garbage-collector"),
        "deployment" => account("system:serviceaccount:kube-system:deployment-controller"),
        "replicaset" => account("system:serviceaccount:kube-system:replicaset-controller"),
        "statefulset" => account("system:serviceaccount:kube-system:statefulset-controller"),
        "daemonset" => account("system:serviceaccount:kube-system:daemon-set-controller"),
        "job" => account("system:serviceaccount:kube-system:job-controller"),
        "cronjob" => account("system:serviceaccount:kube-system:cronjob-controller"),
        "endpoints" => account("system:serviceaccount:kube-system:endpoint-controller"),
        "service-lb" => account("system:serviceaccount:kube-system:service-controller"),
        "persistentvolume" => account("system:serviceaccount:kube-system:persistent-volume-binder"),
        "disruption" => account("system:serviceaccount:kube-system:disruption-controller"),
        "resourcequota" => account("system:serviceaccount:kube-system:resourcequota-controller"),
        "csrsigning" => account("system:serviceaccount:kube-system:certificate-controller"),
        "clusterrole-aggregation" => account("system:serviceaccount:kube-system:clusterrole-aggregation-controller"),
        "scheduler" => account(SCHEDULER),
        "kube-proxy" => account(KUBE_PROXY),
        "nodes" | "kubelet" => Identity { user: NODE, groups: &["system:nodes"] },
        "apiservice" | "flowcontrol" => Identity { user: APISERVER, groups: &["system:masters"] },
        "cert-manager" => CERT_MANAGER,
        _ => account(CONTROLLER_MANAGER),
    }
}

/// A client acting as `identity` through `admin`'s credentials.
pub fn client_as(admin: &Config, identity: Identity) -> Result<Client, kube::Error> {
    let mut config = admin.clone();
    config.auth_info.impersonate = Some(identity.user.to_string());
    config.auth_info.impersonate_groups =
        (!identity.groups.is_empty()).then(|| identity.groups.iter().map(|g| g.to_string()).collect());
    Client::try_from(config)
}

/// The client controller `name` reconciles with: its own identity when `cfg` carries
/// the admin configuration to derive it from, else the manager's client.
pub(crate) fn client_for(mgr: &Manager, cfg: &ControllersConfig, name: &str) -> Client {
    match &cfg.identities {
        Some(admin) => client_as(admin, of(name)).unwrap_or_else(|e| {
            tracing::error!(controller = name, error = %e, "cannot build the controller's client; using the manager's");
            mgr.client()
        }),
        None => mgr.client(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_controller_has_an_identity_and_the_unknown_are_the_controller_manager() {
        for name in crate::ALL {
            assert!(!of(name).user.is_empty(), "{name}");
        }
        assert_eq!(of("deployment").user, "system:serviceaccount:kube-system:deployment-controller");
        assert_eq!(of("serviceaccount-token").user, CONTROLLER_MANAGER);
        assert_eq!(of("kubelet").groups, ["system:nodes"]);
    }
}
