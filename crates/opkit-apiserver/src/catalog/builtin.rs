//! The table of built-in resources the server serves, with the names, scopes, verbs and
//! subresources kube-apiserver gives them.

use super::{ResourceInfo, ScaleInfo, VersionInfo};
use crate::storage::ResourceId;

/// One row of the built-in table.
struct Row {
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    scale: bool,
    generation: bool,
    deletecollection: bool,
    read_only: bool,
    create_only: bool,
    stored_in: Option<(&'static str, &'static str)>,
    also_served: &'static [&'static str],
}

const fn row(
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Row {
    Row {
        group,
        version,
        resource,
        kind,
        namespaced,
        short: &[],
        categories: &[],
        status: false,
        scale: false,
        generation: false,
        deletecollection: true,
        read_only: false,
        create_only: false,
        stored_in: None,
        also_served: &[],
    }
}

impl Row {
    const fn short(mut self, s: &'static [&'static str]) -> Row {
        self.short = s;
        self
    }
    const fn all(mut self) -> Row {
        self.categories = &["all"];
        self
    }
    const fn cat(mut self, c: &'static [&'static str]) -> Row {
        self.categories = c;
        self
    }
    const fn status(mut self) -> Row {
        self.status = true;
        self
    }
    const fn scale(mut self) -> Row {
        self.scale = true;
        self
    }
    const fn generation(mut self) -> Row {
        self.generation = true;
        self
    }
    /// Without the `deletecollection` verb.
    const fn no_deletecollection(mut self) -> Row {
        self.deletecollection = false;
        self
    }
    /// Only `get` and `list` (objects the server itself keeps).
    const fn read_only(mut self) -> Row {
        self.read_only = true;
        self
    }
    /// Only `create`: the identity APIs, which store nothing and answer when created.
    const fn create_only(mut self) -> Row {
        self.create_only = true;
        self
    }
    /// Also served at these older versions (after the stored one in priority), each
    /// converted from and to the stored version by the kind's strategy.
    const fn also_served(mut self, versions: &'static [&'static str]) -> Row {
        self.also_served = versions;
        self
    }
    /// Stored with another resource's objects, as (group, resource).
    const fn stored_in(mut self, group: &'static str, resource: &'static str) -> Row {
        self.stored_in = Some((group, resource));
        self
    }
}

const NS: bool = true;
const CLUSTER: bool = false;

