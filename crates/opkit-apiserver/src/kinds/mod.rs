//! Per-kind behaviour of the API server, one module per kind (or family of kinds), as
//! kube-apiserver's `pkg/registry/<group>/<kind>/strategy.go` files are.
//!
//! # Strategy design
//! The registry ([`crate::registry`]) is one generic store: it knows Kubernetes' object
//! semantics (metadata, optimistic concurrency, generation, finalizers, field management)
//! but never the name of a kind. Everything that differs from kind to kind is a method
//! of the [`Strategy`] trait, whose defaults are the generic behaviour: create-time
//! preparation (server-set status), update preparation (status-subresource rules),
//! defaulting, name and object validation, hooks before and after a commit and after
//! removal, deletion rules (graceful pod deletion, staged namespace deletion), conversion
//! between a served and a stored form, extra subresources and the Table printer. Each
//! built-in resource with special behaviour has a unit struct implementing the trait in
//! its kind's module; [`strategy_for`] finds it once per request (it is carried by the
//! request's [`crate::registry::Target`]). Adding a kind means adding a module and one
//! line to [`BUILTIN`], not editing the store.

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

use serde_json::Value;

use crate::auth::UserInfo;
use crate::catalog::ResourceInfo;
use crate::error::ApiResult;
use crate::registry::Registry;
use crate::registry::meta::validate_subdomain;
use crate::schema::FieldError;
use crate::table::{self, Printer};
use printed::{Printed, PrintedReturningObject};

/// Work a strategy asks the registry to do once a write is committed, given the object
/// as stored.
pub(crate) type AfterCommit = Box<dyn FnOnce(&Registry, &Value) + Send>;

/// A subresource a kubelet serves: its name, the kind discovery lists for it, its verbs.
pub(crate) struct KubeletSubresource {
    /// The subresource, e.g. `exec`.
    pub name: &'static str,
    /// The kind discovery names, e.g. `PodExecOptions`.
    pub kind: &'static str,
    /// The verbs discovery lists.
    pub verbs: &'static [&'static str],
}

/// The behaviour of one kind. Every method has the generic behaviour as its default.
pub(crate) trait Strategy: Sync {
    /// Sets server-owned fields of a new object (kube's `PrepareForCreate`). By default
    /// a client cannot set the status of a resource that has a status subresource.
    fn prepare_for_create(&self, obj: &mut Value, has_status: bool) {
        if has_status && let Some(o) = obj.as_object_mut() {
            o.remove("status");
        }
    }

    /// Keeps what an update of the main resource may not change (kube's
    /// `PrepareForUpdate`): with a status subresource, the stored status.
    fn prepare_for_update(&self, new: &mut Value, old: &Value, has_status: bool) {
        if has_status {
            keep_stored_status(new, old);
        }
    }

    /// Builds the object an update of the status subresource stores (kube's
    /// `PrepareForUpdate` of the status strategy): the stored object with the new status
    /// and the managed fields the client sent.
    fn prepare_for_status_update(&self, body: &Value, old: &Value) -> Value {
        stored_with_new_status(body, old)
    }

    /// Validates an update of the status subresource of a built-in kind (kube's
    /// `ValidateUpdate` of the kind's status strategy); `new` is what would be stored.
    fn validate_status_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Fills defaults in place (kube's `SetDefaults_*`); `creating` enables create-only
    /// defaults such as generated selectors and allocated addresses.
    fn default(&self, _obj: &mut Value, _creating: bool) {}

    /// Validates `metadata.name` (a DNS subdomain by default).
    fn validate_name(&self, name: &str) -> Option<FieldError> {
        validate_subdomain("metadata.name", name)
    }

    /// Validates the object (kube's `Validate` / `ValidateUpdate`).
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// kube's admission plugins of this kind that read other objects (such as Priority):
    /// run after defaulting and before validation; may change the object (`old` is None
    /// on create) or refuse it, typically with a Forbidden. `user` is who is writing.
    fn admit(&self, _registry: &Registry, _obj: &mut Value, _old: Option<&Value>, _user: &UserInfo) -> ApiResult<()> {
        Ok(())
    }

    /// Takes what a valid object needs from pools shared across the cluster (kube's
    /// allocators, such as Service node ports), reading other objects through `registry`;
    /// `old` is None on create. Returns the fields whose values cannot be had.
    fn allocate(&self, _registry: &Registry, _obj: &mut Value, _old: Option<&Value>) -> Vec<FieldError> {
        Vec::new()
    }

    /// Whether [`Strategy::allocate`] takes anything: writes of such kinds hold the
    /// registry's allocation lock from admission to commit.
    fn allocates(&self) -> bool {
        false
    }

    /// Computes server-set state just before a write (`old` is None on create) and what
    /// to do once it is committed.
    fn before_commit(&self, _obj: &mut Value, _old: Option<&Value>, _now: &str) -> ApiResult<Option<AfterCommit>> {
        Ok(None)
    }

    /// Runs after an object is finally removed from storage.
    fn after_remove(&self, _registry: &Registry, _stored: &Value) {}

    /// The grace period of a graceful deletion, or None to delete at once (kube's
    /// `CheckGracefulDelete`).
    fn grace_period(&self, _obj: &Value, _options: &Value) -> Option<i64> {
        None
    }

    /// Whether a deletion always first marks the object terminating, leaving its removal
    /// to a controller, even with no finalizers.
    fn staged_deletion(&self) -> bool {
        false
    }

    /// Changes an object gets when it is marked for deletion without being removed.
    fn mark_terminating(&self, _obj: &mut Value) {}

    /// Whether something other than `metadata.finalizers` still holds a terminating
    /// object in storage.
    fn holds_removal(&self, _obj: &Value) -> bool {
        false
    }

    /// Whether objects served at `version` are stored in another form (another
    /// resource's, or another version's; see [`Strategy::convert_to_storage`]).
    fn converts_storage(&self, _version: &str) -> bool {
        false
    }

    /// Turns an object in the form served at `version` into the stored form.
    fn convert_to_storage(&self, _obj: &mut Value, _version: &str) {}

    /// Turns a stored object into the form served at `version` (apiVersion is set by
    /// the caller).
    fn convert_from_storage(&self, _obj: &mut Value, _version: &str) {}

    /// Whether an immediate DELETE answers with the deleted object (kube's
    /// `ReturnDeletedObject`); otherwise it answers a `Status` of `Success` naming it.
    fn returns_deleted_object(&self) -> bool {
        false
    }

    /// Whether the resource has an `eviction` subresource (pods).
    fn has_eviction(&self) -> bool {
        false
    }

    /// The subresources a kubelet serves for the kind (kube's connect subresources:
    /// `pods/log`, `pods/exec`, ...), each with the kind discovery names for it and its
    /// verbs; the handlers proxy them, discovery lists them.
    fn kubelet_subresources(&self) -> &'static [KubeletSubresource] {
        &[]
    }

