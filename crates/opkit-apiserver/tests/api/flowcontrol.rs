//! flowcontrol.apiserver.k8s.io: kube's mandatory and suggested FlowSchemas and
//! PriorityLevelConfigurations exist from the start, new objects get kube's v1 defaults,
//! invalid ones are refused with kube's causes, the mandatory specs are fixed, and the
//! Tables have kube's columns.

use serde_json::{Value, json};

use crate::common::{env, raw, within};

const GROUP: &str = "/apis/flowcontrol.apiserver.k8s.io/v1";

fn names(list: &Value) -> Vec<String> {
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items.iter().filter_map(|i| i["metadata"]["name"].as_str().map(String::from)).collect()
}

#[tokio::test]
async fn kubes_configuration_exists_from_the_start() {
    let env = env().await;
    let levels = raw(&env.client(), "GET", &format!("{GROUP}/prioritylevelconfigurations"), None, vec![]).await;
    assert_eq!(levels.code, 200, "{}", levels.text);
    let mut level_names = names(&levels.json);
    level_names.sort();
    let want = [
        "catch-all",
        "exempt",
        "global-default",
        "leader-election",
        "node-high",
        "system",
        "workload-high",
        "workload-low",
    ];
    assert_eq!(level_names, want);
    let schemas = raw(&env.client(), "GET", &format!("{GROUP}/flowschemas"), None, vec![]).await;
    let schema_names = names(&schemas.json);
    for name in ["exempt", "probes", "system-leader-election", "global-default", "catch-all", "service-accounts"] {
        assert!(schema_names.iter().any(|n| n == name), "{name} missing from {schema_names:?}");
    }
    let catch_all =
        raw(&env.client(), "GET", &format!("{GROUP}/prioritylevelconfigurations/catch-all"), None, vec![]).await;
    assert_eq!(catch_all.json["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"], "true");
    assert_eq!(
        catch_all.json["spec"],
        json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 0, "limitResponse": {"type": "Reject"}}})
    );
    let exempt = raw(&env.client(), "GET", &format!("{GROUP}/flowschemas/exempt"), None, vec![]).await;
    assert_eq!(exempt.json["spec"]["matchingPrecedence"], 1);
    assert_eq!(exempt.json["spec"]["rules"][0]["subjects"][0]["group"]["name"], "system:masters");
}

#[tokio::test]
async fn new_objects_get_kubes_defaults() {
    let env = env().await;
    let level = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "operators"},
        "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}});
    let path = format!("{GROUP}/prioritylevelconfigurations");
    let res = raw(&env.client(), "POST", &path, Some("application/json"), level.to_string().into_bytes()).await;
    assert_eq!(res.code, 201, "{}", res.text);
    let limited = &res.json["spec"]["limited"];
    assert_eq!(limited["nominalConcurrencyShares"], 30);
    assert_eq!(limited["lendablePercent"], 0);
    assert_eq!(limited["limitResponse"]["queuing"], json!({"queues": 64, "handSize": 8, "queueLengthLimit": 50}));
    let schema = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "my-operator"},
        "spec": {"priorityLevelConfiguration": {"name": "operators"}, "rules": [{
            "subjects": [{"kind": "ServiceAccount", "serviceAccount": {"name": "controller", "namespace": "system"}}],
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}]}]}});
    let path = format!("{GROUP}/flowschemas");
    let res = raw(&env.client(), "POST", &path, Some("application/json"), schema.to_string().into_bytes()).await;
    assert_eq!(res.code, 201, "{}", res.text);
    assert_eq!(res.json["spec"]["matchingPrecedence"], 1000);
}

/// (resource, body, the fields of the causes kube reports)
fn invalid_objects() -> Vec<(&'static str, Value, Vec<&'static str>)> {
    let schema = |name: &str, spec: Value| json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": name}, "spec": spec});
    let level = |name: &str, spec: Value| {
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": name}, "spec": spec})
    };
    vec![
        (
            "flowschemas",
            schema(
                "too-early",
                json!({"matchingPrecedence": 1, "priorityLevelConfiguration": {"name": "global-default"},
                "distinguisherMethod": {"type": "ByColour"}}),
            ),
            vec!["spec.matchingPrecedence", "spec.distinguisherMethod.type"],
        ),
        (
            "flowschemas",
            schema(
                "no-level",
                json!({"matchingPrecedence": 20000, "rules": [{"subjects": [],
                "resourceRules": [{"verbs": ["get", "fly"], "apiGroups": ["*", "apps"], "resources": []}]}]}),
            ),
            vec![
                "spec.matchingPrecedence",
                "spec.priorityLevelConfiguration.name",
                "spec.rules[0].subjects",
                "spec.rules[0].resourceRules[0].verbs",
                "spec.rules[0].resourceRules[0].apiGroups",
                "spec.rules[0].resourceRules[0].resources",
                "spec.rules[0].resourceRules[0].namespaces",
            ],
        ),
        (
            "flowschemas",
            schema(
                "bad-subject",
                json!({"priorityLevelConfiguration": {"name": "global-default"}, "rules": [{
                "subjects": [{"kind": "User", "group": {"name": "g"}}],
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["healthz", "/a/*/b"]}]}]}),
            ),
            vec![
                "spec.rules[0].subjects[0].user",
                "spec.rules[0].subjects[0].group",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[1]",
            ],
        ),
        ("prioritylevelconfigurations", level("not-exempt", json!({"type": "Exempt"})), vec!["spec.type"]),
        (
            "prioritylevelconfigurations",
            level(
                "bad-queues",
                json!({"type": "Limited", "limited": {"lendablePercent": 101,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 4, "handSize": 5}}}}),
            ),
            vec!["spec.limited.lendablePercent", "spec.limited.limitResponse.queuing.handSize"],
        ),
        ("prioritylevelconfigurations", level("no-limits", json!({"type": "Limited"})), vec!["spec.limited"]),
    ]
}

