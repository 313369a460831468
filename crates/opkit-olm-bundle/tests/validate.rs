//! The validators on the fixture bundle and on variants of it, with operator-framework's
//! messages; the optional suite only when selected.

use std::path::{Path, PathBuf};

use opkit_olm_bundle::csv::{InstallMode, WebhookDescription};
use opkit_olm_bundle::validate::{Level, Report, Selector, ValidateOptions, validate};
use opkit_olm_bundle::{Bundle, BundleObject};
use serde_json::json;

fn fixture() -> Bundle {
    Bundle::load(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memcached-0.0.1")).expect("load")
}

fn required(bundle: &Bundle) -> Report {
    validate(bundle, &ValidateOptions::default())
}

fn messages(report: &Report, level: Level) -> Vec<String> {
    report.findings.iter().filter(|f| f.level == level).map(ToString::to_string).collect()
}

fn has(report: &Report, level: Level, text: &str) -> bool {
    messages(report, level).iter().any(|m| m == text)
}

#[test]
fn the_fixture_passes_without_findings() {
    let report = required(&fixture());
    assert!(report.passed());
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

#[test]
fn a_missing_owned_crd_and_an_unowned_one_are_errors_naming_file_and_field() {
    let mut bundle = fixture();
    let crd = bundle.crds[0].clone();
    bundle.crds.clear();
    let report = required(&bundle);
    let error = report.errors().next().expect("an error");
    assert_eq!(
        error.to_string(),
        "Error: Value cache.example.com/v1alpha1, Kind=Memcached: owned CRD \"cache.example.com/v1alpha1, Kind=Memcached\" not found in bundle \"memcached-operator.v0.0.1\""
    );
    assert!(error.file.as_ref().is_some_and(|f| f.ends_with("memcached-operator.clusterserviceversion.yaml")));
    assert_eq!(error.path, "spec.customresourcedefinitions.owned");

    let mut bundle = fixture();
    bundle.csv.spec.customresourcedefinitions.owned.clear();
    bundle.crds = vec![crd];
    let report = required(&bundle);
    assert!(has(
        &report,
        Level::Error,
        "Error: Value cache.example.com/v1alpha1, Kind=Memcached: CRD \"cache.example.com/v1alpha1, Kind=Memcached\" is present in bundle \"memcached-operator.v0.0.1\" but not defined in CSV"
    ));
}

#[test]
fn csv_name_install_modes_examples_and_required_fields() {
    let mut bundle = fixture();
    bundle.csv.metadata.name = Some("Memcached_Operator.v0.0.1".into());
    bundle.csv.spec.install_modes = vec![InstallMode { mode_type: "OwnNamespace".into(), supported: false }];
    bundle.csv.spec.display_name.clear();
    bundle.csv.spec.min_kube_version.clear();
    let annotations = bundle.csv.metadata.annotations.get_or_insert_default();
    annotations.insert(
        "alm-examples".into(),
        json!([{"apiVersion": "other.example.com/v1", "kind": "Other", "metadata": {"name": "x"}}]).to_string(),
    );
    annotations.insert("olm.skiprange".into(), "<0.0.1".into());
    let report = required(&bundle);
    let name = "Memcached_Operator.v0.0.1";
    let errors = messages(&report, Level::Error);
    assert!(
        errors.iter().any(|e| e.starts_with(&format!(
            "Error: Value : ({name}) metadata.name \"{name}\" is invalid: a lowercase RFC 1123 subdomain"
        ))),
        "{errors:#?}"
    );
    assert!(has(&report, Level::Error, &format!("Error: Value : ({name}) none of InstallModeTypes are supported")));
    assert!(has(&report, Level::Error, "Error: Field Spec.DisplayName, Value field: required field missing"));
    assert!(has(
        &report,
        Level::Error,
        "Error: Value other.example.com/v1, Kind=Other: example must have a provided API"
    ));
    assert!(has(
        &report,
        Level::Warning,
        "Warning: Value cache.example.com/v1alpha1, Kind=Memcached: provided API should have an example annotation"
    ));
    assert!(has(
        &report,
        Level::Error,
        &format!(
            "Error: Value {name}: provided annotation olm.skiprange uses wrong case and should be olm.skipRange instead"
        )
    ));
    assert!(messages(&report, Level::Warning).iter().any(|w| w.contains("csv.Spec.minKubeVersion is not informed")));
    // operator-sdk prints each validator's warnings before its errors.
    let csv_findings: Vec<_> = report.findings.iter().filter(|f| f.error_type == "CSVFileNotValid").collect();
    let first_error = csv_findings.iter().position(|f| f.level == Level::Error).expect("an error");
    assert!(csv_findings[first_error..].iter().all(|f| f.level == Level::Error));
}

#[test]
fn service_accounts_unsupported_kinds_and_webhooks() {
    let mut bundle = fixture();
    bundle.objects.push(BundleObject {
        file: PathBuf::from("manifests/sa.yaml"),
        object: json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "memcached-operator-controller-manager"}}),
    });
    bundle.objects.push(BundleObject {
        file: PathBuf::from("manifests/deploy.yaml"),
        object: json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "extra"}}),
    });
    bundle.csv.spec.webhookdefinitions.push(WebhookDescription {
        generate_name: "vmemcached.kb.io".into(),
        webhook_type: "ValidatingAdmissionWebhook".into(),
        deployment_name: "gone".into(),
        side_effects: Some("Some".into()),
        admission_review_versions: vec!["v1".into()],
        ..WebhookDescription::default()
    });
    let report = required(&bundle);
    let errors = messages(&report, Level::Error);
    assert!(
        errors.iter().any(|e| e.starts_with(
            "Error: Value memcached-operator-controller-manager: invalid service account found in bundle."
        )),
        "{errors:#?}"
    );
    assert!(has(
        &report,
        Level::Error,
        "Error: Value apps/v1, Kind=Deployment: unsupported media type registry+v1 for bundle object"
    ));
    assert!(errors.iter().any(|e| e.contains("webhook vmemcached.kb.io has sideEffects \"Some\"")));
    assert!(errors.iter().any(|e| e.contains("names deployment \"gone\", which is not in the install strategy")));
    let sa = report.findings.iter().find(|f| f.to_string().contains("invalid service account")).expect("sa finding");
    assert_eq!(sa.file.as_deref(), Some(Path::new("manifests/sa.yaml")));
}

