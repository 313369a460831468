//! Tests of [`decode_object`]: typed k8s-pb values encoded with prost, wrapped in the
//! envelope as client-go does, decoded and compared with the JSON; and malformed input.
//! This module holds the shared helpers.

mod kubectl_objects;
mod malformed_input;
mod special_types;

use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;
use serde_json::Value;

use super::decode_object;

/// Wraps an encoded object in the "k8s\0" + runtime.Unknown envelope, as client-go does
/// (empty contentEncoding/contentType written explicitly).
pub(super) fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta { api_version: Some(api_version.to_string()), kind: Some(kind.to_string()) }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.encode_to_vec());
    body
}

/// Encodes a typed object and decodes it again.
pub(super) fn roundtrip<M: Message + k8s_pb::Resource>(object: &M) -> Value {
    let body = envelope(M::API_VERSION, M::KIND, object.encode_to_vec());
    decode_object(&body).expect("decodes")
}

pub(super) fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

/// ObjectMeta as Go's marshaller writes it for a new object: every non-pointer string
/// (empty), generation 0 and an empty creationTimestamp.
pub(super) fn go_meta(name: &str, namespace: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: s(name),
        generate_name: s(""),
        namespace: s(namespace),
        self_link: s(""),
        uid: s(""),
        resource_version: s(""),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        ..Default::default()
    })
}