#[tokio::test]
async fn invalid_objects_are_refused_with_kubes_causes() {
    let env = env().await;
    for (resource, body, fields) in invalid_objects() {
        let path = format!("{GROUP}/{resource}");
        let res = raw(&env.client(), "POST", &path, Some("application/json"), body.to_string().into_bytes()).await;
        assert_eq!(res.code, 422, "{}", res.text);
        let causes = res.json["details"]["causes"].as_array().cloned().unwrap_or_default();
        let got: Vec<&str> = causes.iter().filter_map(|c| c["field"].as_str()).collect();
        assert_eq!(got, fields, "{}", res.text);
    }
}

#[tokio::test]
async fn mandatory_specs_are_fixed_and_suggested_ones_editable() {
    let env = env().await;
    let patch = |body: Value| body.to_string().into_bytes();
    let merge = Some("application/merge-patch+json");
    let path = format!("{GROUP}/prioritylevelconfigurations/catch-all");
    let res = raw(
        &env.client(),
        "PATCH",
        &path,
        merge,
        patch(json!({"spec": {"limited": {"nominalConcurrencyShares": 50}}})),
    )
    .await;
    assert_eq!(res.code, 422, "{}", res.text);
    assert!(res.text.contains("spec of 'catch-all' must equal the fixed value"), "{}", res.text);
    let path = format!("{GROUP}/flowschemas/exempt");
    let res = raw(&env.client(), "PATCH", &path, merge, patch(json!({"spec": {"matchingPrecedence": 2}}))).await;
    assert_eq!(res.code, 422, "{}", res.text);
    let path = format!("{GROUP}/prioritylevelconfigurations/workload-low");
    let body = json!({"metadata": {"annotations": {"apf.kubernetes.io/autoupdate-spec": "false"}},
        "spec": {"limited": {"nominalConcurrencyShares": 200}}});
    let res = raw(&env.client(), "PATCH", &path, merge, patch(body)).await;
    assert_eq!(res.code, 200, "{}", res.text);
    assert_eq!(res.json["spec"]["limited"]["nominalConcurrencyShares"], 200);
}

#[tokio::test]
async fn tables_have_kubes_columns() {
    let env = env().await;
    let columns = |table: &Value| -> Vec<String> {
        let defs = table["columnDefinitions"].as_array().cloned().unwrap_or_default();
        defs.iter().filter_map(|c| c["name"].as_str().map(String::from)).collect()
    };
    let table = table_of(&env.client(), &format!("{GROUP}/flowschemas/catch-all")).await;
    assert_eq!(
        columns(&table),
        ["Name", "PriorityLevel", "MatchingPrecedence", "DistinguisherMethod", "Age", "MissingPL"]
    );
    assert_eq!(table["rows"][0]["cells"][1], "catch-all");
    assert_eq!(table["rows"][0]["cells"][2], 10000);
    assert_eq!(table["rows"][0]["cells"][3], "ByUser");
    let table = table_of(&env.client(), &format!("{GROUP}/prioritylevelconfigurations/exempt")).await;
    let want = ["Name", "Type", "NominalConcurrencyShares", "Queues", "HandSize", "QueueLengthLimit", "Age"];
    assert_eq!(columns(&table), want);
    assert_eq!(table["rows"][0]["cells"][1], "Exempt");
    assert_eq!(table["rows"][0]["cells"][2], "<none>");
}

/// GETs `path` as a meta.k8s.io/v1 Table, as kubectl does.
async fn table_of(client: &kube::Client, path: &str) -> Value {
    let req = http::Request::builder()
        .uri(path)
        .header(http::header::ACCEPT, "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(kube::client::Body::from(Vec::new()))
        .expect("request builds");
    let res = within(path, client.send(req)).await.expect("table answered");
    let bytes = within(path, http_body_util::BodyExt::collect(res.into_body())).await.expect("body").to_bytes();
    serde_json::from_slice(&bytes).expect("a JSON table")
}
