//! [`decode_object`] on the special types: JSONSchemaProps, MicroTime, Duration,
//! RawExtension, FieldsV1, ExtraValue, meta kinds in any group, packed numbers.

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::authentication::v1 as authn;
use k8s_pb::api::autoscaling::v1 as autoscaling;
use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::RawExtension;
use k8s_pb::kube_aggregator::pkg::apis::apiregistration::v1 as apireg;
use k8s_pb::metrics::pkg::apis::metrics::v1beta1 as metrics;
use prost::Message;
use serde_json::json;

use super::{envelope, go_meta, roundtrip, s};
use crate::protobuf::decode_object;

fn schema(ty: &str) -> apiext::JsonSchemaProps {
    apiext::JsonSchemaProps {
        r#type: s(ty),
        // Go always writes these non-pointer bools.
        exclusive_maximum: Some(false),
        exclusive_minimum: Some(false),
        unique_items: Some(false),
        nullable: Some(false),
        x_kubernetes_embedded_resource: Some(false),
        x_kubernetes_int_or_string: Some(false),
        ..Default::default()
    }
}

#[test]
fn crd_schema_props() {
    let mut spec = schema("object");
    spec.properties.insert(
        "replicas".into(),
        apiext::JsonSchemaProps {
            maximum: Some(10.0),
            minimum: Some(0.5),
            default: Some(apiext::Json { raw: Some(b"1".to_vec()) }),
            ..schema("integer")
        },
    );
    spec.properties.insert(
        "mode".into(),
        apiext::JsonSchemaProps {
            r#enum: vec![apiext::Json { raw: Some(b"\"a\"".to_vec()) }, apiext::Json { raw: Some(b"\"b\"".to_vec()) }],
            ..schema("string")
        },
    );
    spec.properties.insert(
        "tags".into(),
        apiext::JsonSchemaProps {
            items: Some(Box::new(apiext::JsonSchemaPropsOrArray {
                schema: Some(Box::new(schema("string"))),
                j_son_schemas: vec![],
            })),
            x_kubernetes_list_type: s("set"),
            ..schema("array")
        },
    );
    spec.properties.insert(
        "extra".into(),
        apiext::JsonSchemaProps {
            additional_properties: Some(Box::new(apiext::JsonSchemaPropsOrBool { allows: Some(true), schema: None })),
            x_kubernetes_preserve_unknown_fields: Some(true),
            ..schema("object")
        },
    );
    let mut root = schema("object");
    root.properties.insert("spec".into(), spec);
    let crd = apiext::CustomResourceDefinition {
        metadata: go_meta("widgets.example.com", ""),
        spec: Some(apiext::CustomResourceDefinitionSpec {
            group: s("example.com"),
            names: Some(apiext::CustomResourceDefinitionNames {
                plural: s("widgets"),
                kind: s("Widget"),
                ..Default::default()
            }),
            scope: s("Namespaced"),
            versions: vec![apiext::CustomResourceDefinitionVersion {
                name: s("v1"),
                served: Some(true),
                storage: Some(true),
                schema: Some(apiext::CustomResourceValidation { open_apiv3_schema: Some(root) }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    let value = roundtrip(&crd);
    assert_eq!(
        value["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "extra": {
                    "type": "object",
                    "additionalProperties": true,
                    "x-kubernetes-preserve-unknown-fields": true
                },
                "mode": {"type": "string", "enum": ["a", "b"]},
                "replicas": {"type": "integer", "default": 1, "maximum": 10, "minimum": 0.5},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}
            }}}
        })
    );
    assert_eq!(value["spec"]["names"], json!({"plural": "widgets", "kind": "Widget"}));
}

#[test]
fn lease_micro_time() {
    let lease = coordination::Lease {
        metadata: go_meta("leader", "kube-system"),
        spec: Some(coordination::LeaseSpec {
            holder_identity: s("me"),
            lease_duration_seconds: Some(15),
            renew_time: Some(meta::MicroTime { seconds: Some(1_767_323_045), nanos: Some(123_456_789) }),
            ..Default::default()
        }),
    };
    assert_eq!(
        roundtrip(&lease)["spec"],
        json!({"holderIdentity": "me", "leaseDurationSeconds": 15,
               "renewTime": "2026-01-02T03:04:05.123456Z"})
    );
}

#[test]
fn metrics_duration_and_quantities() {
    let node = metrics::NodeMetrics {
        metadata: go_meta("n1", ""),
        timestamp: Some(meta::Time { seconds: Some(0), nanos: Some(0) }),
        window: Some(meta::Duration { duration: Some(90_000_000_000) }),
        usage: [("cpu".to_string(), k8s_pb::apimachinery::pkg::api::resource::Quantity { string: s("100m") })].into(),
    };
    let body = envelope("metrics.k8s.io/v1beta1", "NodeMetrics", node.encode_to_vec());
    let value = decode_object(&body).unwrap();
    assert_eq!(value["window"], json!("1m30s"));
    assert_eq!(value["usage"], json!({"cpu": "100m"}));
    assert!(value.get("timestamp").is_none(), "a zero Time is unset");
}

