//! Decoding request bodies sent as Kubernetes protobuf (`application/vnd.kubernetes.protobuf`)
//! into the JSON object kube-apiserver would have decoded. kubectl's typed clients
//! (`kubectl create namespace|configmap|secret|deployment|job|service|role ...`) send only this
//! format, while the server stores JSON.
//!
//! The body is the envelope "k8s\0" + `runtime.Unknown{typeMeta{apiVersion, kind}, raw,
//! contentEncoding, contentType}`; `raw` is the object's message. The schema of every built-in
//! message (field numbers, types) comes from `messages.txt`, generated from the k8s-pb crate by
//! `tools/protobuf/gen_messages.py`; JSON field names are recovered from the OpenAPI
//! definitions (see the `names` submodule).
//!
//! Why a hand-written wire decoder: prost decodes into generated Rust types, and no crate
//! turns Kubernetes' protobuf into Kubernetes' JSON form (k8s-pb has no serde support, and
//! Kubernetes' JSON differs from the protobuf JSON mapping: Time is RFC 3339, Quantity and
//! IntOrString are scalars, RawExtension is inline JSON, embedded Go structs are flattened,
//! empty strings are omitted). The wire format itself is small, so a table-driven decoder
//! producing `serde_json::Value` directly is simpler than converting through typed structs.

mod decode;
mod error;
mod format;
mod names;
mod table;
mod wire;

#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

pub(crate) use self::error::ProtobufError;
use self::wire::{Reader, WireType};

/// The four bytes every Kubernetes protobuf body starts with.
pub(crate) const MAGIC: [u8; 4] = *b"k8s\0";

/// The only content type accepted inside the envelope (besides none).
const PROTOBUF_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Decodes a body in Kubernetes' protobuf envelope ("k8s\0" magic + runtime.Unknown{typeMeta{
/// apiVersion,kind}, raw, contentEncoding, contentType}) into the object's JSON form
/// (apiVersion and kind set, field names as in the JSON API).
pub(crate) fn decode_object(body: &[u8]) -> Result<Value, ProtobufError> {
    decode_envelope(body, 0)
}

/// The envelope's parts.
#[derive(Default)]
struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
    content_type: String,
}

/// Decodes an envelope found at nesting `depth` (0 for a request body).
fn decode_envelope(body: &[u8], depth: usize) -> Result<Value, ProtobufError> {
    let payload = body.strip_prefix(&MAGIC).ok_or(ProtobufError::BadMagic)?;
    let env = parse_envelope(payload)?;
    if !env.content_encoding.is_empty() {
        return Err(ProtobufError::UnsupportedContentEncoding(env.content_encoding));
    }
    if !env.content_type.is_empty() && env.content_type != PROTOBUF_CONTENT_TYPE {
        return Err(ProtobufError::UnsupportedContentType(env.content_type));
    }
    if env.kind.is_empty() {
        return Err(ProtobufError::MissingTypeMeta);
    }
    let table = table::table().map_err(ProtobufError::Schema)?;
    let index = table
        .kind(&env.api_version, &env.kind)
        .ok_or_else(|| ProtobufError::UnknownKind { api_version: env.api_version.clone(), kind: env.kind.clone() })?;
    let decoded = decode::message(table, index, env.raw, depth)?;
    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::String(env.api_version));
    out.insert("kind".into(), Value::String(env.kind));
    if let Some(Value::Object(fields)) = decoded {
        for (k, v) in fields {
            if k != "apiVersion" && k != "kind" {
                out.insert(k, v);
            }
        }
    }
    Ok(Value::Object(out))
}

/// Reads runtime.Unknown: typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2,
/// contentEncoding = 3, contentType = 4.
fn parse_envelope(payload: &[u8]) -> Result<Envelope<'_>, ProtobufError> {
    let mut env = Envelope::default();
    let mut reader = Reader::new(payload);
    while let Some((tag, wire)) = reader.key()? {
        match (tag, wire) {
            (1, WireType::Len) => {
                let mut meta = Reader::new(reader.len_delimited()?);
                while let Some((tag, wire)) = meta.key()? {
                    match (tag, wire) {
                        (1, WireType::Len) => env.api_version = text(meta.len_delimited()?),
                        (2, WireType::Len) => env.kind = text(meta.len_delimited()?),
                        _ => meta.skip(wire)?,
                    }
                }
            }
            (2, WireType::Len) => env.raw = reader.len_delimited()?,
            (3, WireType::Len) => env.content_encoding = text(reader.len_delimited()?),
            (4, WireType::Len) => env.content_type = text(reader.len_delimited()?),
            _ => reader.skip(wire)?,
        }
    }
    Ok(env)
}

/// A protobuf string (Go does not validate UTF-8; invalid bytes become U+FFFD like Go's JSON).
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
