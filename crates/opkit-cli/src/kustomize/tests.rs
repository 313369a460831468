//! Tests for the kustomize renderer against a kubebuilder-like `config/` tree.

use std::path::Path;

use serde_json::Value;

use super::{KustomizeError, build, to_yaml_stream};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(path, text).expect("write");
}

/// Lays out config/{crd,rbac,manager,default} like kubebuilder scaffolds them.
fn scaffold(root: &Path) {
    write(
        root,
        "config/crd/bases/cache.example.com_memcacheds.yaml",
        "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: memcacheds.cache.example.com\nspec:\n  group: cache.example.com\n  names:\n    kind: Memcached\n    plural: memcacheds\n  scope: Namespaced\n",
    );
    write(
        root,
        "config/crd/kustomization.yaml",
        "resources:\n- bases/cache.example.com_memcacheds.yaml\n# +kubebuilder:scaffold:crdkustomizeresource\n#patches:\n#- path: patches/webhook_in_memcacheds.yaml\n",
    );
    write(
        root,
        "config/rbac/kustomization.yaml",
        "resources:\n- service_account.yaml\n- role.yaml\n- role_binding.yaml\n",
    );
    write(
        root,
        "config/rbac/service_account.yaml",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: controller-manager\n  namespace: system\n",
    );
    write(
        root,
        "config/rbac/role.yaml",
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: manager-role\nrules:\n- apiGroups:\n  - \"\"\n  resources:\n  - pods\n  verbs:\n  - get\n",
    );
    write(
        root,
        "config/rbac/role_binding.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: manager-rolebinding\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: manager-role\nsubjects:\n- kind: ServiceAccount\n  name: controller-manager\n  namespace: system\n",
    );
    write(root, "config/manager/kustomization.yaml", "resources:\n- manager.yaml\n");
    write(
        root,
        "config/manager/manager.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  labels:\n    control-plane: controller-manager\n  name: system\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: controller-manager\n  namespace: system\n  labels:\n    control-plane: controller-manager\nspec:\n  selector:\n    matchLabels:\n      control-plane: controller-manager\n  replicas: 1\n  template:\n    metadata:\n      labels:\n        control-plane: controller-manager\n    spec:\n      serviceAccountName: controller-manager\n      containers:\n      - name: manager\n        image: controller:latest\n        args:\n        - --leader-elect\n",
    );
    write(
        root,
        "config/default/kustomization.yaml",
        "# Adds namespace to all resources.\nnamespace: memcached-operator-system\nnamePrefix: memcached-operator-\n#labels:\n#- includeSelectors: true\n#  pairs:\n#    someName: someValue\nresources:\n- ../crd\n- ../rbac\n- ../manager\n#- ../webhook\n#- ../prometheus\n",
    );
}

fn find<'a>(objs: &'a [Value], kind: &str) -> &'a Value {
    objs.iter().find(|o| o["kind"] == kind).unwrap_or_else(|| panic!("no {kind} in {objs:#?}"))
}

#[test]
fn default_overlay_sets_namespace_prefix_and_references() {
    let dir = tempfile::tempdir().expect("tempdir");
    scaffold(dir.path());
    let objs = build(&dir.path().join("config/default")).expect("build");
    let kinds: Vec<&str> = objs.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        ["Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"]
    );

    let ns = find(&objs, "Namespace");
    assert_eq!(ns["metadata"]["name"], "memcached-operator-system");
    assert!(ns["metadata"].get("namespace").is_none());

    let crd = find(&objs, "CustomResourceDefinition");
    assert_eq!(crd["metadata"]["name"], "memcacheds.cache.example.com");
    assert!(crd["metadata"].get("namespace").is_none());

    let dep = find(&objs, "Deployment");
    assert_eq!(dep["metadata"]["name"], "memcached-operator-controller-manager");
    assert_eq!(dep["metadata"]["namespace"], "memcached-operator-system");
    assert_eq!(dep["spec"]["template"]["spec"]["serviceAccountName"], "memcached-operator-controller-manager");

    let role = find(&objs, "ClusterRole");
    assert_eq!(role["metadata"]["name"], "memcached-operator-manager-role");
    assert!(role["metadata"].get("namespace").is_none());

    let rb = find(&objs, "ClusterRoleBinding");
    assert_eq!(rb["metadata"]["name"], "memcached-operator-manager-rolebinding");
    assert_eq!(rb["roleRef"]["name"], "memcached-operator-manager-role");
    assert_eq!(rb["subjects"][0]["name"], "memcached-operator-controller-manager");
    assert_eq!(rb["subjects"][0]["namespace"], "memcached-operator-system");

    let sa = find(&objs, "ServiceAccount");
    assert_eq!(sa["metadata"]["namespace"], "memcached-operator-system");

    let yaml = to_yaml_stream(&objs).expect("yaml");
    assert_eq!(yaml.matches("\n---\n").count(), objs.len() - 1);
    let back: Vec<Value> = serde_saphyr::from_multiple(&yaml).expect("reparse");
    assert_eq!(back, objs);
}

