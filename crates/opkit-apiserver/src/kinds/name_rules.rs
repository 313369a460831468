//! The audit of `metadata.name` rules: for every built-in resource the server serves,
//! the rule kube-apiserver's validation applies to its names (from each kind's
//! `Validate<Kind>Name` in kube 1.33), checked against the kind's strategy. A new
//! built-in fails this test until its rule is written here.

use super::STRATEGIES;
use crate::catalog::Catalog;

/// kube's name rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NameRule {
    /// `NameIsDNSSubdomain`.
    Subdomain,
    /// `NameIsDNSLabel`.
    Label,
    /// `NameIsDNS1035Label`.
    Dns1035Label,
    /// `path.ValidatePathSegmentName`.
    PathSegment,
    /// A subdomain of at most 52 characters (CronJobs).
    ShortSubdomain,
}

use NameRule::*;

/// (group, resource, rule) for every served built-in.
const KUBE_RULES: &[(&str, &str, NameRule)] = &[
    ("", "namespaces", Label),
    ("", "pods", Subdomain),
    ("", "services", Dns1035Label),
    ("", "endpoints", Subdomain),
    ("", "configmaps", Subdomain),
    ("", "secrets", Subdomain),
    ("", "serviceaccounts", Subdomain),
    ("", "events", Subdomain),
    ("", "nodes", Subdomain),
    ("", "persistentvolumeclaims", Subdomain),
    ("", "persistentvolumes", Subdomain),
    ("", "replicationcontrollers", Subdomain),
    ("", "limitranges", Subdomain),
    ("", "resourcequotas", Subdomain),
    ("", "componentstatuses", Subdomain),
    ("apps", "deployments", Subdomain),
    ("apps", "replicasets", Subdomain),
    ("apps", "statefulsets", Label),
    ("apps", "daemonsets", Subdomain),
    ("apps", "controllerrevisions", Subdomain),
    ("batch", "jobs", Subdomain),
    ("batch", "cronjobs", ShortSubdomain),
    ("coordination.k8s.io", "leases", Subdomain),
    ("events.k8s.io", "events", Subdomain),
    ("discovery.k8s.io", "endpointslices", Subdomain),
    ("rbac.authorization.k8s.io", "roles", PathSegment),
    ("rbac.authorization.k8s.io", "rolebindings", PathSegment),
    ("rbac.authorization.k8s.io", "clusterroles", PathSegment),
    ("rbac.authorization.k8s.io", "clusterrolebindings", PathSegment),
    ("apiextensions.k8s.io", "customresourcedefinitions", Subdomain),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations", Subdomain),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", Subdomain),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies", Subdomain),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings", Subdomain),
    ("policy", "poddisruptionbudgets", Subdomain),
    ("networking.k8s.io", "ingresses", Subdomain),
    ("networking.k8s.io", "networkpolicies", Subdomain),
    ("networking.k8s.io", "ingressclasses", Subdomain),
    ("autoscaling", "horizontalpodautoscalers", Subdomain),
    ("certificates.k8s.io", "certificatesigningrequests", Subdomain),
    ("scheduling.k8s.io", "priorityclasses", Subdomain),
    ("storage.k8s.io", "storageclasses", Subdomain),
    ("apiregistration.k8s.io", "apiservices", PathSegment),
    ("node.k8s.io", "runtimeclasses", Subdomain),
    ("flowcontrol.apiserver.k8s.io", "flowschemas", Subdomain),
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations", Subdomain),
];

/// Names that tell the rules apart: (name, accepted by Subdomain, Label, Dns1035Label,
/// PathSegment, ShortSubdomain).
const PROBES: &[(&str, [bool; 5])] = &[
    ("web", [true, true, true, true, true]),
    ("web.v2", [true, false, false, true, true]),
    ("1web", [true, true, false, true, true]),
    ("a:b", [false, false, false, true, false]),
    ("Upper", [false, false, false, true, false]),
    ("a/b", [false, false, false, false, false]),
    ("..", [false, false, false, false, false]),
    ("c2345678901234567890123456789012345678901234567890123", [true, true, true, true, false]),
];

fn accepts(rule: NameRule, probe: &[bool; 5]) -> bool {
    let column = match rule {
        Subdomain => 0,
        Label => 1,
        Dns1035Label => 2,
        PathSegment => 3,
        ShortSubdomain => 4,
    };
    probe[column]
}

#[test]
fn every_builtin_names_its_objects_by_kubes_rule() {
    let catalog = Catalog::new().snapshot();
    for (group, versions) in catalog.groups() {
        for version in versions {
            for info in catalog.resources(&group, &version) {
                // The identity APIs store nothing: their names are never validated.
                if info.verbs == ["create"] {
                    continue;
                }
                let rule = KUBE_RULES.iter().find(|(g, r, _)| *g == info.group && *r == info.resource);
                let Some((_, _, rule)) = rule else {
                    panic!("{}/{}: write kube's name rule in KUBE_RULES", info.group, info.resource);
                };
                let strategy = STRATEGIES.for_resource(&info);
                for (name, probe) in PROBES {
                    let accepted = strategy.validate_name(name).is_none();
                    assert_eq!(accepted, accepts(*rule, probe), "{}/{} {name:?} ({rule:?})", info.group, info.resource);
                }
            }
        }
    }
}
