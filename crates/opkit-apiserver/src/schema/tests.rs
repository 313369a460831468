//! Behaviour tests of the schema module: validation messages, defaulting, pruning, CEL and
//! CustomResourceDefinition validation, against what kube-apiserver reports.

use serde_json::{Value, json};

use super::*;

fn flight_ticket_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["from", "to"],
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

fn ticket(spec: Value) -> Value {
    json!({"apiVersion": "flights.example.com/v1", "kind": "FlightTicket",
           "metadata": {"name": "t", "labels": {"a": "b"}}, "spec": spec})
}

fn compile(v: Value) -> CrdSchema {
    match CrdSchema::new(&v) {
        Ok(s) => s,
        Err(e) => panic!("schema should compile: {e:?}"),
    }
}

fn messages(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(FieldError::to_message).collect()
}

#[test]
fn crd_schema_is_send_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CrdSchema>();
}

#[test]
fn flight_ticket_number_range() {
    let s = compile(flight_ticket_schema());
    let errs = s.validate(&ticket(json!({"from": "a", "to": "b", "number": 11})), None);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].field, "spec.number");
    assert_eq!(errs[0].reason, FieldErrorReason::Invalid);
    assert_eq!(errs[0].message, "Invalid value: 11: spec.number in body should be less than or equal to 10");
    let errs = s.validate(&ticket(json!({"from": "a", "to": "b", "number": 0})), None);
    assert_eq!(
        messages(&errs),
        vec!["spec.number: Invalid value: 0: spec.number in body should be greater than or equal to 1"]
    );
    assert!(s.validate(&ticket(json!({"from": "a", "to": "b", "number": 5})), None).is_empty());
}

#[test]
fn required_and_type() {
    let s = compile(flight_ticket_schema());
    let errs = s.validate(&ticket(json!({"to": "b", "number": "string"})), None);
    assert_eq!(
        messages(&errs),
        vec![
            "spec.number: Invalid value: \"string\": spec.number in body must be of type integer: \"string\"",
            "spec.from: Required value",
        ]
    );
    assert_eq!(errs[0].reason, FieldErrorReason::TypeInvalid);
    assert_eq!(errs[1].reason, FieldErrorReason::Required);
    assert_eq!(errs[1].message, "Required value");
    // integral floats are integers
    assert!(s.validate(&ticket(json!({"from": "a", "to": "b", "number": 3.0})), None).is_empty());
}

#[test]
fn enum_pattern_length_items() {
    let s = compile(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "mode": {"type": "string", "enum": ["a", "b"]},
        "level": {"type": "integer", "enum": [1, 2]},
        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5, "minLength": 2},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "minItems": 1},
        "when": {"type": "string", "format": "date-time"},
        "ratio": {"type": "number", "multipleOf": 0.5, "exclusiveMaximum": true, "maximum": 2}
    }}}}));
    let obj = json!({"spec": {"mode": "x", "level": 3, "name": "ABCDEFG", "tags": ["a", "b", "c"],
                              "when": "yesterday", "ratio": 2}});
    let got = messages(&s.validate(&obj, None));
    let want = vec![
        "spec.mode: Unsupported value: \"x\": supported values: \"a\", \"b\"",
        "spec.level: Unsupported value: 3: supported values: \"1\", \"2\"",
        "spec.name: Too long: may not be more than 5 bytes",
        "spec.name: Invalid value: \"ABCDEFG\": spec.name in body should match '^[a-z]+$'",
        "spec.tags: Too many: 3: must have at most 2 items",
        "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\"",
        "spec.ratio: Invalid value: 2: spec.ratio in body should be less than 2",
    ];
    assert_eq!(got, want);
    let ok = json!({"spec": {"mode": "b", "level": 2, "name": "abc", "tags": ["a"],
                             "when": "2024-01-01T00:00:00Z", "ratio": 1.5}});
    assert!(s.validate(&ok, None).is_empty());
    let few = json!({"spec": {"tags": [], "name": "a"}});
    assert_eq!(
        messages(&s.validate(&few, None)),
        vec![
            "spec.name: Invalid value: \"a\": spec.name in body should be at least 2 chars long",
            "spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items",
        ]
    );
}

#[test]
fn int_or_string_and_nullable() {
    let s = compile(json!({"type": "object", "properties": {
        "port": {"x-kubernetes-int-or-string": true},
        "opt": {"type": "string", "nullable": true}
    }}));
    assert!(s.validate(&json!({"port": 80, "opt": null}), None).is_empty());
    assert!(s.validate(&json!({"port": "http"}), None).is_empty());
    assert_eq!(
        messages(&s.validate(&json!({"port": true}), None)),
        vec!["port: Invalid value: \"boolean\": port in body must be of type integer,string: \"boolean\""]
    );
    assert_eq!(
        messages(&s.validate(&json!({"port": null}), None)),
        vec!["port: Invalid value: \"null\": port in body must be of type integer,string: \"null\""]
    );
}

