//! OLM bundles from the Memcached example, as operator-sdk's tutorial makes them:
//! `make bundle VERSION=0.0.1` (generate kustomize manifests, generate bundle, bundle
//! validate), then 0.0.2 replacing it; `bundle validate` and `scorecard` pass on both, and
//! a broken bundle is refused with the file and field named. `olm_memcached.rs` installs
//! the same bundles through OLM.

use crate::olm_support;

use std::path::{Path, PathBuf};

use olm_support::{
    assert_validates_and_scores, copy_dir, csv, example, json_of, make_bundle, make_memcached_bundles, opkit,
};
use serde_json::Value;

fn fixture_bundle() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../opkit-olm-bundle/tests/fixtures/memcached-0.0.1")
}

#[test]
fn make_bundle_on_the_memcached_example_then_an_upgrade_that_replaces_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bundles = make_memcached_bundles(tmp.path());
    let dir = &bundles.project;
    let out = &bundles.first_output;
    assert!(out.contains("All validation tests have completed successfully"), "{out}");
    for file in [
        "bundle/manifests/memcached-operator.clusterserviceversion.yaml",
        "bundle/manifests/cache.example.com_memcacheds.yaml",
        "bundle/metadata/annotations.yaml",
        "bundle/tests/scorecard/config.yaml",
        "bundle.Dockerfile",
        "config/manifests/bases/memcached-operator.clusterserviceversion.yaml",
    ] {
        assert!(dir.join(file).is_file(), "{file} missing");
    }
    let first = csv(&bundles.v1);
    assert_eq!(first["metadata"]["name"], "memcached-operator.v0.0.1");
    assert_eq!(first["spec"]["version"], "0.0.1");
    assert!(first["spec"].get("replaces").is_none(), "{first:#}");
    let owned = &first["spec"]["customresourcedefinitions"]["owned"][0];
    assert_eq!(owned["specDescriptors"][0]["path"], "size");
    assert_eq!(owned["statusDescriptors"][0]["path"], "nodes");
    assert_eq!(owned["resources"][0]["kind"], "Deployment");
    let strategy = &first["spec"]["install"]["spec"];
    assert_eq!(strategy["deployments"][0]["name"], "memcached-operator-controller-manager");
    assert_eq!(
        strategy["deployments"][0]["spec"]["template"]["spec"]["containers"][0]["image"], "controller:latest",
        "IMG is the Makefile's default"
    );
    assert!(strategy["clusterPermissions"][0]["rules"].as_array().is_some_and(|r| !r.is_empty()));
    assert!(strategy["permissions"][0]["rules"].as_array().is_some_and(|r| !r.is_empty()), "leader election");
    let examples: Value =
        serde_json::from_str(first["metadata"]["annotations"]["alm-examples"].as_str().expect("alm-examples"))
            .expect("json");
    assert_eq!(examples[0]["kind"], "Memcached");
    let annotations = std::fs::read_to_string(bundles.v1.join("metadata/annotations.yaml")).expect("annotations");
    assert!(annotations.contains("operators.operatorframework.io.bundle.package.v1: memcached-operator"));
    assert!(annotations.contains("operators.operatorframework.io.bundle.channels.v1: alpha"));
    assert_validates_and_scores(&bundles.v1);

    // 0.0.2 replaces 0.0.1, declared in the base as operator-sdk users do.
    let second = csv(&bundles.v2);
    assert_eq!(second["metadata"]["name"], "memcached-operator.v0.0.2");
    assert_eq!(second["spec"]["replaces"], "memcached-operator.v0.0.1");
    assert_eq!(
        second["spec"]["customresourcedefinitions"]["owned"][0]["specDescriptors"][0]["path"], "size",
        "a second run keeps the descriptions"
    );
    assert_validates_and_scores(&bundles.v2);
    let loaded = opkit_olm_bundle::Bundle::load(&bundles.v2).expect("the one bundle reader reads it");
    assert_eq!(loaded.csv.spec.replaces, "memcached-operator.v0.0.1");
}

#[test]
fn bundle_validate_names_the_file_and_field_and_exits_1() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("bundle");
    copy_dir(&fixture_bundle(), &dir);
    std::fs::remove_file(dir.join("manifests/cache.example.com_memcacheds.yaml")).expect("rm crd");

    let text = opkit(tmp.path(), &["bundle", "validate", "bundle"]);
    assert_eq!(text.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains(
            "ERRO[0000] Error: Value cache.example.com/v1alpha1, Kind=Memcached: owned CRD \"cache.example.com/v1alpha1, Kind=Memcached\" not found in bundle \"memcached-operator.v0.0.1\"  file=manifests/memcached-operator.clusterserviceversion.yaml field=spec.customresourcedefinitions.owned"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("All validation tests have completed successfully"));

    let json = opkit(tmp.path(), &["bundle", "validate", "bundle", "-o", "json"]);
    assert_eq!(json.status.code(), Some(1));
    let report = json_of(&json);
    assert_eq!(report["passed"], false);
    let error = report["outputs"].as_array().expect("outputs").iter().find(|o| o["type"] == "error").expect("an error");
    assert_eq!(error["file"], "manifests/memcached-operator.clusterserviceversion.yaml");
    assert_eq!(error["field"], "spec.customresourcedefinitions.owned");
}

