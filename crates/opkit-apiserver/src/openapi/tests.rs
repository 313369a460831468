//! End-to-end tests of the OpenAPI documents: the FlightTicket CRD and Deployments published in
//! v2 and v3, kubectl's checks replayed on them (field-validation support, explain lookup,
//! gnostic model parsing rules) and the protobuf encoding decoded back with prost.

use prost::Message;
use serde_json::{Value, json};

use super::proto::{self, parameter, parameters_item};
use super::refs::REF_V2;
use super::*;

fn verbs() -> Vec<String> {
    ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"].map(String::from).to_vec()
}

fn flight_ticket_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "from": {"type": "string"},
                    "to": {"type": "string"},
                    "number": {"type": "integer", "minimum": 1, "maximum": 10}
                }
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }
    })
}

fn resources() -> Vec<ResourceDoc> {
    vec![
        ResourceDoc {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            plural: "deployments".into(),
            namespaced: true,
            verbs: verbs(),
            subresources: vec!["status".into(), "scale".into()],
            schema: SchemaSource::Builtin,
        },
        ResourceDoc {
            group: "".into(),
            version: "v1".into(),
            kind: "Namespace".into(),
            plural: "namespaces".into(),
            namespaced: false,
            verbs: verbs(),
            subresources: vec!["status".into()],
            schema: SchemaSource::Builtin,
        },
        ResourceDoc {
            group: "flights.com".into(),
            version: "v1".into(),
            kind: "FlightTicket".into(),
            plural: "flighttickets".into(),
            namespaced: true,
            verbs: verbs(),
            subresources: vec!["status".into()],
            schema: SchemaSource::Crd(flight_ticket_schema()),
        },
    ]
}

/// kubectl's `supportsQueryParamV3`: the PATCH operation tagged with the GVK lists the param.
fn supports_query_param_v3(doc: &Value, gvk: &Value, param: &str) -> bool {
    let Some(paths) = doc["paths"].as_object() else {
        return false;
    };
    for item in paths.values() {
        let Some(op) = item.get("patch") else {
            continue;
        };
        if op.get("x-kubernetes-group-version-kind") != Some(gvk) {
            continue;
        }
        return op["parameters"].as_array().is_some_and(|ps| ps.iter().any(|p| p["name"] == param));
    }
    false
}

/// kubectl explain (v3): find the GVK on an operation of the resource's paths, then the
/// component schema carrying that GVK.
fn explain_lookup<'a>(doc: &'a Value, prefix: &str, plural: &str) -> Option<&'a Value> {
    let candidates = [
        format!("{prefix}/{plural}"),
        format!("{prefix}/{plural}/{{name}}"),
        format!("{prefix}/namespaces/{{namespace}}/{plural}"),
        format!("{prefix}/namespaces/{{namespace}}/{plural}/{{name}}"),
    ];
    let gvk = candidates.iter().find_map(|p| {
        let item = doc["paths"].get(p)?;
        ["get", "post", "put", "patch", "delete"]
            .iter()
            .find_map(|m| item.get(*m)?.get("x-kubernetes-group-version-kind"))
    })?;
    doc["components"]["schemas"]
        .as_object()?
        .values()
        .find(|s| s["x-kubernetes-group-version-kind"].as_array().is_some_and(|l| l.contains(gvk)))
}

#[test]
fn v2_has_crd_and_deployment_with_gvk_and_field_validation() {
    let doc = v2_document(&resources(), "v1.33.0");
    assert_eq!(doc["swagger"], "2.0");
    let ft = &doc["definitions"]["com.flights.v1.FlightTicket"];
    assert_eq!(
        ft["x-kubernetes-group-version-kind"],
        json!([{"group": "flights.com", "kind": "FlightTicket", "version": "v1"}])
    );
    assert_eq!(
        ft["properties"]["spec"]["properties"]["number"],
        json!({"type": "integer", "minimum": 1, "maximum": 10})
    );
    assert_eq!(ft["properties"]["metadata"]["$ref"], format!("{REF_V2}{}", names::OBJECT_META));
    // v2 drops the type of preserve-unknown-fields objects, as kube-apiserver does.
    assert_eq!(ft["properties"]["status"], json!({"x-kubernetes-preserve-unknown-fields": true}));
    assert!(doc["definitions"]["com.flights.v1.FlightTicketList"].is_object());
    assert!(doc["definitions"]["io.k8s.api.apps.v1.DeploymentList"].is_object());
    for (path, gvk) in [
        (
            "/apis/flights.com/v1/namespaces/{namespace}/flighttickets/{name}",
            json!({"group": "flights.com", "kind": "FlightTicket", "version": "v1"}),
        ),
        (
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
            json!({"group": "apps", "kind": "Deployment", "version": "v1"}),
        ),
    ] {
        let patch = &doc["paths"][path]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"], gvk, "{path}");
        assert_eq!(patch["x-kubernetes-action"], "patch");
        let names: Vec<&str> =
            patch["parameters"].as_array().expect("parameters").iter().filter_map(|p| p["name"].as_str()).collect();
        for n in ["body", "dryRun", "fieldManager", "fieldValidation", "force"] {
            assert!(names.contains(&n), "{path} lacks {n}: {names:?}");
        }
        let post_names = doc["paths"][path.trim_end_matches("/{name}")]["post"]["parameters"].to_string();
        assert!(post_names.contains("fieldValidation"), "{path}");
    }
    let crd_patch =
        &doc["paths"]["/apis/flights.com/v1/namespaces/{namespace}/flighttickets/{name}"]["patch"]["consumes"];
    assert!(!crd_patch.to_string().contains("strategic-merge-patch"));
}

