//! Which parameters KUDO requires, with the fixture package `tests/fixtures/tolerations`:
//! a parameter is required unless it says `required: false` (kudoctl's package reader),
//! and a default satisfies it; an `array` or `map` parameter always has one, because
//! KUDO writes its default as YAML even when there is none (`null`). So cassandra's
//! `NODE_TOLERATIONS` (an array, no default, no `required`) installs without a value,
//! and a plain parameter without a default does not.

use std::collections::BTreeMap;
use std::path::Path;

use opkit_kudo::client::check_parameters;
use opkit_kudo::params::{effective, template_params, to_api};
use opkit_kudo::{Variables, render_objects};
use serde_json::json;

fn package() -> opkit_kudo::Package {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tolerations");
    opkit_kudo::load(&dir).expect("the fixture loads")
}

fn given(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn array_and_map_parameters_without_a_default_are_not_required() {
    let pkg = package();
    let err = check_parameters(&pkg, &given(&[])).expect_err("CLUSTER_NAME has no value");
    assert_eq!(err.to_string(), "parameter \"CLUSTER_NAME\" is required but has no value");
    check_parameters(&pkg, &given(&[("CLUSTER_NAME", "c1")])).expect("the array and the map need no value");
}

#[test]
fn the_operator_version_carries_kudos_yaml_null_default() {
    let pkg = package();
    let declared = |name: &str| to_api(pkg.parameter(name).expect(name)).expect("to the API");
    assert_eq!(declared("NODE_TOLERATIONS")["default"], json!("null\n"));
    assert_eq!(declared("NODE_TOLERATIONS")["required"], json!(true));
    assert_eq!(declared("NODE_LABELS")["default"], json!("null\n"));
    assert_eq!(declared("CLUSTER_NAME").get("default"), None);
}

#[test]
fn templates_see_no_value_until_one_is_given() {
    let pkg = package();
    let source = &pkg.templates["configmap.yaml"];
    let render = |values: &[(&str, &str)]| {
        let values = effective(&pkg.params.parameters, &given(values)).expect("valid values");
        let vars = Variables {
            name: "db".into(),
            params: template_params(&pkg.params.parameters, &values),
            ..Variables::default()
        };
        render_objects("configmap.yaml", source, &vars).expect("renders")
    };
    let objects = render(&[("CLUSTER_NAME", "c1")]);
    assert_eq!(objects[0]["data"], json!({"cluster": "c1", "tolerations": "none"}));
    let objects = render(&[("CLUSTER_NAME", "c1"), ("NODE_TOLERATIONS", "- key: a\n- key: b\n")]);
    assert_eq!(objects[0]["data"]["tolerations"], "2");
}