const ROWS: &[Row] = &[
    row("", "v1", "namespaces", "Namespace", CLUSTER).short(&["ns"]).status().no_deletecollection(),
    row("", "v1", "pods", "Pod", NS).short(&["po"]).all().status(),
    row("", "v1", "services", "Service", NS).short(&["svc"]).all().status(),
    row("", "v1", "endpoints", "Endpoints", NS).short(&["ep"]),
    row("", "v1", "configmaps", "ConfigMap", NS).short(&["cm"]),
    row("", "v1", "secrets", "Secret", NS),
    row("", "v1", "serviceaccounts", "ServiceAccount", NS).short(&["sa"]),
    row("", "v1", "events", "Event", NS).short(&["ev"]),
    row("", "v1", "nodes", "Node", CLUSTER).short(&["no"]).status(),
    row("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", NS).short(&["pvc"]).status(),
    row("", "v1", "persistentvolumes", "PersistentVolume", CLUSTER).short(&["pv"]).status(),
    row("", "v1", "replicationcontrollers", "ReplicationController", NS)
        .short(&["rc"])
        .all()
        .status()
        .scale()
        .generation(),
    row("", "v1", "limitranges", "LimitRange", NS).short(&["limits"]),
    row("", "v1", "resourcequotas", "ResourceQuota", NS).short(&["quota"]).status(),
    row("", "v1", "componentstatuses", "ComponentStatus", CLUSTER).short(&["cs"]).read_only(),
    row("apps", "v1", "deployments", "Deployment", NS).short(&["deploy"]).all().status().scale().generation(),
    row("apps", "v1", "replicasets", "ReplicaSet", NS).short(&["rs"]).all().status().scale().generation(),
    row("apps", "v1", "statefulsets", "StatefulSet", NS).short(&["sts"]).all().status().scale().generation(),
    row("apps", "v1", "daemonsets", "DaemonSet", NS).short(&["ds"]).all().status().generation(),
    row("apps", "v1", "controllerrevisions", "ControllerRevision", NS),
    row("batch", "v1", "jobs", "Job", NS).all().status().generation(),
    row("batch", "v1", "cronjobs", "CronJob", NS).short(&["cj"]).all().status().generation(),
    row("coordination.k8s.io", "v1", "leases", "Lease", NS),
    // events.k8s.io Events are stored with core Events, as kube-apiserver does.
    row("events.k8s.io", "v1", "events", "Event", NS).short(&["ev"]).stored_in("", "events"),
    row("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", NS),
    row("rbac.authorization.k8s.io", "v1", "roles", "Role", NS),
    row("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", NS),
    row("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", CLUSTER),
    row("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", CLUSTER),
    row("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", CLUSTER).create_only(),
    row("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", CLUSTER).create_only(),
    // kubectl 1.27's `auth whoami` asks v1beta1 (v1 came in 1.28).
    row("authentication.k8s.io", "v1beta1", "selfsubjectreviews", "SelfSubjectReview", CLUSTER).create_only(),
    row("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", CLUSTER).create_only(),
    row("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", CLUSTER).create_only(),
    row("authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", NS).create_only(),
    row("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", CLUSTER).create_only(),
    row("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", CLUSTER)
        .short(&["crd", "crds"])
        .cat(&["api-extensions"])
        .status()
        .generation(),
    row(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        CLUSTER,
    )
    .cat(&["api-extensions"])
    .generation(),
    row("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", CLUSTER)
        .cat(&["api-extensions"])
        .generation(),
    // Also served at v1beta1, whose objects are the same as v1's.
    row("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", CLUSTER)
        .also_served(&["v1beta1"])
        .cat(&["api-extensions"])
        .status()
        .generation(),
    row(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        CLUSTER,
    )
    .also_served(&["v1beta1"])
    .cat(&["api-extensions"])
    .generation(),
    row("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", NS).short(&["pdb"]).status().generation(),
    row("networking.k8s.io", "v1", "ingresses", "Ingress", NS).short(&["ing"]).status().generation(),
    row("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", NS).short(&["netpol"]).generation(),
    row("networking.k8s.io", "v1", "ingressclasses", "IngressClass", CLUSTER),
    // Stored at v2; v1 objects are converted (kinds/autoscaling.rs), as kube-apiserver does.
    row("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", NS)
        .also_served(&["v1"])
        .short(&["hpa"])
        .all()
        .status()
        .generation(),
    row("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", CLUSTER)
        .short(&["csr"])
        .status(),
    row("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", CLUSTER).short(&["pc"]),
    row("storage.k8s.io", "v1", "storageclasses", "StorageClass", CLUSTER).short(&["sc"]),
    row("apiregistration.k8s.io", "v1", "apiservices", "APIService", CLUSTER).cat(&["api-extensions"]).status(),
    row("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", CLUSTER),
    row("flowcontrol.apiserver.k8s.io", "v1", "flowschemas", "FlowSchema", CLUSTER).status().generation(),
    row("flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations", "PriorityLevelConfiguration", CLUSTER)
        .status()
        .generation(),
];

/// Every built-in resource.
pub(super) fn builtin_resources() -> Vec<ResourceInfo> {
    ROWS.iter()
        .map(|r| {
            let scale = r.scale.then(|| ScaleInfo {
                spec_replicas_path: ".spec.replicas".into(),
                status_replicas_path: ".status.replicas".into(),
                label_selector_path: Some(".status.selector".into()),
            });
            let mut verbs: Vec<&'static str> =
                vec!["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
            if !r.deletecollection {
                verbs.retain(|v| *v != "deletecollection");
            }
            if r.read_only {
                verbs = vec!["get", "list"];
            }
            if r.create_only {
                verbs = vec!["create"];
            }
            let (group, resource) = r.stored_in.unwrap_or((r.group, r.resource));
            let id = ResourceId::new(group, resource);
            ResourceInfo {
                id,
                group: r.group.to_string(),
                resource: r.resource.to_string(),
                singular: r.kind.to_lowercase(),
                kind: r.kind.to_string(),
                list_kind: format!("{}List", r.kind),
                namespaced: r.namespaced,
                short_names: r.short.iter().map(|s| s.to_string()).collect(),
                categories: r.categories.iter().map(|s| s.to_string()).collect(),
                verbs,
                generation: r.generation,
                builtin: true,
                conversion_webhook: None,
                versions: std::iter::once(r.version)
                    .chain(r.also_served.iter().copied())
                    .map(|version| VersionInfo {
                        name: version.to_string(),
                        served: true,
                        storage: version == r.version,
                        status: r.status,
                        scale: scale.clone(),
                        schema: None,
                        raw_schema: None,
                        columns: Vec::new(),
                        selectable_fields: Vec::new(),
                    })
                    .collect(),
            }
        })
        .collect()
}
