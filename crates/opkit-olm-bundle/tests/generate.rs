//! `generate_bundle` from the objects of a kustomize build: the install strategy with the
//! RBAC split as operator-sdk's collector splits it, owned CRDs, alm-examples, webhook
//! definitions, the files' names; and the metadata's words.

use opkit_olm_bundle::Bundle;
use opkit_olm_bundle::generate::{BundleMetadata, BundleOptions, bundle_files, generate_bundle, new_base};
use opkit_olm_bundle::validate::{ValidateOptions, validate};
use serde_json::{Value, json};

const SA: &str = "op-controller-manager";

fn objects() -> Vec<Value> {
    let base = serde_json::to_value(new_base("op")).expect("base");
    vec![
        base,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "op-system"}}),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.example.com"},
               "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"kind": "Widget", "plural": "widgets"},
                        "versions": [{"name": "v1", "served": true, "storage": true,
                                      "schema": {"openAPIV3Schema": {"type": "object"}}}]}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA, "namespace": "op-system"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "op-manager-role"},
               "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "op-manager-rolebinding"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "op-manager-role"},
               "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": "op-system"}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "op-leader-election-role", "namespace": "op-system"},
               "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "op-leader-election-rolebinding", "namespace": "op-system"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "op-leader-election-role"},
               "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": "op-system"}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "op-widget-viewer-role"},
               "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["list"]}]}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "op-webhook-service", "namespace": "op-system"},
               "spec": {"selector": {"control-plane": "controller-manager"}, "ports": [{"port": 443, "targetPort": 9443}]}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op-controller-manager", "namespace": "op-system",
                                                                           "labels": {"control-plane": "controller-manager"}},
               "spec": {"selector": {"matchLabels": {"control-plane": "controller-manager"}},
                        "template": {"metadata": {"labels": {"control-plane": "controller-manager"}},
                                     "spec": {"serviceAccountName": SA, "containers": [{"name": "manager", "image": "controller:latest",
                                              "env": [{"name": "WATCH_NAMESPACE", "value": ""}]}]}}}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "op-validating"},
               "webhooks": [{"name": "vwidget.kb.io", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                             "clientConfig": {"service": {"name": "op-webhook-service", "namespace": "op-system", "path": "/validate-widget"}},
                             "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["widgets"]}]}]}),
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "widget-sample"}, "spec": {"size": 1}}),
        json!({"apiVersion": "scorecard.operatorframework.io/v1alpha3", "kind": "Configuration", "metadata": {"name": "config"}, "stages": []}),
    ]
}

fn options() -> BundleOptions {
    BundleOptions { package: "op".into(), version: "0.1.0".into(), ..BundleOptions::default() }
}

#[test]
fn the_install_strategy_owned_crds_examples_and_webhooks() {
    let generated = generate_bundle(&objects(), None, &options()).expect("generate");
    let csv = &generated.bundle.csv;
    assert_eq!(csv.name(), "op.v0.1.0");
    assert_eq!(csv.spec.version, "0.1.0");
    let strategy = &csv.spec.install.spec;
    assert_eq!(strategy.deployments[0].name, "op-controller-manager");
    assert_eq!(strategy.cluster_permissions[0].service_account_name, SA);
    assert_eq!(strategy.cluster_permissions[0].rules[0].verbs, ["get"]);
    assert_eq!(strategy.permissions[0].rules[0].resources.as_deref(), Some(&["leases".to_string()][..]));
    let env =
        &strategy.deployments[0].spec.template.spec.as_ref().expect("pod").containers[0].env.as_ref().expect("env")[0];
    assert_eq!(
        env.value_from.as_ref().and_then(|v| v.field_ref.as_ref()).map(|f| f.field_path.as_str()),
        Some("metadata.annotations['olm.targetNamespaces']")
    );
    assert_eq!(csv.spec.customresourcedefinitions.owned[0].name, "widgets.example.com");
    assert_eq!(csv.alm_examples().expect("examples")[0]["kind"], "Widget");
    let webhook = &csv.spec.webhookdefinitions[0];
    assert_eq!(webhook.generate_name, "vwidget.kb.io");
    assert_eq!(webhook.deployment_name, "op-controller-manager");
    assert_eq!(webhook.container_port, Some(443));
    assert_eq!(webhook.webhook_path.as_deref(), Some("/validate-widget"));

    // Bound roles, their bindings and the operator's account go into the CSV; the rest stays.
    let kinds: Vec<(String, String)> =
        generated.bundle.objects.iter().map(|o| (o.kind().to_string(), o.name().to_string())).collect();
    assert_eq!(
        kinds,
        [
            ("Service".to_string(), "op-webhook-service".to_string()),
            ("ClusterRole".to_string(), "op-widget-viewer-role".to_string())
        ]
    );
    assert!(generated.bundle.objects.iter().all(|o| o.object.pointer("/metadata/namespace").is_none()));
    assert!(generated.scorecard_config.is_some());
    // In memory the bundle has no metadata yet: that is its only error.
    let report = validate(&generated.bundle, &ValidateOptions::default());
    assert!(
        report.errors().all(|f| f.to_string().starts_with("could not find annotations file")),
        "{:?}",
        report.findings
    );
}

