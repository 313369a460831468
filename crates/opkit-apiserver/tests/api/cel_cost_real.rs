//! CRDs with the rule shapes of real ones (Gateway API's Gateway and HTTPRoute,
//! prometheus-operator's AlertmanagerConfig, and issue 29's author's list of 64 objects)
//! are created through the server, as kube-apiserver accepts them, and their rules still
//! run; a rule kube refuses as too expensive is still Forbidden with kube's message.

use serde_json::{Value, json};

use crate::common::{client_without_retry, env, raw};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn crd(plural: &str, kind: &str, spec: Value) -> Vec<u8> {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.shapes.example.com")},
        "spec": {"group": "shapes.example.com", "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": spec}}}}]},
    })
    .to_string()
    .into_bytes()
}

/// The author's CRD of issue 29: at most 64 filters, each `type` unbounded.
fn filters() -> Value {
    json!({"type": "object", "properties": {"filters": {"type": "array", "maxItems": 64,
        "items": {"type": "object", "properties": {"type": {"type": "string"}, "value": {"type": "string"}}},
        "x-kubernetes-validations": [{"rule": "self.all(f, f.type == 'X')", "message": "every filter is of type X"}]}}})
}

/// Gateway's listeners: unique names (`exists_one` in `all`), no TLS for plain protocols.
fn gateway() -> Value {
    json!({"type": "object", "properties": {"listeners": {"type": "array", "maxItems": 64,
        "items": {"type": "object", "required": ["name", "port", "protocol"], "properties": {
            "name": {"type": "string", "maxLength": 253}, "hostname": {"type": "string", "maxLength": 253},
            "port": {"type": "integer"}, "protocol": {"type": "string", "maxLength": 255},
            "tls": {"type": "object", "properties": {"mode": {"type": "string"}}}}},
        "x-kubernetes-validations": [
            {"rule": "self.all(l1, self.exists_one(l2, l1.name == l2.name))",
             "message": "Listener name must be unique within the Gateway"},
            {"rule": "self.all(l1, self.exists_one(l2, l1.port == l2.port && l1.protocol == l2.protocol && (has(l1.hostname) && has(l2.hostname) ? l1.hostname == l2.hostname : !has(l1.hostname) && !has(l2.hostname))))",
             "message": "Combination of port, protocol and hostname must be unique for each listener"},
            {"rule": "self.all(l, l.protocol in ['HTTP', 'TCP', 'UDP'] ? !has(l.tls) : true)",
             "message": "tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']"}]}}})
}

/// HTTPRoute's parentRefs (`all` in `all`, `__namespace__`) and path matches checked with
/// `matches` on strings of at most 1024 characters, 16 rules of 64 matches.
fn httproute() -> Value {
    let parent_rule = "self.all(p1, self.all(p2, p1.group == p2.group && p1.kind == p2.kind && p1.name == p2.name && (((!has(p1.__namespace__) || p1.__namespace__ == '') && (!has(p2.__namespace__) || p2.__namespace__ == '')) || (has(p1.__namespace__) && has(p2.__namespace__) && p1.__namespace__ == p2.__namespace__)) ? ((!has(p1.sectionName) || p1.sectionName == '') == (!has(p2.sectionName) || p2.sectionName == '')) : true))";
    json!({"type": "object", "properties": {
        "parentRefs": {"type": "array", "maxItems": 32, "items": {"type": "object", "required": ["name"], "properties": {
            "group": {"type": "string", "maxLength": 253}, "kind": {"type": "string", "maxLength": 63},
            "name": {"type": "string", "maxLength": 253}, "namespace": {"type": "string", "maxLength": 63},
            "sectionName": {"type": "string", "maxLength": 253}}},
            "x-kubernetes-validations": [{"rule": parent_rule,
                "message": "sectionName must be specified when parentRefs includes 2 or more references to the same parent"}]},
        "rules": {"type": "array", "maxItems": 16, "items": {"type": "object", "properties": {
            "matches": {"type": "array", "maxItems": 64, "items": {"type": "object", "properties": {
                "path": {"type": "object", "properties": {
                    "type": {"type": "string", "enum": ["Exact", "PathPrefix", "RegularExpression"]},
                    "value": {"type": "string", "maxLength": 1024}},
                    "x-kubernetes-validations": [
                        {"rule": "(self.type in ['Exact', 'PathPrefix']) ? self.value.startsWith('/') : true",
                         "message": "value must be an absolute path and start with '/'"},
                        {"rule": "(self.type in ['Exact', 'PathPrefix']) ? self.value.matches(r'^(?:[-A-Za-z0-9/._~!$&()*+,;=:@]|[%][0-9a-fA-F]{2})+$') : true",
                         "message": "must only contain valid characters"}]}}}}}}}}})
}

/// AlertmanagerConfig's receivers: unbounded lists of unbounded lists of configs whose
/// sigv4 object carries a rule (run once per object a request can hold).
fn alertmanagerconfig() -> Value {
    json!({"type": "object", "properties": {"receivers": {"type": "array", "items": {"type": "object",
        "required": ["name"], "properties": {"name": {"type": "string"}, "snsConfigs": {"type": "array",
            "items": {"type": "object", "properties": {"sigv4": {"type": "object", "properties": {
                "roleArn": {"type": "string"}, "externalId": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": "!has(self.externalId) || has(self.roleArn)",
                    "message": "externalId requires roleArn"}]}}}}}}}}})
}