/// Replays the constraints of kubectl's gnostic model parser (kube-openapi `proto`) on every
/// definition, so kubectl can load the document.
fn check_kubectl_parsable(defs: &serde_json::Map<String, Value>, name: &str, s: &Value) {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        assert!(s.get("type").is_none(), "{name}: reference with a type");
        assert!(s.get("properties").is_none(), "{name}: reference with properties");
        let target = r.strip_prefix(REF_V2).expect("definition reference");
        assert!(defs.contains_key(target), "{name}: unknown model {target}");
        return;
    }
    match s.get("type") {
        None => {}
        Some(Value::String(t)) => {
            assert!(
                ["object", "array", "string", "integer", "number", "boolean"].contains(&t.as_str()),
                "{name}: type {t}"
            );
            if t == "array" {
                assert!(s["items"].is_object(), "{name}: array without one items schema");
            }
        }
        Some(other) => panic!("{name}: multiple types {other}"),
    }
    if let Some(ps) = s.get("properties").and_then(Value::as_object) {
        for (field, sub) in ps {
            check_kubectl_parsable(defs, &format!("{name}.{field}"), sub);
        }
    }
    if let Some(items) = s.get("items") {
        check_kubectl_parsable(defs, &format!("{name}[]"), items);
    }
    if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
        check_kubectl_parsable(defs, &format!("{name}{{}}"), ap);
    }
}

#[test]
fn v2_definitions_parse_like_kubectl() {
    let doc = v2_document(&resources(), "v1.33.0");
    let defs = doc["definitions"].as_object().expect("definitions");
    for (name, def) in defs {
        check_kubectl_parsable(defs, name, def);
    }
    // The rules hold for every built-in definition, not just the ones this document uses.
    let all: serde_json::Map<String, Value> =
        builtin_definitions().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for (name, def) in &all {
        check_kubectl_parsable(&all, name, def);
    }
    // Every reference in paths resolves too.
    let mut refs = std::collections::BTreeSet::new();
    refs::collect_refs(&doc["paths"], &mut refs);
    for r in refs {
        assert!(defs.contains_key(&r), "path references missing {r}");
    }
}

#[test]
fn v3_documents_support_field_validation_and_explain() {
    let rs = resources();
    for (gv, prefix, plural, gvk) in [
        (
            "flights.com/v1",
            "/apis/flights.com/v1",
            "flighttickets",
            json!({"group": "flights.com", "kind": "FlightTicket", "version": "v1"}),
        ),
        ("apps/v1", "/apis/apps/v1", "deployments", json!({"group": "apps", "kind": "Deployment", "version": "v1"})),
        ("v1", "/api/v1", "namespaces", json!({"group": "", "kind": "Namespace", "version": "v1"})),
    ] {
        let doc = v3_document(gv, &rs, "v1.33.0");
        assert_eq!(doc["openapi"], "3.0.0");
        assert!(supports_query_param_v3(&doc, &gvk, "fieldValidation"), "{gv}");
        assert!(!supports_query_param_v3(&doc, &gvk, "nonsense"), "{gv}");
        let schema = explain_lookup(&doc, prefix, plural).expect("explain finds the kind");
        assert!(schema["properties"]["spec"].is_object() || gv == "v1", "{gv}");
        // Every component reference resolves inside the document.
        let text = doc.to_string();
        for part in text.split("\"#/components/schemas/").skip(1) {
            let name = part.split('"').next().unwrap_or_default();
            assert!(doc["components"]["schemas"].get(name).is_some(), "{gv}: {name}");
        }
        assert!(!text.contains(REF_V2), "{gv}: v2 reference left in v3");
    }
    let ft = v3_document("apis/flights.com/v1", &rs, "v1.33.0");
    let schema = &ft["components"]["schemas"]["com.flights.v1.FlightTicket"];
    assert_eq!(schema["properties"]["spec"]["properties"]["from"]["type"], "string");
    assert_eq!(
        schema["properties"]["metadata"]["allOf"][0]["$ref"],
        format!("#/components/schemas/{}", names::OBJECT_META)
    );
    assert!(ft["components"]["schemas"][names::OBJECT_META].is_object());
    // Other groups' resources stay out.
    assert!(ft["components"]["schemas"].get("io.k8s.api.apps.v1.Deployment").is_none());
    assert!(ft["paths"].as_object().is_some_and(|p| p.keys().all(|k| k.starts_with("/apis/flights.com/v1/"))));
}

