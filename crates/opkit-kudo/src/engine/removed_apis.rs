//! Packages written for older Kubernetes use API versions that Kubernetes has since
//! removed (`policy/v1beta1` PodDisruptionBudgets went in 1.25). Where the removed
//! version has a served successor with the same fields, the engine applies the object at
//! the successor (beyond KUDO, which fails the step on such a cluster); the step's object
//! is otherwise unchanged.

/// `(apiVersion, kind)` removed → the apiVersion that replaced it with the same fields.
const REPLACED: &[(&str, &str, &str)] = &[
    ("policy/v1beta1", "PodDisruptionBudget", "policy/v1"),
    ("batch/v1beta1", "CronJob", "batch/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "Role", "rbac.authorization.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "RoleBinding", "rbac.authorization.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "ClusterRole", "rbac.authorization.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "ClusterRoleBinding", "rbac.authorization.k8s.io/v1"),
    ("scheduling.k8s.io/v1beta1", "PriorityClass", "scheduling.k8s.io/v1"),
    ("storage.k8s.io/v1beta1", "StorageClass", "storage.k8s.io/v1"),
];

/// The successor of a removed `apiVersion` for `kind`, if it has one.
pub(crate) fn successor(api_version: &str, kind: &str) -> Option<&'static str> {
    REPLACED.iter().find(|(v, k, _)| *v == api_version && *k == kind).map(|(_, _, to)| *to)
}

#[cfg(test)]
mod tests {
    #[test]
    fn pdbs_move_to_policy_v1() {
        assert_eq!(super::successor("policy/v1beta1", "PodDisruptionBudget"), Some("policy/v1"));
        assert_eq!(super::successor("apps/v1", "Deployment"), None);
    }
}
