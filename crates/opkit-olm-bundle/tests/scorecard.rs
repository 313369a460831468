//! Scorecard's tests on the fixture bundle and on variants that fail them, and the text
//! and JSON formats.

use std::path::Path;

use opkit_olm_bundle::Bundle;
use opkit_olm_bundle::scorecard::{Configuration, State, TESTS, Test, TestConfiguration, run_test, to_json, to_text};
use opkit_olm_bundle::validate::Selector;
use serde_json::json;

fn fixture() -> Bundle {
    Bundle::load(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memcached-0.0.1")).expect("load")
}

fn set_examples(bundle: &mut Bundle, examples: serde_json::Value) {
    bundle.csv.metadata.annotations.get_or_insert_default().insert("alm-examples".into(), examples.to_string());
}

#[test]
fn every_test_passes_on_the_fixture() {
    let bundle = fixture();
    for (name, _) in TESTS {
        assert_eq!(run_test(&bundle, name).state, State::Pass, "{name}");
    }
}

#[test]
fn descriptors_resources_and_validation_fail_as_scorecard_says() {
    let mut bundle = fixture();
    bundle.csv.spec.customresourcedefinitions.owned[0].resources.clear();
    bundle.csv.spec.customresourcedefinitions.owned[0].status_descriptors.clear();
    set_examples(
        &mut bundle,
        json!([{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": {"name": "m"},
                "spec": {"size": 1, "extra": true}, "status": {"nodes": ["a"]}}]),
    );
    let resources = run_test(&bundle, "olm-crds-have-resources");
    assert_eq!(
        (resources.state, resources.errors.clone()),
        (State::Fail, vec!["Owned CRDs do not have resources specified".to_string()])
    );
    let spec = run_test(&bundle, "olm-spec-descriptors");
    assert_eq!(spec.state, State::Fail);
    assert_eq!(spec.errors, ["extra does not have a spec descriptor"]);
    assert_eq!(spec.suggestions, ["Add a spec descriptor for extra"]);
    let status = run_test(&bundle, "olm-status-descriptors");
    assert_eq!(status.errors, ["memcacheds.cache.example.com does not have a status descriptor"]);
    let validation = run_test(&bundle, "olm-crds-have-validation");
    assert_eq!(validation.state, State::Fail);
    assert_eq!(validation.suggestions, ["Add CRD validation for spec field `extra` in Memcached/v1alpha1"]);
}

#[test]
fn a_cr_without_spec_is_a_suggestion_and_bundle_validation_fails_on_errors() {
    let mut bundle = fixture();
    set_examples(
        &mut bundle,
        json!([{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": {"name": "m"}}]),
    );
    let basic = run_test(&bundle, "basic-check-spec");
    assert_eq!((basic.state, basic.suggestions.clone()), (State::Pass, vec!["spec missing from [m]".to_string()]));
    bundle.crds.clear();
    let validation = run_test(&bundle, "olm-bundle-validation");
    assert_eq!(validation.state, State::Fail);
    assert!(validation.errors[0].contains("not found in bundle"), "{:?}", validation.errors);
}

#[test]
fn selection_text_and_json() {
    let config = Configuration::builtin();
    let olm = Selector::parse("suite=olm").expect("selector");
    assert_eq!(config.selected(Some(&olm)).tests().count(), 5);
    let one = Selector::parse("test=basic-check-spec-test").expect("selector");
    let selected = config.selected(Some(&one));
    let specs: Vec<&TestConfiguration> = selected.tests().collect();
    assert_eq!(
        specs.iter().map(|t| (t.builtin(), t.suite())).collect::<Vec<_>>(),
        [(Some("basic-check-spec"), "basic")]
    );
    let result = run_test(&fixture(), "basic-check-spec");
    let test = Test { spec: specs[0].clone(), results: vec![result] };
    let text = to_text(&test);
    assert!(text.starts_with(&format!("{}\nImage:      quay.io/operator-framework/scorecard-test:", "-".repeat(80))));
    assert!(text.contains("Labels:\n\t\"suite\":\"basic\"\n\t\"test\":\"basic-check-spec-test\"\nResults:\n\tName: basic-check-spec\n\tState: pass\n"));
    let json = to_json(&[test]);
    assert_eq!(json["kind"], "TestList");
    assert_eq!(json["items"][0]["status"]["results"][0]["state"], "pass");
    assert_eq!(json["items"][0]["spec"]["labels"]["test"], "basic-check-spec-test");
}