#[test]
fn null_of_non_nullable_is_dropped_or_defaulted() {
    let s = compile(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "a": {"type": "string"},
        "b": {"type": "string", "default": "dflt"},
        "c": {"type": "string", "nullable": true}
    }}}}));
    let mut obj = json!({"spec": {"a": null, "b": null, "c": null}});
    s.apply_defaults(&mut obj);
    assert_eq!(obj, json!({"spec": {"b": "dflt", "c": null}}));
    assert!(s.validate(&obj, None).is_empty());
}

#[test]
fn preserve_unknown_and_pruning() {
    let s = compile(json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "embedded": {"type": "object", "x-kubernetes-embedded-resource": true,
                         "x-kubernetes-preserve-unknown-fields": true}
        }}
    }}));
    let mut obj = json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "x", "whatever": 1},
        "spec": {"foo": 1, "items": [{"name": "a", "bar": 2}], "free": {"any": {"thing": 1}},
                 "labels": {"k": "v"},
                 "embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}},
        "status": {"x": 1}});
    assert_eq!(s.unknown_fields(&obj), vec!["spec.foo", "spec.items[0].bar", "status"]);
    let pruned = s.prune(&mut obj);
    assert_eq!(pruned, vec!["spec.foo", "spec.items[0].bar", "status"]);
    assert_eq!(obj["metadata"], json!({"name": "x", "whatever": 1}));
    assert_eq!(obj["spec"]["free"], json!({"any": {"thing": 1}}));
    assert_eq!(obj["spec"]["items"], json!([{"name": "a"}]));
    assert_eq!(obj["spec"]["embedded"]["kind"], json!("Pod"));
    assert!(s.validate(&obj, None).is_empty());
    let mut missing_kind = json!({"spec": {"embedded": {"apiVersion": "v1"}}});
    s.prune(&mut missing_kind);
    assert_eq!(
        messages(&s.validate(&missing_kind, None)),
        vec!["spec.embedded.kind: Required value: must not be empty"]
    );
}

#[test]
fn defaults_nested_in_arrays() {
    let s = compile(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "default": 1},
        "ports": {"type": "array", "items": {"type": "object", "properties": {
            "port": {"type": "integer"},
            "protocol": {"type": "string", "default": "TCP"},
            "opts": {"type": "object", "default": {}, "properties": {"x": {"type": "string", "default": "y"}}}
        }}}
    }}}}));
    let mut obj = json!({"spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}});
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj,
        json!({"spec": {"ports": [
            {"port": 80, "protocol": "TCP", "opts": {"x": "y"}},
            {"port": 53, "protocol": "UDP", "opts": {"x": "y"}}
        ], "replicas": 1}})
    );
}

#[test]
fn list_type_set_and_map() {
    let s = compile(json!({"type": "object", "properties": {
        "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}}
    }}));
    let obj = json!({"set": ["a", "b", "a"], "map": [{"name": "x", "v": 1}, {"name": "x", "v": 2}]});
    assert_eq!(
        messages(&s.validate(&obj, None)),
        vec!["set[2]: Duplicate value: \"a\"", "map[1]: Duplicate value: {\"name\":\"x\"}"]
    );
}

fn cel_schema() -> Value {
    json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.min <= self.max", "message": "min must not exceed max"},
            {"rule": "self.max < 100", "messageExpression": "'max is ' + string(self.max)"},
            {"rule": "self.min >= 0"},
            {"rule": "self.min != 7", "fieldPath": ".min", "reason": "FieldValueForbidden", "message": "no sevens"}
        ],
        "properties": {
            "min": {"type": "integer"},
            "max": {"type": "integer"},
            "name": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "name is immutable"}
            ]}
        }
    }}})
}

#[test]
fn cel_rules_messages_and_transition() {
    let s = compile(cel_schema());
    let obj = json!({"spec": {"min": 5, "max": 3, "name": "a"}});
    assert_eq!(messages(&s.validate(&obj, None)), vec!["spec: Invalid value: \"object\": min must not exceed max"]);
    let obj = json!({"spec": {"min": -1, "max": 200}});
    assert_eq!(
        messages(&s.validate(&obj, None)),
        vec![
            "spec: Invalid value: \"object\": max is 200",
            "spec: Invalid value: \"object\": failed rule: self.min >= 0"
        ]
    );
    let obj = json!({"spec": {"min": 7, "max": 9}});
    let errs = s.validate(&obj, None);
    assert_eq!(messages(&errs), vec!["spec.min: Forbidden: no sevens"]);
    assert_eq!(errs[0].reason, FieldErrorReason::Forbidden);
    // transition rule: skipped on create, enforced on update
    let new = json!({"spec": {"min": 1, "max": 2, "name": "b"}});
    assert!(s.validate(&new, None).is_empty());
    let old = json!({"spec": {"min": 1, "max": 2, "name": "a"}});
    assert_eq!(
        messages(&s.validate(&new, Some(&old))),
        vec!["spec.name: Invalid value: \"string\": name is immutable"]
    );
    assert!(s.validate(&new, Some(&new)).is_empty());
}

