//! Scorecard's built-in tests, run in-process on a bundle where operator-sdk runs each in
//! a pod of the `scorecard-test` image: basic-check-spec, olm-bundle-validation,
//! olm-crds-have-validation, olm-crds-have-resources, olm-spec-descriptors and
//! olm-status-descriptors.

use serde_json::Value;

use super::{State, TestResult};
use crate::bundle::Bundle;
use crate::validate::{Level, ValidateOptions, validate};

/// The tests, in scorecard's configuration order, with their suite.
pub const TESTS: [(&str, &str); 6] = [
    ("basic-check-spec", "basic"),
    ("olm-bundle-validation", "olm"),
    ("olm-crds-have-validation", "olm"),
    ("olm-crds-have-resources", "olm"),
    ("olm-spec-descriptors", "olm"),
    ("olm-status-descriptors", "olm"),
];

/// The image operator-sdk's scorecard tests run in (kept in the output, as scorecard shows it).
pub const TEST_IMAGE: &str = "quay.io/operator-framework/scorecard-test:v1.42.0";

/// Runs one test by name on `bundle`.
pub fn run_test(bundle: &Bundle, name: &str) -> TestResult {
    let mut r = TestResult::passed(name);
    let examples = bundle.csv.alm_examples();
    match name {
        "basic-check-spec" => match &examples {
            Err(e) => r.fail(format!("error getting custom resources: {e}")),
            Ok(crs) => {
                if let Some(cr) = crs.iter().find(|cr| cr.get("spec").is_none_or(Value::is_null)) {
                    r.suggestions.push(format!("spec missing from [{}]", cr_name(cr)));
                }
            }
        },
        "olm-bundle-validation" => {
            let report = validate(bundle, &ValidateOptions::default());
            for f in &report.findings {
                match f.level {
                    Level::Error => r.fail(f.to_string()),
                    Level::Warning => r.suggestions.push(f.to_string()),
                }
            }
        }
        "olm-crds-have-validation" => match &examples {
            Err(e) => r.could_not_run(e.to_string()),
            Ok(crs) => {
                r.log.push_str(&format!("Loaded {} Custom Resources from alm-examples\n", crs.len()));
                for cr in crs {
                    crd_has_validation(bundle, cr, &mut r);
                    if r.state != State::Pass {
                        break;
                    }
                }
            }
        },
        "olm-crds-have-resources" => {
            r.log.push_str(&format!("Loaded ClusterServiceVersion: {}\n", bundle.csv.name()));
            if bundle.csv.spec.customresourcedefinitions.owned.iter().any(|d| d.resources.is_empty()) {
                r.fail("Owned CRDs do not have resources specified".into());
            }
        }
        "olm-spec-descriptors" | "olm-status-descriptors" => {
            r.log.push_str(&format!("Loaded ClusterServiceVersion: {}\n", bundle.csv.name()));
            match &examples {
                Err(e) => r.could_not_run(e.to_string()),
                Ok(crs) => {
                    r.log.push_str(&format!("Loaded {} Custom Resources from alm-examples\n", crs.len()));
                    for cr in crs {
                        if name == "olm-spec-descriptors" {
                            spec_descriptors(bundle, cr, &mut r);
                        } else {
                            status_descriptors(bundle, cr, &mut r);
                        }
                    }
                }
            }
        }
        other => r.could_not_run(format!("unknown test {other}")),
    }
    r
}

fn cr_name(cr: &Value) -> &str {
    cr.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
}

fn cr_gvk(cr: &Value) -> (String, String, String) {
    let api_version = cr.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    (group.into(), version.into(), cr.get("kind").and_then(Value::as_str).unwrap_or_default().into())
}

fn crd_has_validation(bundle: &Bundle, cr: &Value, r: &mut TestResult) {
    let (_, version, kind) = cr_gvk(cr);
    for crd in &bundle.crds {
        for v in &crd.versions {
            if !v.name.eq_ignore_ascii_case(&version) || !crd.kind.eq_ignore_ascii_case(&kind) {
                continue;
            }
            let Some(schema) = &v.schema else {
                r.suggestions.push(format!("Add CRD validation for {}/{}", crd.kind, v.name));
                continue;
            };
            let mut failed = false;
            for part in ["spec", "status"] {
                if let Some(Value::Object(fields)) = cr.get(part) {
                    for key in fields.keys() {
                        if schema.pointer(&format!("/properties/{part}/properties/{key}")).is_none() {
                            failed = true;
                            r.suggestions
                                .push(format!("Add CRD validation for {part} field `{key}` in {kind}/{version}"));
                        }
                    }
                }
            }
            if failed {
                r.state = State::Fail;
                return;
            }
        }
    }
}

fn owned_for<'a>(bundle: &'a Bundle, cr: &Value) -> Option<&'a crate::csv::CrdDescription> {
    let (_, version, kind) = cr_gvk(cr);
    bundle.csv.spec.customresourcedefinitions.owned.iter().find(|o| o.kind == kind && o.version == version)
}

fn no_owned(cr: &Value, r: &mut TestResult) {
    let (g, v, k) = cr_gvk(cr);
    r.fail(format!(
        "Failed to find an owned CRD for CR {} with GVK {}",
        cr_name(cr),
        crate::validate::gvk_string(&g, &v, &k)
    ));
}

fn spec_descriptors(bundle: &Bundle, cr: &Value, r: &mut TestResult) {
    let Some(spec) = cr.get("spec").and_then(Value::as_object) else {
        r.state = State::Fail;
        return;
    };
    let Some(owned) = owned_for(bundle, cr) else { return no_owned(cr, r) };
    for key in spec.keys() {
        if !owned.spec_descriptors.iter().any(|d| &d.path == key) {
            r.fail(format!("{key} does not have a spec descriptor"));
            r.suggestions.push(format!("Add a spec descriptor for {key}"));
        }
    }
}

fn status_descriptors(bundle: &Bundle, cr: &Value, r: &mut TestResult) {
    let Some(owned) = owned_for(bundle, cr) else { return no_owned(cr, r) };
    let has_status = cr.get("status").and_then(Value::as_object).is_some_and(|s| !s.is_empty());
    if !has_status {
        r.suggestions.push(format!("{} does not have status spec. Note that all objects that represent a physical resource whose state may vary from the user's desired intent SHOULD have a spec and a status. More info: https://github.com/kubernetes/community/blob/master/contributors/devel/sig-architecture/api-conventions.md#spec-and-status", owned.name));
    }
    if has_status && owned.status_descriptors.is_empty() {
        r.fail(format!("{} does not have a status descriptor", owned.name));
        r.suggestions.push(format!("add status descriptor for the crd {}. If your project is built using Golang you can use the csv markers. More info: https://sdk.operatorframework.io/docs/building-operators/golang/references/markers/", owned.name));
    }
}
