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
mod format;
mod names;
mod table;
mod wire;

#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

use self::wire::{Reader, WireType};

/// The four bytes every Kubernetes protobuf body starts with.
pub(crate) const MAGIC: [u8; 4] = *b"k8s\0";

/// The only content type accepted inside the envelope (besides none).
const PROTOBUF_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Why a protobuf body could not be decoded. Byte offsets are relative to the message
/// being read.
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    /// The body lacks the "k8s\0" prefix.
    #[error("not a Kubernetes protobuf body: missing the \"k8s\\0\" magic prefix")]
    BadMagic,
    /// The input ended inside a varint.
    #[error("truncated varint at byte {offset}")]
    TruncatedVarint {
        /// Where the varint starts.
        offset: usize,
    },
    /// A varint ran past ten bytes.
    #[error("varint longer than 10 bytes at byte {offset}")]
    VarintTooLong {
        /// Where the varint starts.
        offset: usize,
    },
    /// A field key with field number 0 or out of range.
    #[error("invalid field number at byte {offset}")]
    InvalidFieldNumber {
        /// Where the key starts.
        offset: usize,
    },
    /// Groups (wire types 3 and 4) or wire types 6 and 7.
    #[error("unsupported wire type {wire_type} at byte {offset}")]
    UnsupportedWireType {
        /// The wire type found.
        wire_type: u8,
        /// Where the key starts.
        offset: usize,
    },
    /// A length or fixed-width value runs past the end of its message.
    #[error("truncated message: {needed} bytes needed at byte {offset}, {remaining} remain")]
    Truncated {
        /// Where the value starts.
        offset: usize,
        /// Bytes the value claims.
        needed: u64,
        /// Bytes left in the message.
        remaining: usize,
    },
    /// A known field arrived with a wire type that does not fit its declared type.
    #[error("field \"{field}\" has wire type {got}, expected {want}")]
    WireTypeMismatch {
        /// The field's JSON name.
        field: String,
        /// The wire type found.
        got: u8,
        /// The wire type of the declared type.
        want: u8,
    },
    /// A map entry whose key or value has the wrong wire type.
    #[error("malformed map entry")]
    BadMapEntry,
    /// A double or float that is NaN or infinite (JSON cannot carry it).
    #[error("number is NaN or infinite")]
    NonFiniteNumber,
    /// A Time outside the years Go's JSON encoder accepts.
    #[error("time {0}s since the epoch is outside the years 0-9999")]
    TimeOutOfRange(i64),
    /// RawExtension/JSON bytes that are not JSON.
    #[error("embedded JSON is invalid: {0}")]
    InvalidEmbeddedJson(String),
    /// Nesting beyond the decoder's limit.
    #[error("messages nested deeper than {0} levels")]
    TooDeep(usize),
    /// The envelope carries no kind.
    #[error("the protobuf envelope has no apiVersion/kind")]
    MissingTypeMeta,
    /// No message is known for the envelope's apiVersion and kind.
    #[error("unknown kind \"{api_version}/{kind}\"")]
    UnknownKind {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
    },
    /// The envelope says the object is compressed or otherwise encoded.
    #[error("unsupported content encoding \"{0}\" in the protobuf envelope")]
    UnsupportedContentEncoding(String),
    /// The envelope says the object is not protobuf.
    #[error("unsupported content type \"{0}\" in the protobuf envelope")]
    UnsupportedContentType(String),
    /// The built-in schema table could not be loaded (a build defect).
    #[error("protobuf schema table is corrupt: {0}")]
    Schema(String),
    /// An error inside a field: `path` is the JSON path of the field ("spec.template").
    #[error("{path}: {source}")]
    At {
        /// Dotted JSON field path.
        path: String,
        /// The underlying error.
        source: Box<ProtobufError>,
    },
}

impl ProtobufError {
    /// Places this error inside field `name`, extending an existing path.
    fn at(self, name: &str) -> ProtobufError {
        match self {
            ProtobufError::At { path, source } => ProtobufError::At { path: format!("{name}.{path}"), source },
            other => ProtobufError::At { path: name.to_string(), source: Box::new(other) },
        }
    }
}

/// Decodes a body in Kubernetes' protobuf envelope ("k8s\0" magic + runtime.Unknown{typeMeta{
/// apiVersion,kind}, raw, contentEncoding, contentType}) into the object's JSON form
/// (apiVersion and kind set, field names as in the JSON API).
pub fn decode_object(body: &[u8]) -> Result<Value, ProtobufError> {
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