async fn served(client: &kube::Client, path: &str) {
    let served = async {
        while raw(client, "GET", path, None, Vec::new()).await.code != 200 {
            tokio::task::yield_now().await;
        }
    };
    crate::common::within(&format!("{path} served"), served).await;
}

async fn create(
    client: &kube::Client,
    plural: &str,
    kind: &str,
    name: &str,
    spec: Value,
) -> crate::common::RawResponse {
    let path = format!("/apis/shapes.example.com/v1/namespaces/default/{plural}");
    served(client, &path).await;
    let obj = json!({"apiVersion": "shapes.example.com/v1", "kind": kind, "metadata": {"name": name}, "spec": spec});
    raw(client, "POST", &path, Some("application/json"), obj.to_string().into_bytes()).await
}

#[tokio::test]
async fn crds_with_the_rule_shapes_of_real_ones_are_created_and_their_rules_run() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    for (plural, kind, spec) in [
        ("filtersets", "FilterSet", filters()),
        ("gateways", "Gateway", gateway()),
        ("httproutes", "HTTPRoute", httproute()),
        ("alertmanagerconfigs", "AlertmanagerConfig", alertmanagerconfig()),
    ] {
        let res = raw(&client, "POST", CRDS, Some("application/json"), crd(plural, kind, spec)).await;
        assert_eq!(res.code, 201, "{plural}: {}", res.text);
    }

    let listener = |name: &str, port: i64| json!({"name": name, "port": port, "protocol": "HTTP"});
    let res =
        create(&client, "gateways", "Gateway", "dup", json!({"listeners": [listener("a", 80), listener("a", 81)]}))
            .await;
    assert_eq!(res.code, 422, "{}", res.text);
    assert!(res.text.contains("Listener name must be unique within the Gateway"), "{}", res.text);
    let res =
        create(&client, "gateways", "Gateway", "ok", json!({"listeners": [listener("a", 80), listener("b", 81)]}))
            .await;
    assert_eq!(res.code, 201, "{}", res.text);

    let res = create(&client, "filtersets", "FilterSet", "y", json!({"filters": [{"type": "X"}, {"type": "Y"}]})).await;
    assert_eq!(res.code, 422, "{}", res.text);
    assert!(res.text.contains("every filter is of type X"), "{}", res.text);
    let res = create(&client, "filtersets", "FilterSet", "x", json!({"filters": [{"type": "X"}]})).await;
    assert_eq!(res.code, 201, "{}", res.text);

    let path = |v: &str| json!({"rules": [{"matches": [{"path": {"type": "PathPrefix", "value": v}}]}]});
    let res = create(&client, "httproutes", "HTTPRoute", "bad", path("/a b")).await;
    assert_eq!(res.code, 422, "{}", res.text);
    assert!(res.text.contains("must only contain valid characters"), "{}", res.text);
    let res = create(&client, "httproutes", "HTTPRoute", "ok", path("/a")).await;
    assert_eq!(res.code, 201, "{}", res.text);

    let sigv4 = |v: Value| json!({"receivers": [{"name": "r", "snsConfigs": [{"sigv4": v}]}]});
    let res =
        create(&client, "alertmanagerconfigs", "AlertmanagerConfig", "bad", sigv4(json!({"externalId": "e"}))).await;
    assert_eq!(res.code, 422, "{}", res.text);
    assert!(res.text.contains("externalId requires roleArn"), "{}", res.text);
}

/// A loop over an unbounded list inside a loop over it, and a regex over unbounded
/// strings of an unbounded list, are over kube's budget: Forbidden, in kube's words.
#[tokio::test]
async fn quadratic_and_unbounded_regex_rules_are_still_forbidden() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    let quadratic = json!({"type": "object", "properties": {"receivers": {"type": "array",
        "items": {"type": "object", "properties": {"name": {"type": "string"}}},
        "x-kubernetes-validations": [{"rule": "self.all(r1, self.exists_one(r2, r1.name == r2.name))"}]}}});
    let regex = json!({"type": "object", "properties": {"groupBy": {"type": "array", "items": {"type": "string"},
        "x-kubernetes-validations": [{"rule": "self.all(g, g.matches('^[a-zA-Z_][a-zA-Z0-9_]*$'))"}]}}});
    for (plural, spec, field) in [("quadratics", quadratic, "receivers"), ("regexes", regex, "groupBy")] {
        let res = raw(&client, "POST", CRDS, Some("application/json"), crd(plural, "Costly", spec)).await;
        assert_eq!(res.code, 422, "{}", res.text);
        let causes = res.json["details"]["causes"].as_array().cloned().unwrap_or_default();
        let want = format!(
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[{field}].x-kubernetes-validations[0].rule"
        );
        let cause =
            causes.iter().find(|c| c["field"] == want.as_str()).unwrap_or_else(|| panic!("{want}: {}", res.text));
        assert_eq!(cause["reason"], "FieldValueForbidden", "{}", res.text);
        assert_eq!(
            cause["message"],
            "Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
            "{}",
            res.text
        );
    }
}