#[test]
fn images_labels_annotations_replicas() {
    let dir = tempfile::tempdir().expect("tempdir");
    scaffold(dir.path());
    write(
        dir.path(),
        "config/manager/kustomization.yaml",
        "resources:\n- manager.yaml\nimages:\n- name: controller\n  newName: example.com/memcached-operator\n  newTag: v0.0.1\nreplicas:\n- name: controller-manager\n  count: 3\nlabels:\n- pairs:\n    app.kubernetes.io/name: memcached\n  includeSelectors: true\ncommonAnnotations:\n  team: cache\n",
    );
    let objs = build(&dir.path().join("config/default")).expect("build");
    let dep = find(&objs, "Deployment");
    assert_eq!(dep["spec"]["template"]["spec"]["containers"][0]["image"], "example.com/memcached-operator:v0.0.1");
    assert_eq!(dep["spec"]["replicas"], 3);
    assert_eq!(dep["metadata"]["labels"]["app.kubernetes.io/name"], "memcached");
    assert_eq!(dep["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"], "memcached");
    assert_eq!(dep["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"], "memcached");
    assert_eq!(dep["spec"]["template"]["metadata"]["annotations"]["team"], "cache");
    // Only the manager kustomization's objects are labelled.
    assert!(find(&objs, "ServiceAccount")["metadata"].get("labels").is_none());

    write(
        dir.path(),
        "config/manager/kustomization.yaml",
        "resources:\n- manager.yaml\nimages:\n- name: controller\n  digest: sha256:0123\n",
    );
    let objs = build(&dir.path().join("config/default")).expect("build");
    assert_eq!(
        find(&objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"],
        "controller@sha256:0123"
    );
}

#[test]
fn patches_strategic_and_json6902() {
    let dir = tempfile::tempdir().expect("tempdir");
    scaffold(dir.path());
    write(
        dir.path(),
        "config/default/manager_patch.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: controller-manager\n  namespace: system\nspec:\n  template:\n    spec:\n      containers:\n      - name: manager\n        env:\n        - name: LOG_LEVEL\n          value: debug\n",
    );
    let k = std::fs::read_to_string(dir.path().join("config/default/kustomization.yaml")).expect("read");
    write(
        dir.path(),
        "config/default/kustomization.yaml",
        &format!(
            "{k}patches:\n- path: manager_patch.yaml\n- target:\n    kind: Deployment\n    name: controller-manager\n  patch: |-\n    - op: add\n      path: /spec/template/spec/containers/0/args/-\n      value: --metrics-bind-address=:8443\n"
        ),
    );
    let objs = build(&dir.path().join("config/default")).expect("build");
    let c = &find(&objs, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "controller:latest");
    assert_eq!(c["env"][0]["value"], "debug");
    assert_eq!(c["args"], serde_json::json!(["--leader-elect", "--metrics-bind-address=:8443"]));

    write(
        dir.path(),
        "config/default/kustomization.yaml",
        &format!(
            "{k}patches:\n- patch: |-\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata:\n      name: nope\n"
        ),
    );
    let e = build(&dir.path().join("config/default")).expect_err("unmatched patch");
    assert!(matches!(e, KustomizeError::Patch { .. }), "{e}");
    assert!(e.to_string().contains("Deployment/nope"), "{e}");
}

#[test]
fn unknown_field_and_missing_resource_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    scaffold(dir.path());
    write(dir.path(), "config/manager/kustomization.yaml", "resource:\n- manager.yaml\n");
    let e = build(&dir.path().join("config/default")).expect_err("typo");
    assert!(matches!(&e, KustomizeError::UnknownField { field, .. } if field == "resource"), "{e}");
    assert!(
        e.to_string()
            .contains("config/manager/kustomization.yaml: invalid Kustomization: json: unknown field \"resource\"")
    );

    write(dir.path(), "config/manager/kustomization.yaml", "resources:\n- manager.yaml\n- missing.yaml\n");
    let e = build(&dir.path().join("config/default")).expect_err("missing");
    assert!(matches!(e, KustomizeError::MissingResource { .. }), "{e}");
    assert!(e.to_string().contains("config/manager/missing.yaml"), "{e}");

    write(dir.path(), "config/manager/kustomization.yaml", "resources:\n- manager.yaml\nconfigMapGenerator: []\n");
    let e = build(&dir.path().join("config/default")).expect_err("unsupported");
    assert!(matches!(e, KustomizeError::Unsupported { .. }), "{e}");

    let e = build(&dir.path().join("config")).expect_err("no kustomization");
    assert!(matches!(e, KustomizeError::NoKustomization { .. }), "{e}");
}