    /// The kind's own subresources that are read (as the whole object) and written
    /// (update, patch) like `status`, e.g. `pods/ephemeralcontainers`.
    fn update_subresources(&self) -> &'static [&'static str] {
        &[]
    }

    /// Builds the object an update of the subresource `sub` (one of
    /// [`Strategy::update_subresources`]) stores from the request's `body` and the stored
    /// `old` (kube's `PrepareForUpdate` of that subresource's strategy).
    fn prepare_for_subresource_update(&self, _sub: &str, _body: &Value, old: &Value) -> Value {
        old.clone()
    }

    /// Validates an update of the subresource `sub` (kube's `ValidateUpdate` of that
    /// subresource's strategy).
    fn validate_subresource_update(&self, _sub: &str, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Whether the resource has a `finalize` subresource.
    fn has_finalize(&self) -> bool {
        false
    }

    /// The built-in Table printer, or None for kube's default table.
    fn table(&self) -> Option<Printer> {
        None
    }
}

/// The generic update rule of a resource with a status subresource: `new` gets the
/// stored status of `old`.
pub(crate) fn keep_stored_status(new: &mut Value, old: &Value) {
    match old.get("status") {
        Some(s) => new["status"] = s.clone(),
        None => {
            if let Some(o) = new.as_object_mut() {
                o.remove("status");
            }
        }
    }
}

/// The generic status-subresource update: the stored object `old` with the status and
/// the managed fields of the request's `body`.
pub(crate) fn stored_with_new_status(body: &Value, old: &Value) -> Value {
    let mut n = old.clone();
    n["status"] = body["status"].clone();
    if let (Some(mf), Some(m)) = (body["metadata"]["managedFields"].as_array(), n["metadata"].as_object_mut()) {
        m.insert("managedFields".into(), Value::Array(mf.clone()));
    }
    n
}

/// The strategy of built-in resources without special behaviour.
struct Generic;

impl Strategy for Generic {}

/// The strategy of custom resources: generic, but a DELETE answers with the deleted
/// object, as apiextensions-apiserver's custom resource store does.
struct CustomResources;

impl Strategy for CustomResources {
    fn returns_deleted_object(&self) -> bool {
        true
    }
}

/// Built-in resources with their own strategy: (group, resource, strategy).
static BUILTIN: &[(&str, &str, &dyn Strategy)] = &[
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
    ("", "replicationcontrollers", &Printed(table::workloads::replicationcontrollers)),
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

/// The strategy of a built-in resource that has one.
pub(crate) fn builtin_strategy(group: &str, resource: &str) -> Option<&'static dyn Strategy> {
    BUILTIN.iter().find(|(g, r, _)| *g == group && *r == resource).map(|(_, _, s)| *s)
}

/// The strategy of a served resource: its own for built-ins that have one, the generic
/// strategy otherwise (custom resources included).
pub(crate) fn strategy_for(info: &ResourceInfo) -> &'static dyn Strategy {
    if !info.builtin {
        return &CustomResources;
    }
    builtin_strategy(&info.group, &info.resource).unwrap_or(&Generic)
}

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
        let strategy = strategy_for(&info);
        assert!(strategy.table().is_none() && !strategy.has_finalize() && strategy.returns_deleted_object());
        let pods = Catalog::new().snapshot().by_resource("", "pods").expect("pods served");
        assert!(strategy_for(&pods).table().is_some());
    }
}