#[test]
fn annotations_are_checked_as_the_registry_does() {
    let mut bundle = fixture();
    let annotations = bundle.annotations.as_mut().expect("annotations");
    annotations.annotations.remove("operators.operatorframework.io.bundle.package.v1");
    annotations.annotations.insert("operators.operatorframework.io.bundle.channel.default.v1".into(), "stable".into());
    let report = required(&bundle);
    assert!(has(&report, Level::Error, "Missing annotation \"operators.operatorframework.io.bundle.package.v1\""));
    assert!(has(&report, Level::Error, "The channel list \"alpha\" doesn't contain the default channel \"stable\""));

    bundle.annotations = None;
    let report = required(&bundle);
    assert!(messages(&report, Level::Error).iter().any(|e| e.starts_with("could not find annotations file in")));
}

#[test]
fn the_operatorframework_suite_runs_only_when_selected() {
    let mut bundle = fixture();
    bundle.csv.spec.provider.name.clear();
    bundle.csv.spec.min_kube_version.clear();
    bundle.csv.metadata.annotations.get_or_insert_default().insert("capabilities".into(), "Basic".into());
    bundle.crds[0].api_version = "apiextensions.k8s.io/v1beta1".into();
    assert!(required(&bundle).passed(), "optional checks do not run unselected");

    let selected = ValidateOptions {
        select_optional: Some(Selector::parse("suite=operatorframework").expect("selector")),
        optional_values: vec![("k8s-version".into(), "1.22".into())],
    };
    let report = validate(&bundle, &selected);
    assert!(has(
        &report,
        Level::Error,
        "Error: Value : (memcached-operator.v0.0.1) csv.Spec.Provider.Name not specified"
    ));
    assert!(has(
        &report,
        Level::Error,
        "Error: Value : (memcached-operator.v0.0.1) csv.Metadata.Annotations.Capabilities \"Basic\" is not a valid capabilities level"
    ));
    assert!(has(
        &report,
        Level::Error,
        "Error: Value memcached-operator.v0.0.1: this bundle is using APIs which were deprecated and removed in v1.22. More info: https://kubernetes.io/docs/reference/using-api/deprecation-guide/#v1-22. Migrate the API(s) for CRD: ([\"memcacheds.cache.example.com\"])"
    ));
    assert!(has(
        &report,
        Level::Warning,
        "Warning: Value memcached-operator.v0.0.1: channel(s) [\"alpha\"] are not following the recommended naming convention: https://olm.operatorframework.io/docs/best-practices/channel-naming"
    ));

    let min_kube_version =
        report.warnings().filter(|f| f.to_string().contains("csv.Spec.minKubeVersion is not informed")).count();
    assert_eq!(min_kube_version, 1, "made by two validators, reported once: {:?}", report.findings);

    let one = ValidateOptions {
        select_optional: Some(Selector::parse("name=capabilities").expect("selector")),
        ..Default::default()
    };
    let report = validate(&bundle, &one);
    assert_eq!(report.errors().count(), 1, "{:?}", report.findings);
}

#[test]
fn selectors_match_as_label_selectors() {
    let s = Selector::parse("suite=operatorframework,name!=good-practices").expect("parse");
    assert!(s.matches(&[("name", "capabilities"), ("suite", "operatorframework")]));
    assert!(!s.matches(&[("name", "good-practices"), ("suite", "operatorframework")]));
    assert!(!s.matches(&[("name", "operatorhub")]));
    let s = Selector::parse("name in (operatorhub,community)").expect("parse");
    assert!(s.matches(&[("name", "operatorhub")]));
    assert!(Selector::parse("name").is_err());
}

#[test]
fn json_output_is_operator_sdks_with_file_and_field() {
    let mut bundle = fixture();
    bundle.csv.spec.install_modes.clear();
    let report = required(&bundle);
    let json = report.to_json(&bundle.dir);
    assert_eq!(json["passed"], false);
    let output = &json["outputs"][0];
    assert_eq!(output["type"], "error");
    assert_eq!(output["message"], "Error: Value : (memcached-operator.v0.0.1) install modes not found");
    assert_eq!(output["file"], "manifests/memcached-operator.clusterserviceversion.yaml");
    assert_eq!(output["field"], "spec.installModes");
}