#[test]
fn protobuf_round_trip_keeps_extensions() {
    let doc = v2_document(&resources(), "v1.33.0");
    let bytes = v2_protobuf(&doc);
    let decoded = proto::Document::decode(bytes.as_slice()).expect("decodes");
    assert_eq!(decoded, proto_encode::document(&doc));
    assert_eq!(decoded.swagger, "2.0");
    assert_eq!(decoded.info.as_ref().map(|i| i.version.as_str()), Some("v1.33.0"));

    let defs = decoded.definitions.expect("definitions").additional_properties;
    let ft = defs
        .iter()
        .find(|d| d.name == "com.flights.v1.FlightTicket")
        .and_then(|d| d.value.as_ref())
        .expect("FlightTicket definition");
    let gvk = ft
        .vendor_extension
        .iter()
        .find(|e| e.name == "x-kubernetes-group-version-kind")
        .and_then(|e| e.value.as_ref())
        .expect("gvk extension");
    let parsed: Value = serde_json::from_str(&gvk.yaml).expect("extension is JSON/YAML");
    assert_eq!(parsed, json!([{"group": "flights.com", "kind": "FlightTicket", "version": "v1"}]));
    let spec = ft
        .properties
        .as_ref()
        .and_then(|p| p.additional_properties.iter().find(|n| n.name == "spec"))
        .and_then(|n| n.value.as_ref())
        .expect("spec");
    let number = spec
        .properties
        .as_ref()
        .and_then(|p| p.additional_properties.iter().find(|n| n.name == "number"))
        .and_then(|n| n.value.as_ref())
        .expect("number");
    assert_eq!(number.r#type.as_ref().map(|t| t.value.clone()), Some(vec!["integer".to_string()]));
    assert_eq!((number.minimum, number.maximum), (1.0, 10.0));

    let paths = decoded.paths.expect("paths").path;
    let item = paths
        .iter()
        .find(|p| p.name == "/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
        .and_then(|p| p.value.as_ref())
        .expect("deployment item path");
    let patch = item.patch.as_ref().expect("patch operation");
    assert!(patch.vendor_extension.iter().any(|e| e.name == "x-kubernetes-group-version-kind"));
    let has_field_validation = patch.parameters.iter().any(|p| {
        matches!(
            &p.oneof,
            Some(parameters_item::Oneof::Parameter(proto::Parameter {
                oneof: Some(parameter::Oneof::NonBodyParameter(proto::NonBodyParameter {
                    oneof: Some(proto::non_body_parameter::Oneof::QueryParameterSubSchema(q)),
                })),
            })) if q.name == "fieldValidation"
        )
    });
    assert!(has_field_validation);
    let has_body = patch.parameters.iter().any(|p| {
        matches!(
            &p.oneof,
            Some(parameters_item::Oneof::Parameter(proto::Parameter {
                oneof: Some(parameter::Oneof::BodyParameter(b)),
            })) if b.schema.as_ref().is_some_and(|s| s._ref.ends_with(names::PATCH))
        )
    });
    assert!(has_body);
}

#[test]
fn protobuf_schema_round_trip_of_recursive_shapes() {
    let s = json!({
        "type": "object",
        "additionalProperties": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "allOf": [{"$ref": "#/definitions/x"}],
        "default": {"k": 1},
        "x-kubernetes-list-type": "map"
    });
    let msg = proto_encode::schema(&s);
    let back = proto::Schema::decode(msg.encode_to_vec().as_slice()).expect("decodes");
    assert_eq!(back, msg);
    assert_eq!(back.default.map(|d| d.yaml), Some("{\"k\":1}".to_string()));
    match back.additional_properties.and_then(|a| a.oneof) {
        Some(proto::additional_properties_item::Oneof::Schema(inner)) => {
            let items = inner.items.expect("items").schema;
            assert_eq!(items.len(), 1);
            assert_eq!(items[0].r#enum.len(), 2);
        }
        other => panic!("unexpected additionalProperties {other:?}"),
    }
    assert_eq!(back.vendor_extension[0].name, "x-kubernetes-list-type");
}