#[test]
fn raw_extension_json_and_nested_protobuf_and_fields_v1() {
    let nested = envelope(
        "v1",
        "ConfigMap",
        core::ConfigMap { metadata: go_meta("inner", ""), ..Default::default() }.encode_to_vec(),
    );
    let mut metadata = go_meta("rev", "default").unwrap_or_default();
    metadata.managed_fields = vec![meta::ManagedFieldsEntry {
        manager: s("kubectl-create"),
        operation: s("Update"),
        api_version: s("apps/v1"),
        time: Some(meta::Time { seconds: Some(1_767_323_045), nanos: None }),
        fields_type: s("FieldsV1"),
        fields_v1: Some(meta::FieldsV1 { raw: Some(br#"{"f:data":{}}"#.to_vec()) }),
        subresource: s(""),
    }];
    let rev = apps::ControllerRevision {
        metadata: Some(metadata),
        data: Some(RawExtension { raw: Some(br#"{"spec":{"x":[1,2]}}"#.to_vec()) }),
        revision: Some(2),
    };
    let value = roundtrip(&rev);
    assert_eq!(value["data"], json!({"spec": {"x": [1, 2]}}));
    assert_eq!(value["revision"], json!(2));
    assert_eq!(
        value["metadata"]["managedFields"],
        json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "apps/v1",
                "time": "2026-01-02T03:04:05Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {}}}])
    );

    let rev = apps::ControllerRevision {
        metadata: go_meta("rev", "default"),
        data: Some(RawExtension { raw: Some(nested) }),
        revision: Some(1),
    };
    assert_eq!(
        roundtrip(&rev)["data"],
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inner"}})
    );
}

#[test]
fn extra_values_are_arrays() {
    let review = authn::TokenReview {
        metadata: go_meta("", ""),
        spec: Some(authn::TokenReviewSpec { token: s("abc"), audiences: vec![] }),
        status: Some(authn::TokenReviewStatus {
            authenticated: Some(true),
            user: Some(authn::UserInfo {
                username: s("alice"),
                uid: s(""),
                groups: vec!["dev".into()],
                extra: [("scopes".to_string(), authn::ExtraValue { items: vec!["a".into(), "b".into()] })].into(),
            }),
            ..Default::default()
        }),
    };
    assert_eq!(
        roundtrip(&review)["status"],
        json!({"authenticated": true, "user": {"username": "alice", "groups": ["dev"],
               "extra": {"scopes": ["a", "b"]}}})
    );
}

#[test]
fn kinds_found_case_insensitively_and_meta_kinds_in_any_group() {
    let service = apireg::APIService {
        metadata: go_meta("v1.example.com", ""),
        spec: Some(apireg::APIServiceSpec {
            insecure_skip_tls_verify: Some(true),
            group_priority_minimum: Some(100),
            ..Default::default()
        }),
        status: None,
    };
    let body = envelope("apiregistration.k8s.io/v1", "APIService", service.encode_to_vec());
    let value = decode_object(&body).unwrap();
    assert_eq!(value["kind"], json!("APIService"));
    assert_eq!(value["spec"], json!({"insecureSkipTLSVerify": true, "groupPriorityMinimum": 100}));

    let hpa = autoscaling::HorizontalPodAutoscaler {
        metadata: go_meta("web", "default"),
        spec: Some(autoscaling::HorizontalPodAutoscalerSpec {
            max_replicas: Some(5),
            target_cpu_utilization_percentage: Some(80),
            ..Default::default()
        }),
        status: None,
    };
    assert_eq!(roundtrip(&hpa)["spec"], json!({"maxReplicas": 5, "targetCPUUtilizationPercentage": 80}));

    let options = meta::DeleteOptions {
        grace_period_seconds: Some(0),
        propagation_policy: s("Foreground"),
        dry_run: vec!["All".into()],
        ..Default::default()
    };
    for api_version in ["v1", "apps/v1", "meta.k8s.io/v1"] {
        let body = envelope(api_version, "DeleteOptions", options.encode_to_vec());
        assert_eq!(
            decode_object(&body).unwrap(),
            json!({"apiVersion": api_version, "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                   "propagationPolicy": "Foreground", "dryRun": ["All"]})
        );
    }
}

#[test]
fn packed_repeated_numbers() {
    // PodSecurityContext.supplementalGroups (field 4) packed: [1000, 1].
    let security = [0x22, 0x03, 0xe8, 0x07, 0x01];
    let mut spec = vec![0x72, security.len() as u8]; // PodSpec.securityContext = 14
    spec.extend(security);
    let mut pod = vec![0x12, spec.len() as u8]; // Pod.spec = 2
    pod.extend(spec);
    let value = decode_object(&envelope("v1", "Pod", pod)).unwrap();
    assert_eq!(value["spec"]["securityContext"]["supplementalGroups"], json!([1000, 1]));
}
