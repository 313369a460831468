//! Malformed input to [`decode_object`]: every defect is an error, never a panic.

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::RawExtension;
use prost::Message;

use super::{envelope, go_meta};
use crate::protobuf::{ProtobufError, decode_object};
fn error_of(body: &[u8]) -> String {
    match decode_object(body) {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_envelopes_are_errors() {
    assert!(matches!(decode_object(b""), Err(ProtobufError::BadMagic)));
    assert!(matches!(decode_object(b"{}"), Err(ProtobufError::BadMagic)));
    assert!(error_of(b"k8x\0").contains("magic"));
    assert!(matches!(decode_object(b"k8s\0"), Err(ProtobufError::MissingTypeMeta)));
    assert_eq!(error_of(&envelope("v1", "Nope", vec![])), "unknown kind \"v1/Nope\"");
    assert!(matches!(
        decode_object(&envelope("nothing.example.com/v1", "DeleteOptions", vec![])),
        Err(ProtobufError::UnknownKind { .. })
    ));
    // Unknown { typeMeta = 1 {kind = 2 "Namespace"}, contentEncoding = 3 "gzip" }.
    let mut body = b"k8s\0\x0a\x0b\x12\x09Namespace\x1a\x04gzip".to_vec();
    assert!(error_of(&body).contains("gzip"));
    body.truncate(body.len() - 6);
    body.extend(b"\x22\x10application/json");
    assert!(error_of(&body).contains("application/json"));
    assert!(error_of(b"k8s\0\x0a\x80").contains("truncated varint"));
    assert!(error_of(b"k8s\0\x0a\x05ab").contains("truncated message"));
}

#[test]
fn malformed_objects_are_errors_with_paths() {
    // Namespace.metadata (1) = ObjectMeta with name (1) sent as a varint.
    let err = error_of(&envelope("v1", "Namespace", vec![0x0a, 0x02, 0x08, 0x01]));
    assert_eq!(err, "metadata: field \"name\" has wire type 0, expected 2");
    // ControllerRevision.data = RawExtension with invalid JSON.
    let rev = apps::ControllerRevision {
        metadata: None,
        data: Some(RawExtension { raw: Some(b"{nope".to_vec()) }),
        revision: None,
    };
    let err = error_of(&envelope("apps/v1", "ControllerRevision", rev.encode_to_vec()));
    assert!(err.starts_with("data: embedded JSON is invalid"), "{err}");
    // Job.metadata.creationTimestamp far beyond year 9999.
    let job = k8s_pb::api::batch::v1::Job {
        metadata: Some(meta::ObjectMeta {
            creation_timestamp: Some(meta::Time { seconds: Some(i64::MAX / 2), nanos: None }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let err = error_of(&envelope("batch/v1", "Job", job.encode_to_vec()));
    assert!(err.starts_with("metadata.creationTimestamp: time"), "{err}");
    // A NaN in a schema.
    let nan = apiext::JsonSchemaProps { maximum: Some(f64::NAN), ..Default::default() };
    let crd = apiext::CustomResourceDefinition {
        spec: Some(apiext::CustomResourceDefinitionSpec {
            versions: vec![apiext::CustomResourceDefinitionVersion {
                schema: Some(apiext::CustomResourceValidation { open_apiv3_schema: Some(nan) }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let body = envelope("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd.encode_to_vec());
    assert_eq!(error_of(&body), "spec.versions.schema.openAPIV3Schema.maximum: number is NaN or infinite");
}

#[test]
fn deep_nesting_is_refused_without_overflowing_the_stack() {
    // JSONSchemaProps.not (field 28) nested 5000 times.
    let mut inner: Vec<u8> = Vec::new();
    for _ in 0..5000 {
        let mut outer = vec![0xe2, 0x01]; // field 28, wire type 2
        let mut len = inner.len();
        while len >= 0x80 {
            outer.push((len as u8) | 0x80);
            len >>= 7;
        }
        outer.push(len as u8);
        outer.extend(&inner);
        inner = outer;
    }
    let body = envelope("apiextensions.k8s.io/v1", "JSONSchemaProps", inner);
    let err = error_of(&body);
    assert!(err.ends_with("messages nested deeper than 200 levels"), "{err}");
}

#[test]
fn truncated_and_corrupted_bodies_never_panic() {
    let cm = core::ConfigMap {
        metadata: go_meta("cfg", "default"),
        immutable: Some(true),
        data: [("k".to_string(), "v".to_string())].into(),
        binary_data: [("b".to_string(), vec![1, 2, 3])].into(),
    };
    let body = envelope("v1", "ConfigMap", cm.encode_to_vec());
    assert!(decode_object(&body).is_ok());
    // Every prefix that cuts into the object is an error (the envelope ends with the empty
    // contentEncoding and contentType, two bytes each).
    let raw_end = body.len() - 4;
    for end in raw_end - cm.encoded_len()..raw_end {
        assert!(decode_object(&body[..end]).is_err(), "prefix {end}");
    }
    // Deterministic pseudo-random corruption: decoding may fail, but must not panic.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..5000 {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let mut corrupt = body.clone();
        let at = 4 + (state >> 33) as usize % (corrupt.len() - 4);
        corrupt[at] = (state >> 20) as u8;
        let _ = decode_object(&corrupt);
    }
}
