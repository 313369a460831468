//! CRD validation rules are refused at CRD creation when their estimated cost is over
//! kube's budget, as kube-apiserver refuses them, so no custom resource can make a rule
//! run for seconds; the same rule with bounds on the schema is accepted and enforced.

use serde_json::{Value, json};

use crate::common::{client_without_retry, env, raw};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn crd(names: Value) -> Vec<u8> {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "lists.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "lists", "singular": "list", "kind": "List2"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {
                         "type": "object", "properties": {"names": names},
                         "x-kubernetes-validations": [{"rule": "self.names.all(n, n.matches('^[a-z]+$'))",
                                                       "message": "names are lowercase"}]}}}}}]},
    })
    .to_string()
    .into_bytes()
}

/// Waits until a new CRD's collection at `path` is served.
async fn until_served(client: &kube::Client, path: &str) {
    let served = async {
        while raw(client, "GET", path, None, Vec::new()).await.code != 200 {
            tokio::task::yield_now().await;
        }
    };
    crate::common::within(&format!("{path} served"), served).await;
}

#[tokio::test]
async fn a_rule_over_the_cost_budget_is_forbidden_until_the_schema_bounds_it() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    let unbounded = json!({"type": "array", "items": {"type": "string"}});
    let res = raw(&client, "POST", CRDS, Some("application/json"), crd(unbounded)).await;
    assert_eq!(res.code, 422, "{}", res.text);
    let causes = res.json["details"]["causes"].as_array().cloned().unwrap_or_default();
    let rule = causes
        .iter()
        .find(|c| {
            c["field"] == "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
                || c["field"]
                    == "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
        })
        .unwrap_or_else(|| panic!("a cause on the rule: {}", res.text));
    assert_eq!(rule["reason"], "FieldValueForbidden", "{}", res.text);
    assert!(
        rule["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Forbidden: estimated rule cost exceeds budget by factor of"),
        "{}",
        res.text
    );

    let bounded = json!({"type": "array", "maxItems": 20, "items": {"type": "string", "maxLength": 63}});
    let res = raw(&client, "POST", CRDS, Some("application/json"), crd(bounded)).await;
    assert_eq!(res.code, 201, "{}", res.text);
    let path = "/apis/example.com/v1/namespaces/default/lists";
    until_served(&client, path).await;
    let bad =
        json!({"apiVersion": "example.com/v1", "kind": "List2", "metadata": {"name": "l"}, "spec": {"names": ["Bad"]}});
    let res = raw(&client, "POST", path, Some("application/json"), bad.to_string().into_bytes()).await;
    assert_eq!(res.code, 422, "the rule still runs: {}", res.text);
    let good =
        json!({"apiVersion": "example.com/v1", "kind": "List2", "metadata": {"name": "l"}, "spec": {"names": ["ok"]}});
    let res = raw(&client, "POST", path, Some("application/json"), good.to_string().into_bytes()).await;
    assert_eq!(res.code, 201, "{}", res.text);
}

/// A rule within the static budget can still cost too much on a large value: kube's
/// per-call limit refuses that object without running the rule, and smaller ones pass.
#[tokio::test]
async fn a_rule_too_costly_for_the_value_at_hand_is_refused_at_runtime() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "pairs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "pairs", "singular": "pair", "kind": "Pair"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {
                         "type": "object",
                         "properties": {"a": {"type": "array", "maxItems": 1000, "items": {"type": "integer"}}},
                         "x-kubernetes-validations": [{"rule": "self.a.all(x, self.a.all(y, x != y || true))",
                                                       "message": "pairwise"}]}}}}}]},
    });
    let res = raw(&client, "POST", CRDS, Some("application/json"), crd.to_string().into_bytes()).await;
    assert_eq!(res.code, 201, "within the static budget: {}", res.text);
    let path = "/apis/example.com/v1/namespaces/default/pairs";
    until_served(&client, path).await;
    let pair = |name: &str, n: i32| {
        json!({"apiVersion": "example.com/v1", "kind": "Pair", "metadata": {"name": name},
               "spec": {"a": (0..n).collect::<Vec<i32>>()}})
        .to_string()
        .into_bytes()
    };
    let res = raw(&client, "POST", path, Some("application/json"), pair("small", 50)).await;
    assert_eq!(res.code, 201, "{}", res.text);
    let res = raw(&client, "POST", path, Some("application/json"), pair("large", 1000)).await;
    assert_eq!(res.code, 422, "{}", res.text);
    let cause = &res.json["details"]["causes"][0];
    assert_eq!(cause["field"], "spec", "{}", res.text);
    assert!(
        cause["message"].as_str().unwrap_or_default().contains("call cost exceeds limit for rule: pairwise"),
        "{}",
        res.text
    );
}
