//! `Bundle::load` on fixture bundles: the typed CSV, CRDs, other objects and annotations,
//! the loader's refusals, and the v1beta1 → v1 conversion of CRDs.

use std::path::{Path, PathBuf};

use opkit_olm_bundle::{Bundle, BundleCrd, BundleError};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

#[test]
fn loads_csv_crds_objects_and_annotations() {
    let bundle = Bundle::load(fixture("memcached-0.0.1")).expect("load");
    assert_eq!(bundle.csv.name(), "memcached-operator.v0.0.1");
    assert_eq!(bundle.csv.spec.version, "0.0.1");
    assert_eq!(bundle.csv.spec.install.strategy, "deployment");
    let deployment = &bundle.csv.spec.install.spec.deployments[0];
    assert_eq!(deployment.name, "memcached-operator-controller-manager");
    assert_eq!(deployment.spec.replicas, Some(1));
    assert_eq!(
        bundle.csv.spec.install.spec.cluster_permissions[0].rules[0].resources.as_deref(),
        Some(&["memcacheds".to_string()][..])
    );
    assert!(bundle.csv.supports_install_mode("AllNamespaces"));
    assert!(!bundle.csv.supports_install_mode("OwnNamespace"));
    let owned = &bundle.csv.spec.customresourcedefinitions.owned[0];
    assert_eq!(owned.spec_descriptors[0].path, "size");
    assert_eq!(bundle.csv.alm_examples().expect("examples")[0]["spec"]["size"], 3);
    assert_eq!(bundle.crds.len(), 1);
    assert_eq!(bundle.crds[0].name, "memcacheds.cache.example.com");
    assert!(bundle.crds[0].versions[0].schema.is_some());
    assert_eq!(bundle.objects.len(), 1);
    assert_eq!(bundle.objects[0].kind(), "Service");
    assert_eq!(bundle.package(), Some("memcached-operator"));
    assert_eq!(bundle.channels(), vec!["alpha".to_string()]);
    assert_eq!(bundle.default_channel().as_deref(), Some("alpha"));
}

#[test]
fn a_manifests_directory_alone_loads_without_annotations() {
    let bundle = Bundle::load(fixture("memcached-0.0.1/manifests")).expect("load");
    assert_eq!(bundle.csv.name(), "memcached-operator.v0.0.1");
    assert!(bundle.annotations.is_none());
}

#[test]
fn refuses_a_subdirectory_a_hidden_file_a_second_csv_and_no_csv() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("b");
    copy_dir(&fixture("memcached-0.0.1"), &dir);
    std::fs::create_dir(dir.join("manifests/extra")).expect("mkdir");
    assert!(matches!(
        Bundle::load(&dir),
        Err(BundleError::Layout { message: "bundle manifests dir contains directory", .. })
    ));
    std::fs::remove_dir(dir.join("manifests/extra")).expect("rmdir");

    std::fs::write(dir.join("manifests/.hidden"), "x: 1\n").expect("write");
    assert!(matches!(
        Bundle::load(&dir),
        Err(BundleError::Layout { message: "bundle manifests dir has hidden file", .. })
    ));
    std::fs::remove_file(dir.join("manifests/.hidden")).expect("rm");

    std::fs::copy(
        dir.join("manifests/memcached-operator.clusterserviceversion.yaml"),
        dir.join("manifests/again.yaml"),
    )
    .expect("copy");
    assert!(matches!(Bundle::load(&dir), Err(BundleError::MultipleCsvs { .. })));
    std::fs::remove_file(dir.join("manifests/again.yaml")).expect("rm");
    std::fs::remove_file(dir.join("manifests/memcached-operator.clusterserviceversion.yaml")).expect("rm");
    let err = Bundle::load(&dir).expect_err("no csv");
    assert!(err.to_string().starts_with("unable to find a csv in bundle directory"), "{err}");
}

#[test]
fn a_csv_with_a_wrongly_typed_field_names_its_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("b");
    copy_dir(&fixture("memcached-0.0.1"), &dir);
    let csv = dir.join("manifests/memcached-operator.clusterserviceversion.yaml");
    let text = std::fs::read_to_string(&csv).expect("read").replace("replicas: 1", "replicas: one");
    std::fs::write(&csv, text).expect("write");
    let err = Bundle::load(&dir).expect_err("bad csv");
    assert!(err.to_string().contains("memcached-operator.clusterserviceversion.yaml"), "{err}");
}

#[test]
fn a_v1beta1_crd_converts_to_v1() {
    let path = fixture("v1beta1-crd/widgets.example.com.crd.yaml");
    let text = std::fs::read_to_string(&path).expect("read");
    let object = opkit_olm_bundle::yaml::first_document(&text).expect("yaml").expect("a document");
    let crd = BundleCrd::from_object(path, object);
    assert_eq!(crd.versions.len(), 1);
    assert!(crd.versions[0].storage && crd.versions[0].schema.is_some());
    let v1 = crd.to_v1();
    assert_eq!(v1["apiVersion"], "apiextensions.k8s.io/v1");
    let version = &v1["spec"]["versions"][0];
    assert_eq!(version["name"], "v1");
    assert_eq!(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["type"], "object");
    assert_eq!(version["additionalPrinterColumns"][0]["jsonPath"], ".spec.size");
    assert!(version["subresources"]["status"].is_object());
    assert!(v1["spec"].get("validation").is_none() && v1["spec"].get("version").is_none());
}