/// The samples of one kind in two versions (`create api` for v1alpha1, then v1) share a
/// name; kustomize's id includes the version, so both are kept.
#[test]
fn one_name_in_two_versions_is_two_resources() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sample = |version: &str| {
        format!(
            "apiVersion: cache.example.com/{version}\nkind: Memcached\nmetadata:\n  name: memcached-sample\nspec: {{}}\n"
        )
    };
    write(dir.path(), "config/samples/cache_v1alpha1_memcached.yaml", &sample("v1alpha1"));
    write(dir.path(), "config/samples/cache_v1_memcached.yaml", &sample("v1"));
    write(
        dir.path(),
        "config/samples/kustomization.yaml",
        "resources:\n- cache_v1alpha1_memcached.yaml\n- cache_v1_memcached.yaml\n",
    );
    let out = build(&dir.path().join("config/samples")).expect("two versions are two ids");
    let versions: Vec<&str> = out.iter().filter_map(|o| o["apiVersion"].as_str()).collect();
    // In kustomize's legacy order: same kind, then by version.
    assert_eq!(versions, ["cache.example.com/v1", "cache.example.com/v1alpha1"]);

    write(
        dir.path(),
        "config/samples/kustomization.yaml",
        "resources:\n- cache_v1_memcached.yaml\n- cache_v1_memcached.yaml\n",
    );
    let e = build(&dir.path().join("config/samples")).expect_err("the same id twice");
    assert!(e.to_string().contains("already registered id: Memcached.v1/memcached-sample"), "{e}");
}

#[test]
fn duplicate_ids_and_cycles_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    scaffold(dir.path());
    write(dir.path(), "config/manager/kustomization.yaml", "resources:\n- manager.yaml\n- manager.yaml\n");
    let e = build(&dir.path().join("config/manager")).expect_err("dup");
    assert!(e.to_string().contains("already registered id"), "{e}");

    write(dir.path(), "config/manager/kustomization.yaml", "resources:\n- ../default\n");
    let e = build(&dir.path().join("config/default")).expect_err("cycle");
    assert!(matches!(e, KustomizeError::Cycle { .. }), "{e}");
}

#[test]
fn yaml_stream_quotes_ambiguous_strings() {
    let objs = vec![
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
            "data": {"t": "true", "n": "1", "e": "", "s": "plain", "m": "a: b"}}),
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}, "data": {"list": ["x"]}}),
    ];
    let yaml = to_yaml_stream(&objs).expect("yaml");
    let back: Vec<Value> = serde_saphyr::from_multiple(&yaml).expect("reparse");
    assert_eq!(back, objs, "{yaml}");
    assert!(yaml.starts_with("apiVersion: v1\nkind: ConfigMap\n"), "{yaml}");
}