#[test]
fn cel_skipped_on_blocking_errors() {
    let s = compile(cel_schema());
    let obj = json!({"spec": {"min": "x", "max": 3}});
    assert_eq!(
        messages(&s.validate(&obj, None)),
        vec![
            "spec.min: Invalid value: \"string\": spec.min in body must be of type integer: \"string\"",
            "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ]
    );
}

#[test]
fn cel_compile_error_rejected() {
    let bad = json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.a >"}]});
    let errs = CrdSchema::new(&bad).err().unwrap_or_default();
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].field, "openAPIV3Schema.x-kubernetes-validations[0].rule");
    assert!(errs[0].message.starts_with("Invalid value: \"self.a >\": compilation failed"), "{}", errs[0].message);
}

fn good_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "flighttickets.flights.example.com"},
        "spec": {
            "group": "flights.example.com",
            "scope": "Namespaced",
            "names": {"plural": "flighttickets", "singular": "flightticket", "kind": "FlightTicket",
                      "listKind": "FlightTicketList", "shortNames": ["ft"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": flight_ticket_schema()},
                "additionalPrinterColumns": [{"name": "From", "type": "string", "jsonPath": ".spec.from"}],
                "selectableFields": [{"jsonPath": ".spec.from"}],
                "subresources": {"status": {}}
            }]
        }
    })
}

#[test]
fn validate_good_crd() {
    assert!(validate_crd(&good_crd()).is_empty(), "{:?}", validate_crd(&good_crd()));
}

#[test]
fn validate_bad_crds() {
    let mut crd = good_crd();
    crd["spec"]["versions"][0]["storage"] = json!(false);
    let errs = validate_crd(&crd);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].field, "spec.versions");
    assert!(errs[0].message.ends_with("must have exactly one version marked as storage version"));

    let mut crd = good_crd();
    let mut v2 = crd["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    if let Some(a) = crd["spec"]["versions"].as_array_mut() {
        a.push(v2);
    }
    let errs = validate_crd(&crd);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].field, "spec.versions");

    let mut crd = good_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        .as_object_mut()
        .map(|m| m.remove("type"));
    assert_eq!(
        messages(&validate_crd(&crd)),
        vec![
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"
        ]
    );

    let mut crd = good_crd();
    crd["spec"]["group"] = json!("flights");
    crd["metadata"]["name"] = json!("flighttickets.flights");
    assert_eq!(
        messages(&validate_crd(&crd)),
        vec!["spec.group: Invalid value: \"flights\": should be a domain with at least one dot"]
    );

    let mut crd = good_crd();
    crd["metadata"]["name"] = json!("wrong.flights.example.com");
    crd["spec"]["scope"] = json!("Global");
    crd["spec"]["versions"][0]["name"] = json!("V1");
    crd["spec"]["versions"][0]["selectableFields"] = json!([{"jsonPath": ".spec.nope"}]);
    let got = messages(&validate_crd(&crd));
    assert!(
        got.contains(
            &"metadata.name: Invalid value: \"wrong.flights.example.com\": must be spec.names.plural+\".\"+spec.group"
                .to_string()
        ),
        "{got:?}"
    );
    assert!(
        got.contains(
            &"spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"".to_string()
        ),
        "{got:?}"
    );
    assert!(
        got.iter().any(|m| m.starts_with("spec.versions[0].name: Invalid value: \"V1\": a DNS-1035 label")),
        "{got:?}"
    );
    assert!(got.contains(&"spec.versions[0].selectableFields[0].jsonPath: Invalid value: \".spec.nope\": is an invalid path: does not refer to a valid field".to_string()), "{got:?}");

    let mut crd = good_crd();
    crd["spec"]["versions"][0]["schema"] = json!({});
    assert_eq!(
        messages(&validate_crd(&crd)),
        vec!["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"]
    );
}

#[test]
fn cel_root_rule_sees_metadata_and_list_map_correlation() {
    let s = compile(json!({"type": "object",
    "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('t')", "message": "bad name"}],
    "properties": {"spec": {"type": "object", "properties": {"ports": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {
            "name": {"type": "string"},
            "port": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "no decrease"}]}
        }}
    }}}}}));
    let new =
        json!({"metadata": {"name": "x"}, "spec": {"ports": [{"name": "b", "port": 1}, {"name": "a", "port": 5}]}});
    assert_eq!(messages(&s.validate(&new, None)), vec!["<nil>: Invalid value: \"object\": bad name"]);
    let new =
        json!({"metadata": {"name": "t"}, "spec": {"ports": [{"name": "b", "port": 1}, {"name": "a", "port": 5}]}});
    let old =
        json!({"metadata": {"name": "t"}, "spec": {"ports": [{"name": "a", "port": 6}, {"name": "c", "port": 9}]}});
    assert_eq!(
        messages(&s.validate(&new, Some(&old))),
        vec!["spec.ports[1].port: Invalid value: \"integer\": no decrease"]
    );
}

#[test]
fn cel_evaluation_error_is_reported() {
    let s = compile(json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [{"rule": "self.a == 1"}],
        "properties": {"a": {"type": "integer"}}}}}));
    let errs = s.validate(&json!({"spec": {}}), None);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].field, "spec");
    assert!(errs[0].message.ends_with("evaluating rule: self.a == 1"), "{}", errs[0].message);
}