#[test]
fn the_optional_suite_runs_only_when_selected() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("bundle");
    copy_dir(&fixture_bundle(), &dir);
    let plain = opkit(tmp.path(), &["bundle", "validate", "bundle"]);
    assert!(plain.status.success());
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("channel(s)"));
    let suite = opkit(tmp.path(), &["bundle", "validate", "bundle", "--select-optional", "suite=operatorframework"]);
    assert!(suite.status.success(), "warnings only");
    let stdout = String::from_utf8_lossy(&suite.stdout);
    assert!(
        stdout.contains("WARN[0000] Warning: Value memcached-operator.v0.0.1: channel(s) [\"alpha\"] are not following the recommended naming convention"),
        "{stdout}"
    );
    let unknown = opkit(tmp.path(), &["bundle", "validate", "bundle", "--select-optional", "name=nope"]);
    assert!(!unknown.status.success());
}

#[test]
fn generate_bundle_refuses_a_bad_version_and_writes_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("memcached-operator");
    copy_dir(&example(), &dir);
    let out = opkit(&dir, &["generate", "bundle", "--version", "1.0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"1.0\" is not a valid semantic version"));
    assert!(!dir.join("bundle").exists() && !dir.join("bundle.Dockerfile").exists());
}

#[test]
fn a_scaffolded_project_makes_a_valid_bundle() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("fleet");
    std::fs::create_dir(&dir).expect("mkdir");
    for args in [
        &["init", "--domain", "example.com", "--repo", "github.com/example/fleet", "--project-name", "fleet"][..],
        &["create", "api", "--group", "ship", "--version", "v1", "--kind", "Frigate"][..],
    ] {
        let out = opkit(&dir, args);
        assert!(out.status.success(), "opkit {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    for file in [
        "config/manifests/kustomization.yaml",
        "config/scorecard/kustomization.yaml",
        "config/scorecard/bases/config.yaml",
        "config/scorecard/patches/basic.config.yaml",
        "config/scorecard/patches/olm.config.yaml",
    ] {
        assert!(dir.join(file).is_file(), "opkit init did not scaffold {file}");
    }
    // The CRD `make manifests` would generate (it builds the project, minutes): a stand-in.
    std::fs::create_dir_all(dir.join("config/crd/bases")).expect("mkdir");
    std::fs::write(
        dir.join("config/crd/bases/ship.example.com_frigates.yaml"),
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: frigates.ship.example.com\n\
         spec:\n  group: ship.example.com\n  names:\n    kind: Frigate\n    listKind: FrigateList\n    plural: frigates\n    \
         singular: frigate\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    \
         schema:\n      openAPIV3Schema:\n        type: object\n",
    )
    .expect("write crd");
    let out = make_bundle(&dir, "0.0.1");
    assert!(out.contains("All validation tests have completed successfully"), "{out}");
    for file in [
        "bundle/manifests/fleet.clusterserviceversion.yaml",
        "bundle/manifests/ship.example.com_frigates.yaml",
        "bundle/manifests/fleet-controller-manager-metrics-service_v1_service.yaml",
        "bundle/manifests/fleet-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml",
    ] {
        assert!(dir.join(file).is_file(), "{file} missing");
    }
    // As with operator-sdk, a fresh scaffold fails scorecard's descriptor tests until the
    // CSV markers are added.
    let scorecard = opkit(&dir, &["scorecard", "bundle", "--selector", "test=olm-crds-have-resources-test"]);
    assert_eq!(scorecard.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&scorecard.stdout).contains("Owned CRDs do not have resources specified"));
}

#[test]
fn kustomize_manifests_takes_the_ui_metadata_from_flags_and_keeps_an_existing_base() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("memcached-operator");
    copy_dir(&example(), &dir);
    let base_rel = "config/manifests/bases/memcached-operator.clusterserviceversion.yaml";
    std::fs::remove_file(dir.join(base_rel)).expect("rm base");
    std::fs::write(dir.join("icon.svg"), "<svg xmlns=\"http://www.w3.org/2000/svg\"/>").expect("icon");
    let out = opkit(
        &dir,
        &[
            "generate",
            "kustomize",
            "manifests",
            "--interactive=false",
            "--provider-name",
            "Example",
            "--maintainers",
            "Dev=dev@example.com",
            "--keywords",
            "memcached,cache",
            "--install-modes",
            "OwnNamespace,AllNamespaces",
            "--icon",
            "icon.svg",
            "--min-kube-version",
            "1.27.0",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let read_base = || -> Value {
        let text = std::fs::read_to_string(dir.join(base_rel)).expect("base");
        opkit_olm_bundle::yaml::first_document(&text).expect("yaml").expect("a CSV")
    };
    let base = read_base();
    assert_eq!(base["metadata"]["name"], "memcached-operator.v0.0.0");
    assert_eq!(base["spec"]["provider"]["name"], "Example");
    assert_eq!(base["spec"]["maintainers"][0]["email"], "dev@example.com");
    assert_eq!(base["spec"]["keywords"], serde_json::json!(["memcached", "cache"]));
    assert_eq!(base["spec"]["icon"][0]["mediatype"], "image/svg+xml");
    assert_eq!(base["spec"]["minKubeVersion"], "1.27.0");
    let supported: Vec<&str> = base["spec"]["installModes"]
        .as_array()
        .expect("modes")
        .iter()
        .filter(|m| m["supported"] == true)
        .filter_map(|m| m["type"].as_str())
        .collect();
    assert_eq!(supported, ["OwnNamespace", "AllNamespaces"]);
    assert_eq!(base["spec"]["customresourcedefinitions"]["owned"][0]["specDescriptors"][0]["path"], "size");

    // A second run without flags keeps what the base says.
    let again = opkit(&dir, &["generate", "kustomize", "manifests", "--interactive=false", "-q"]);
    assert!(again.status.success());
    assert_eq!(read_base(), base);
    let bad =
        opkit(&dir, &["generate", "kustomize", "manifests", "--interactive=false", "--install-modes", "Everywhere"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--install-modes: \"Everywhere\" is not one of"));
}
