//! The `config/` files the helm and ansible plugin scaffolds share, as operator-sdk writes
//! them for both: the CRD and sample kustomizations (with the markers `create api` inserts
//! before), the manager's RBAC and the manager kustomization, and OLM's config/manifests
//! and config/scorecard (`make bundle`), the same files as the Rust layout's.

use minijinja::context;

use crate::commands::CliError;
use crate::fileplan::FilePlan;
use crate::scaffold::{env, render};

/// The OLM files, with the templates of the Rust layout's scaffold.
const OLM_FILES: [(&str, &str); 5] = [
    ("config/manifests/kustomization.yaml", "manifests_kustomization"),
    ("config/scorecard/kustomization.yaml", "scorecard_kustomization"),
    ("config/scorecard/bases/config.yaml", "scorecard_config.yaml"),
    ("config/scorecard/patches/basic.config.yaml", "scorecard_basic.config.yaml"),
    ("config/scorecard/patches/olm.config.yaml", "scorecard_olm.config.yaml"),
];

/// Where `create api` adds a CRD to `config/crd/kustomization.yaml`.
pub(crate) const CRD_MARKER: &str = "# +kubebuilder:scaffold:crdkustomizeresource";
/// Where `create api` adds a sample to `config/samples/kustomization.yaml`.
pub(crate) const SAMPLE_MARKER: &str = "# +kubebuilder:scaffold:manifestskustomizesamples";

/// Adds the shared `config/` files to `plan` for the project `project_name`;
/// `manager_role` is the plugin's base ClusterRole.
pub(crate) fn create_rbac_and_kustomizations(
    plan: &mut FilePlan,
    project_name: &str,
    manager_role: String,
) -> Result<(), CliError> {
    let (env, ctx) = (env(), context! { project_name => project_name });
    for (file, template) in OLM_FILES {
        plan.create(file, render(&env, template, &ctx)?)?;
    }
    plan.create("config/crd/kustomization.yaml", format!("resources:\n{CRD_MARKER}\n"))?;
    plan.create(
        "config/samples/kustomization.yaml",
        format!("## Append samples you want in your CSV to this file as resources ##\nresources:\n{SAMPLE_MARKER}\n"),
    )?;
    plan.create("config/rbac/role.yaml", manager_role)?;
    plan.create(
        "config/rbac/service_account.yaml",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: controller-manager\n  namespace: system\n",
    )?;
    plan.create("config/rbac/role_binding.yaml", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: manager-rolebinding\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: manager-role\nsubjects:\n- kind: ServiceAccount\n  name: controller-manager\n  namespace: system\n")?;
    plan.create("config/rbac/leader_election_role.yaml", "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: leader-election-role\n  namespace: system\nrules:\n- apiGroups:\n  - coordination.k8s.io\n  resources:\n  - leases\n  verbs:\n  - get\n  - list\n  - watch\n  - create\n  - update\n  - patch\n  - delete\n# A standby watches the leader's pod, to take over as soon as its container ends.\n- apiGroups:\n  - \"\"\n  resources:\n  - pods\n  verbs:\n  - get\n  - list\n  - watch\n- apiGroups:\n  - \"\"\n  resources:\n  - events\n  verbs:\n  - create\n  - patch\n")?;
    plan.create("config/rbac/leader_election_role_binding.yaml", "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: leader-election-rolebinding\n  namespace: system\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: leader-election-role\nsubjects:\n- kind: ServiceAccount\n  name: controller-manager\n  namespace: system\n")?;
    plan.create("config/rbac/kustomization.yaml", "resources:\n- service_account.yaml\n- role.yaml\n- role_binding.yaml\n- leader_election_role.yaml\n- leader_election_role_binding.yaml\n")?;
    plan.create("config/manager/kustomization.yaml", "resources:\n- manager.yaml\n")?;
    Ok(())
}
