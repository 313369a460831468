//! Per-kind behaviour of the API server, one module per kind (or family of kinds), as
//! kube-apiserver's `pkg/registry/<group>/<kind>/strategy.go` files are.
//!
//! # Strategy design
//! The registry ([`crate::registry`]) is one generic store: it knows Kubernetes' object
//! semantics but never the name of a kind. Everything that differs from kind to kind is
//! a method of the [`Strategy`] trait (`registry/strategy.rs`, below this module), whose
//! defaults are the generic behaviour. Each built-in resource with special behaviour has
//! a unit struct implementing the trait in its kind's module, and one line in
//! [`BUILTIN`]; the server hands [`STRATEGIES`] to the registry it builds, and the
//! registry finds a resource's strategy once per request (carried by the request's
//! [`crate::registry::Target`]). Adding a kind means adding a module and one line to
//! [`BUILTIN`], not editing the store. Strategies read other objects through the
//! registry's read-only [`crate::registry::view::StoreView`].
//!
//! The kinds whose objects every cluster starts with also say what those are (their
//! `bootstrap`, run by `crate::bootstrap` before the server serves).

mod admission_policies;
mod apiservices;
mod autoscaling;
mod batch;
mod certificates;
mod componentstatuses;
pub(crate) use componentstatuses::bootstrap as bootstrap_component_statuses;
mod configmaps;
pub(crate) mod crds;
mod defaulting;
mod ephemeral_containers;
mod events;
mod flowcontrol;
mod limitranges;
pub(crate) use flowcontrol::bootstrap as bootstrap_flowcontrol;
pub(crate) mod namespaces;
pub(crate) use apiservices::bootstrap as bootstrap_apiservices;
#[cfg(test)]
mod name_rules;
mod nodes;
mod pod_spec;
mod pods;
mod printed;
mod priorityclasses;
pub(crate) use priorityclasses::bootstrap as bootstrap_priority_classes;
mod rbac;
mod runtimeclasses;
mod secrets;
mod services;
mod storage;
mod webhook_configurations;
mod workloads;

pub(crate) use crate::registry::strategy::{
    AfterCommit, BuiltinStrategy, KubeletSubresource, Strategies, Strategy, keep_stored_status, stored_with_new_status,
};
use crate::table;
use printed::{Printed, PrintedReturningObject};

/// Built-in resources with their own strategy: (group, resource, strategy).
static BUILTIN: &[BuiltinStrategy] = &[
    ("", "pods", &pods::Pods),
    ("", "namespaces", &namespaces::Namespaces),
    ("", "services", &services::Services),
    ("", "secrets", &secrets::Secrets),
    ("", "configmaps", &configmaps::ConfigMaps),
    ("", "limitranges", &limitranges::LimitRanges),
    ("", "componentstatuses", &componentstatuses::ComponentStatuses),
    ("", "nodes", &nodes::Nodes),
    ("", "events", &events::CoreEvents),
    ("events.k8s.io", "events", &events::EventsV1),
    ("", "persistentvolumeclaims", &storage::PersistentVolumeClaims),
    ("", "persistentvolumes", &storage::PersistentVolumes),
    ("", "endpoints", &Printed(table::core::endpoints)),
    ("", "serviceaccounts", &PrintedReturningObject(table::core::serviceaccounts)),
    ("", "replicationcontrollers", &workloads::ReplicationControllers),
    ("apps", "deployments", &workloads::Deployments),
    ("apps", "replicasets", &workloads::ReplicaSets),
    ("apps", "statefulsets", &workloads::StatefulSets),
    ("apps", "daemonsets", &workloads::DaemonSets),
    ("batch", "jobs", &batch::Jobs),
    ("batch", "cronjobs", &batch::CronJobs),
    ("apiextensions.k8s.io", "customresourcedefinitions", &crds::CustomResourceDefinitions),
    ("networking.k8s.io", "ingresses", &Printed(table::networking::ingresses)),
    ("networking.k8s.io", "ingressclasses", &Printed(table::networking::ingressclasses)),
    ("networking.k8s.io", "networkpolicies", &Printed(table::networking::networkpolicies)),
    ("discovery.k8s.io", "endpointslices", &Printed(table::networking::endpointslices)),
    ("coordination.k8s.io", "leases", &Printed(table::coordination::leases)),
    ("rbac.authorization.k8s.io", "roles", &rbac::RbacObjects::role("roles")),
    ("rbac.authorization.k8s.io", "clusterroles", &rbac::RbacObjects::role("clusterroles")),
    (
        "rbac.authorization.k8s.io",
        "rolebindings",
        &rbac::RbacObjects::binding("rolebindings", table::rbac::rolebindings),
    ),
    (
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        &rbac::RbacObjects::binding("clusterrolebindings", table::rbac::clusterrolebindings),
    ),
    ("autoscaling", "horizontalpodautoscalers", &autoscaling::HorizontalPodAutoscalers),
    ("certificates.k8s.io", "certificatesigningrequests", &certificates::CertificateSigningRequests),
    ("policy", "poddisruptionbudgets", &Printed(table::policy::poddisruptionbudgets)),
    ("scheduling.k8s.io", "priorityclasses", &priorityclasses::PriorityClasses),
    ("storage.k8s.io", "storageclasses", &Printed(table::storage::storageclasses)),
    ("apiregistration.k8s.io", "apiservices", &apiservices::ApiServices),
    ("node.k8s.io", "runtimeclasses", &runtimeclasses::RuntimeClasses),
    ("flowcontrol.apiserver.k8s.io", "flowschemas", &flowcontrol::FlowSchemas),
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations", &flowcontrol::PriorityLevelConfigurations),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", &webhook_configurations::WebhookConfigurations),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations", &webhook_configurations::WebhookConfigurations),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies", &admission_policies::ValidatingAdmissionPolicies),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
        &admission_policies::ValidatingAdmissionPolicyBindings,
    ),
];

/// The strategies of the built-in kinds, which the server hands to the registry.
pub(crate) static STRATEGIES: Strategies = Strategies::new(BUILTIN);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    /// A strategy registered under a misspelt name would silently never run.
    #[test]
    fn every_strategy_names_a_served_builtin() {
        let catalog = Catalog::new().snapshot();
        for (group, resource, _) in BUILTIN {
            let info = catalog.by_resource(group, resource);
            assert!(info.is_some_and(|i| i.builtin), "{group}/{resource} is not a served built-in");
        }
    }

    #[test]
    fn custom_resources_get_their_own_strategy() {
        let crd = serde_json::json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "pods", "kind": "Pod"}, "versions": [{"name": "v1", "served": true, "storage": true}]}});
        let info = crate::catalog::resource_from_crd(&crd).expect("compiles");
        let strategy = STRATEGIES.for_resource(&info);
        assert!(strategy.table().is_none() && !strategy.has_finalize() && strategy.returns_deleted_object());
        let pods = Catalog::new().snapshot().by_resource("", "pods").expect("pods served");
        assert!(STRATEGIES.for_resource(&pods).table().is_some());
    }
}
