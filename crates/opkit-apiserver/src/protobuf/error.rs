//! Why a protobuf body could not be decoded: the error of every step of the decoder,
//! from the envelope to the wire format.

/// Why a protobuf body could not be decoded. Byte offsets are relative to the message
/// being read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProtobufError {
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
    pub(super) fn at(self, name: &str) -> ProtobufError {
        match self {
            ProtobufError::At { path, source } => ProtobufError::At { path: format!("{name}.{path}"), source },
            other => ProtobufError::At { path: name.to_string(), source: Box::new(other) },
        }
    }
}