#[test]
fn the_files_as_operator_sdk_names_and_words_them() {
    let generated = generate_bundle(&objects(), None, &options()).expect("generate");
    let metadata = BundleMetadata {
        bundle_dir: "bundle".into(),
        package: "op".into(),
        channels: "stable,fast".into(),
        default_channel: "stable".into(),
        other_labels: BundleMetadata::metrics_labels("opkit-v0.1.0", "rust.opkit.dev/v1"),
        scorecard: true,
    };
    let files = bundle_files(&generated.bundle, &metadata, generated.scorecard_config.as_ref()).expect("files");
    let names: Vec<String> = files.manifests.iter().map(|(p, _)| p.display().to_string()).collect();
    assert_eq!(
        names,
        [
            "bundle/manifests/op.clusterserviceversion.yaml",
            "bundle/manifests/example.com_widgets.yaml",
            "bundle/manifests/op-webhook-service_v1_service.yaml",
            "bundle/manifests/op-widget-viewer-role_rbac.authorization.k8s.io_v1_clusterrole.yaml",
        ]
    );
    assert!(
        files.manifests[0].1.starts_with("apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\n")
    );
    assert_eq!(files.annotations.0.display().to_string(), "bundle/metadata/annotations.yaml");
    assert!(files.annotations.1.contains(
        "  operators.operatorframework.io.bundle.channels.v1: stable,fast\n  operators.operatorframework.io.bundle.channel.default.v1: stable\n"
    ));
    assert!(files.annotations.1.contains("  operators.operatorframework.io.test.config.v1: tests/scorecard/\n"));
    assert!(files.dockerfile.1.starts_with("FROM scratch\n\n# Core bundle labels.\n"));
    assert!(files.dockerfile.1.ends_with("COPY bundle/tests/scorecard /tests/scorecard/\n"));
    assert_eq!(
        files.scorecard.as_ref().map(|(p, _)| p.display().to_string()).as_deref(),
        Some("bundle/tests/scorecard/config.yaml")
    );

    // Written and read back, it is the same bundle.
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files.manifests.iter().chain([&files.annotations]) {
        let target = dir.path().join(path);
        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        std::fs::write(target, text).expect("write");
    }
    let loaded = Bundle::load(dir.path().join("bundle")).expect("load");
    assert_eq!(loaded.csv, generated.bundle.csv);
    assert_eq!(loaded.default_channel().as_deref(), Some("stable"));
}

#[test]
fn a_bad_version_and_no_base_are_refused() {
    let bad = BundleOptions { version: "1.0".into(), ..options() };
    assert_eq!(
        generate_bundle(&objects(), None, &bad).expect_err("bad version").to_string(),
        "\"1.0\" is not a valid semantic version"
    );
    let without_base: Vec<Value> = objects().into_iter().skip(1).collect();
    let err = generate_bundle(&without_base, None, &options()).expect_err("no base");
    assert!(err.to_string().contains("run `opkit generate kustomize manifests` first"), "{err}");
}
