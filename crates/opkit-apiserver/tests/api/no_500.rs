//! No client input may produce a 5xx: a battery of malformed paths, parameters and bodies,
//! each of which must be answered promptly (no request may hang) with a `Status` whose
//! code matches the HTTP code.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::core::v1::Namespace;
use kube::CustomResourceExt;
use kube::api::{Api, PostParams};

use crate::common::{FlightTicket, client_without_retry, config_map, env_with_flights, flight, raw};

const CM: &str = "/api/v1/namespaces/default/configmaps";
const FT: &str = "/apis/flights.com/v1/namespaces/default/flighttickets";
const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const JSONPATCH: &str = "application/json-patch+json";
const SMP: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn cases() -> Vec<(&'static str, String, Option<&'static str>, Vec<u8>)> {
    let b = |s: &str| s.as_bytes().to_vec();
    let cm = format!("{CM}/existing");
    let ft = format!("{FT}/existing");
    vec![
        ("POST", CM.into(), Some(JSON), b("")),
        ("POST", CM.into(), Some(JSON), b("[]")),
        ("POST", CM.into(), Some(JSON), b("null")),
        ("POST", CM.into(), Some(JSON), b("42")),
        ("POST", CM.into(), Some(JSON), b("{\"kind\":\"ConfigMap\"")),
        ("POST", CM.into(), Some(JSON), b("{}")),
        ("POST", CM.into(), Some(JSON), b(r#"{"apiVersion":"v1","kind":"ConfigMap"}"#)),
        ("POST", CM.into(), Some(JSON), b(r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}"#)),
        ("POST", CM.into(), Some(JSON), b(r#"{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"s"}}"#)),
        ("POST", CM.into(), Some(JSON), b(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":"nope"}"#)),
        ("POST", CM.into(), Some(JSON), b(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":5}}"#)),
        ("POST", CM.into(), Some(JSON), b(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name!"}}"#)),
        (
            "POST",
            CM.into(),
            Some(JSON),
            b(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"a":1}}}"#),
        ),
        (
            "POST",
            CM.into(),
            Some(JSON),
            b(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"other"}}"#),
        ),
        (
            "POST",
            CM.into(),
            Some(JSON),
            b(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":["a"]}"#),
        ),
        (
            "POST",
            CM.into(),
            Some(JSON),
            b(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":{"b":1}}}"#),
        ),
        (
            "POST",
            CM.into(),
            Some(JSON),
            format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{}"}}}}"#, "a".repeat(300))
                .into_bytes(),
        ),
        ("POST", CM.into(), Some(JSON), vec![0xff, 0xfe, 0x00, 0x7b]),
        ("POST", CM.into(), Some("application/yaml"), b("a: [b\n  c: :")),
        ("POST", CM.into(), Some("application/vnd.kubernetes.protobuf"), b("k8s\0garbage")),
        ("POST", CM.into(), Some("text/plain"), b("hello")),
        (
            "POST",
            format!("{CM}?dryRun=Maybe"),
            Some(JSON),
            b(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"}}"#),
        ),
        (
            "POST",
            format!("{CM}?fieldValidation=Bogus"),
            Some(JSON),
            b(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"}}"#),
        ),
        (
            "POST",
            format!("{CM}?fieldValidation=Strict"),
            Some(JSON),
            b(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"},"bogus":1}"#),
        ),
        ("PUT", cm.clone(), Some(JSON), b(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"}}"#)),
        (
            "PUT",
            cm.clone(),
            Some(JSON),
            b(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing","resourceVersion":"abc"}}"#),
        ),
        ("PUT", cm.clone(), Some(JSON), b("{")),
        ("PUT", CM.into(), Some(JSON), b("{}")),
        ("PATCH", cm.clone(), Some(JSONPATCH), b(r#"[{"op":"replace","path":"/data/missing/deep","value":1}]"#)),
        ("PATCH", cm.clone(), Some(JSONPATCH), b(r#"[{"op":"test","path":"/data/k","value":"nope"}]"#)),
        ("PATCH", cm.clone(), Some(JSONPATCH), b(r#"[{"op":"explode","path":"/data"}]"#)),
        ("PATCH", cm.clone(), Some(JSONPATCH), b(r#"{"op":"add"}"#)),
        ("PATCH", cm.clone(), Some(JSONPATCH), b(r#"[{"op":"add","path":"/metadata/name","value":"renamed"}]"#)),
        ("PATCH", cm.clone(), Some(JSONPATCH), b(r#"[{"op":"replace","path":"/metadata","value":7}]"#)),
        ("PATCH", cm.clone(), Some(MERGE), b("[1,2]")),
        ("PATCH", cm.clone(), Some(MERGE), b("{")),
        ("PATCH", cm.clone(), Some(MERGE), b(r#"{"metadata":{"resourceVersion":"1"}}"#)),
        ("PATCH", cm.clone(), Some(MERGE), b(r#"{"data":{"k":[1]}}"#)),
        ("PATCH", cm.clone(), Some(SMP), b(r#"{"data":{"$patch":"explode"}}"#)),
        ("PATCH", cm.clone(), Some(SMP), b(r#"{"$setElementOrder/data":[1]}"#)),
        ("PATCH", cm.clone(), Some(APPLY), b("kind: ConfigMap")),
        ("PATCH", cm.clone(), Some(APPLY), b("{apiVersion: v1, kind: ConfigMap, metadata: {name: existing}}")),
        (
            "PATCH",
            format!("{cm}?fieldManager=m&force=maybe"),
            Some(APPLY),
            b("{apiVersion: v1, kind: ConfigMap, metadata: {name: existing}}"),
        ),
        (
            "PATCH",
            format!("{cm}?fieldManager=m"),
            Some(APPLY),
            b("{apiVersion: v1, kind: Secret, metadata: {name: existing}}"),
        ),
        ("PATCH", format!("{cm}?fieldManager=m"), Some(APPLY), b(":\n- [")),
        ("PATCH", format!("{CM}/missing"), Some(MERGE), b(r#"{"data":{"a":"b"}}"#)),
        ("PATCH", cm.clone(), Some("application/x-unknown-patch"), b("{}")),
        ("PATCH", cm.clone(), None, b("{}")),
        ("PATCH", ft.clone(), Some(MERGE), b(r#"{"spec":{"number":"eleven"}}"#)),
        ("PATCH", ft.clone(), Some(MERGE), b(r#"{"spec":{"number":1e400}}"#)),
        ("PATCH", ft.clone(), Some(MERGE), b(r#"{"spec":null}"#)),
        (
            "PATCH",
            ft.clone(),
            Some(JSONPATCH),
            b(r#"[{"op":"replace","path":"/spec/number","value":99999999999999999999999}]"#),
        ),
        ("PATCH", format!("{ft}/status"), Some(MERGE), b(r#"{"status":"flat"}"#)),
        (
            "POST",
            FT.into(),
            Some(JSON),
            b(r#"{"apiVersion":"flights.com/v1","kind":"FlightTicket","metadata":{"name":"n"},"spec":"scalar"}"#),
        ),
        (
            "POST",
            FT.into(),
            Some(JSON),
            b(
                r#"{"apiVersion":"flights.com/v1","kind":"FlightTicket","metadata":{"name":"n"},"spec":{"number":-1e308}}"#,
            ),
        ),
        (
            "POST",
            FT.into(),
            Some(JSON),
            b(r#"{"apiVersion":"flights.com/v2","kind":"FlightTicket","metadata":{"name":"n"}}"#),
        ),
        ("DELETE", format!("{CM}/victim1"), Some(JSON), b("{not json")),
        (
            "DELETE",
            format!("{CM}/victim2"),
            Some(JSON),
            b(r#"{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Sideways"}"#),
        ),
        (
            "DELETE",
            format!("{CM}/victim3"),
            Some(JSON),
            b(r#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"wrong"}}"#),
        ),
        (
            "DELETE",
            format!("{CM}/victim4"),
            Some(JSON),
            b(r#"{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":-5}"#),
        ),
        ("DELETE", format!("{CM}?labelSelector=a%20in%20(b"), None, vec![]),
        ("DELETE", format!("{CM}?fieldSelector=metadata.name%3Dvictim9&limit=x"), None, vec![]),
        ("GET", format!("{CM}?labelSelector=%3D%3D%3D"), None, vec![]),
        ("GET", format!("{CM}?labelSelector=a%20in%20(b"), None, vec![]),
        ("GET", format!("{CM}?fieldSelector=spec.nope%3Dx"), None, vec![]),
        ("GET", format!("{CM}?fieldSelector=%3D%3D"), None, vec![]),
        ("GET", format!("{CM}?limit=-1"), None, vec![]),
        ("GET", format!("{CM}?limit=abc"), None, vec![]),
        ("GET", format!("{CM}?limit=10&continue=garbage"), None, vec![]),
        ("GET", format!("{CM}?limit=10&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTF9"), None, vec![]),
        ("GET", format!("{CM}?resourceVersion=abc"), None, vec![]),
        ("GET", format!("{CM}?resourceVersion=1&resourceVersionMatch=Bogus"), None, vec![]),
        ("GET", format!("{CM}?resourceVersionMatch=Exact"), None, vec![]),
        ("GET", format!("{CM}?watch=true&resourceVersion=abc"), None, vec![]),
        ("GET", format!("{CM}?watch=true&timeoutSeconds=abc"), None, vec![]),
        ("GET", format!("{CM}?watch=true&sendInitialEvents=true"), None, vec![]),
        ("GET", format!("{CM}?watch=maybe&timeoutSeconds=1"), None, vec![]),
        ("GET", format!("{CM}/%ff%fe"), None, vec![]),
        ("GET", format!("{CM}/existing/nosuchsub"), None, vec![]),
        ("GET", "/api/v1/namespaces/default/configmaps/a/b/c/d/e".into(), None, vec![]),
        ("GET", "/apis/flights.com/v9/namespaces/default/flighttickets".into(), None, vec![]),
        ("GET", "/apis//v1/x".into(), None, vec![]),
        ("GET", "/api/v1/configmaps/existing".into(), None, vec![]),
        ("GET", "/api/v1/namespaces/default/namespaces".into(), None, vec![]),
        (
            "POST",
            "/api/v1/namespaces".into(),
            Some(JSON),
            b(r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"UPPER"}}"#),
        ),
        ("PUT", "/api/v1/namespaces/default/finalize".into(), Some(JSON), b("{}")),
        ("PUT", "/api/v1/namespaces/default/configmaps/existing/status".into(), Some(JSON), b("{}")),
        (
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions".into(),
            Some(JSON),
            b(
                r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"bad"},"spec":{}}"#,
            ),
        ),
        (
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions".into(),
            Some(JSON),
            b(
                r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"xs.e.com"},"spec":{"group":"e.com","names":{"plural":"xs","kind":"X"},"scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-validations":[{"rule":"self.(("}]}}}]}}"#,
            ),
        ),
        (
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions".into(),
            Some(JSON),
            b(
                r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"ys.e.com"},"spec":{"group":"e.com","names":{"plural":"ys","kind":"Y"},"scope":"Galactic","versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"banana"}}}}}]}}"#,
            ),
        ),
        ("DELETE", "/api/v1/namespaces/default/configmaps".into(), Some(JSON), b("{")),
        ("OPTIONS", CM.into(), None, vec![]),
        ("HEAD", CM.into(), None, vec![]),
        ("TRACE", CM.into(), None, vec![]),
        ("POST", "/version".into(), Some(JSON), b("{}")),
        ("GET", "/openapi/v3/apis/nope/v1".into(), None, vec![]),
    ]
}

#[tokio::test]
async fn no_client_input_yields_a_server_error() {
    let env = env_with_flights().await;
    let client = client_without_retry(&env).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &config_map("existing", &[("k", "v")])).await.expect("seed configmap");
    let fts: Api<FlightTicket> = Api::namespaced(client.clone(), "default");
    fts.create(&PostParams::default(), &flight("existing", "A", "B", 1)).await.expect("seed flight");
    for i in 1..=4 {
        cms.create(&PostParams::default(), &config_map(&format!("victim{i}"), &[])).await.expect("seed victim");
    }

    let mut failures = Vec::new();
    for (method, path, ct, body) in cases() {
        let Ok(res) =
            tokio::time::timeout(std::time::Duration::from_secs(5), raw(&client, method, &path, ct, body)).await
        else {
            failures.push(format!("{method} {path} ({ct:?}) -> no complete response within 5s"));
            continue;
        };
        if res.code >= 500 {
            failures.push(format!("{method} {path} ({ct:?}) -> {}: {}", res.code, res.text));
        } else if res.code >= 400 && method != "HEAD" && (res.json["kind"] != "Status" || res.json["code"] != res.code)
        {
            failures.push(format!("{method} {path} ({ct:?}) -> {} without a matching Status: {}", res.code, res.text));
        }
    }
    // The server still serves normally afterwards.
    assert!(cms.get("victim1").await.is_ok() || cms.get("existing").await.is_ok());
    assert!(fts.get("existing").await.is_ok(), "FlightTicket readable");
    let nss: Api<Namespace> = Api::all(client.clone());
    assert!(nss.get("default").await.is_ok());
    let _ = FlightTicket::crd();
    assert!(failures.is_empty(), "{} inputs mishandled:\n{}", failures.len(), failures.join("\n"));
}
