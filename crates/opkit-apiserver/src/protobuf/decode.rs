//! The schema-driven message decoder: walks the wire format of one message using the
//! [`Table`] and builds the JSON value kube-apiserver would produce,
//! including the special types (Time, Quantity, IntOrString, RawExtension, JSONSchemaProps
//! unions, ...).

use base64::Engine as _;
use serde_json::{Map, Value};

use super::ProtobufError;
use super::format::{GO_ZERO_TIME_UNIX, float_number, rfc3339};
use super::table::{Field, FieldType, Kind, Scalar, Special, Table, scalar_default};
use super::wire::{Reader, WireType};

/// Deepest message nesting accepted (guards the stack against hostile input).
pub(super) const MAX_DEPTH: usize = 200;

/// One decoded occurrence of a field.
enum Item {
    /// A value (one element, for repeated fields); `None` means "unset" (dropped).
    Value(Option<Value>),
    /// A map entry.
    Entry(String, Value),
}

/// Decodes one message to its JSON form; `None` when the value means "unset" (a zero Time,
/// an empty RawExtension).
pub(super) fn message(table: &Table, index: usize, bytes: &[u8], depth: usize) -> Result<Option<Value>, ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::TooDeep(MAX_DEPTH));
    }
    let msg = &table.messages[index];
    match msg.special {
        Special::None => object(table, index, bytes, depth).map(|o| Some(Value::Object(o))),
        special => special_value(table, index, special, bytes, depth),
    }
}

/// Decodes an ordinary message into an object keyed by JSON field names.
fn object(table: &Table, index: usize, bytes: &[u8], depth: usize) -> Result<Map<String, Value>, ProtobufError> {
    let mut out = Map::new();
    visit(table, index, bytes, depth, |field, item| {
        match item {
            Item::Entry(key, value) => {
                let slot = out.entry(field.json.clone()).or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = slot {
                    map.insert(key, value);
                }
            }
            Item::Value(value) if field.repeated => {
                let slot = out.entry(field.json.clone()).or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(items) = slot {
                    items.push(value.unwrap_or(Value::Null));
                }
            }
            Item::Value(Some(Value::Object(fields))) if field.inline => {
                for (k, v) in fields {
                    merge_into(&mut out, k, v);
                }
            }
            Item::Value(value) => match value {
                Some(v) if !is_unset(field, &v) => merge_into(&mut out, field.json.clone(), v),
                _ => {
                    out.remove(&field.json);
                }
            },
        }
        Ok(())
    })?;
    Ok(out)
}

/// Whether a singular field's value means "unset" in JSON: Go writes non-pointer empty
/// strings, which `omitempty` drops from JSON (and a few zero bools/numbers, see
/// [`Field::omit_zero`]).
fn is_unset(field: &Field, value: &Value) -> bool {
    match value {
        Value::String(s) => {
            s.is_empty() && matches!(field.ty, FieldType::Single(Kind::Scalar(Scalar::String | Scalar::Bytes)))
        }
        Value::Bool(false) => field.omit_zero,
        Value::Number(n) => field.omit_zero && n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// Sets `key`, merging objects when a singular message field occurs more than once (protobuf
/// merge semantics).
fn merge_into(out: &mut Map<String, Value>, key: String, value: Value) {
    match (out.get_mut(&key), value) {
        (Some(Value::Object(old)), Value::Object(new)) => {
            for (k, v) in new {
                merge_into(old, k, v);
            }
        }
        (_, value) => {
            out.insert(key, value);
        }
    }
}

/// Walks the fields of one message, calling `f` for every known field occurrence and
/// skipping unknown fields.
fn visit(
    table: &Table,
    index: usize,
    bytes: &[u8],
    depth: usize,
    mut f: impl FnMut(&Field, Item) -> Result<(), ProtobufError>,
) -> Result<(), ProtobufError> {
    let msg = &table.messages[index];
    let mut reader = Reader::new(bytes);
    while let Some((tag, wire)) = reader.key()? {
        let Some(field) = msg.field(tag) else {
            reader.skip(wire)?;
            continue;
        };
        let at = |e: ProtobufError| e.at(&field.json);
        match field.ty {
            FieldType::Map(key, value) => {
                expect_wire(field, wire, WireType::Len)?;
                let entry = reader.len_delimited()?;
                let (k, v) = map_entry(table, key, value, entry, depth).map_err(at)?;
                f(field, Item::Entry(k, v))?;
            }
            FieldType::Single(Kind::Message(child)) => {
                expect_wire(field, wire, WireType::Len)?;
                let payload = reader.len_delimited()?;
                let value = message(table, child, payload, depth + 1).map_err(at)?;
                f(field, Item::Value(value))?;
            }
            FieldType::Single(Kind::Scalar(s)) => {
                let natural = natural_wire(s);
                if field.repeated && wire == WireType::Len && natural != WireType::Len {
                    // A packed array of numbers.
                    let mut packed = Reader::new(reader.len_delimited()?);
                    while !packed.is_empty() {
                        let value = scalar(s, &mut packed).map_err(at)?;
                        f(field, Item::Value(Some(value)))?;
                    }
                } else {
                    expect_wire(field, wire, natural)?;
                    let value = scalar(s, &mut reader).map_err(at)?;
                    f(field, Item::Value(Some(value)))?;
                }
            }
        }
    }
    Ok(())
}

/// Fails unless the field arrived with the wire type its schema implies.
fn expect_wire(field: &Field, got: WireType, want: WireType) -> Result<(), ProtobufError> {
    if got == want {
        Ok(())
    } else {
        Err(ProtobufError::WireTypeMismatch { field: field.json.clone(), got: got.number(), want: want.number() })
    }
}

/// The wire type a scalar is encoded with.
fn natural_wire(s: Scalar) -> WireType {
    match s {
        Scalar::String | Scalar::Bytes => WireType::Len,
        Scalar::Double | Scalar::Fixed64 | Scalar::Sfixed64 => WireType::Fixed64,
        Scalar::Float | Scalar::Fixed32 | Scalar::Sfixed32 => WireType::Fixed32,
        _ => WireType::Varint,
    }
}

/// Reads one scalar (the wire type has been checked) as JSON.
fn scalar(s: Scalar, reader: &mut Reader<'_>) -> Result<Value, ProtobufError> {
    Ok(match s {
        Scalar::String => Value::String(String::from_utf8_lossy(reader.len_delimited()?).into_owned()),
        Scalar::Bytes => Value::String(base64::engine::general_purpose::STANDARD.encode(reader.len_delimited()?)),
        Scalar::Bool => Value::Bool(reader.varint()? != 0),
        Scalar::Int32 => Value::from(reader.varint()? as i32),
        Scalar::Int64 => Value::from(reader.varint()? as i64),
        Scalar::Uint32 => Value::from(reader.varint()? as u32),
        Scalar::Uint64 => Value::from(reader.varint()?),
        Scalar::Sint32 => {
            let v = reader.varint()? as u32;
            Value::from((v >> 1) as i32 ^ -((v & 1) as i32))
        }
        Scalar::Sint64 => {
            let v = reader.varint()?;
            Value::from((v >> 1) as i64 ^ -((v & 1) as i64))
        }
        Scalar::Fixed32 => Value::from(reader.fixed32()?),
        Scalar::Sfixed32 => Value::from(reader.fixed32()? as i32),
        Scalar::Fixed64 => Value::from(reader.fixed64()?),
        Scalar::Sfixed64 => Value::from(reader.fixed64()? as i64),
        Scalar::Double => {
            let v = f64::from_bits(reader.fixed64()?);
            float_number(v).ok_or(ProtobufError::NonFiniteNumber)?
        }
        Scalar::Float => {
            let v = f64::from(f32::from_bits(reader.fixed32()?));
            float_number(v).ok_or(ProtobufError::NonFiniteNumber)?
        }
    })
}

/// Decodes one map entry {key = 1, value = 2}; absent parts take their zero values.
fn map_entry(
    table: &Table,
    key_type: Scalar,
    value_kind: Kind,
    bytes: &[u8],
    depth: usize,
) -> Result<(String, Value), ProtobufError> {
    let mut key = None;
    let mut value = None;
    let mut reader = Reader::new(bytes);
    while let Some((tag, wire)) = reader.key()? {
        match (tag, value_kind) {
            (1, _) if wire == natural_wire(key_type) => {
                key = Some(match scalar(key_type, &mut reader)? {
                    Value::String(s) => s,
                    other => other.to_string(),
                });
            }
            (2, Kind::Scalar(s)) if wire == natural_wire(s) => {
                value = Some(scalar(s, &mut reader)?);
            }
            (2, Kind::Message(m)) if wire == WireType::Len => {
                let payload = reader.len_delimited()?;
                value = Some(message(table, m, payload, depth + 1)?.unwrap_or(Value::Null));
            }
            (1 | 2, _) => return Err(ProtobufError::BadMapEntry),
            _ => reader.skip(wire)?,
        }
    }
    let value = match (value, value_kind) {
        (Some(v), _) => v,
        (None, Kind::Scalar(s)) => scalar_default(s),
        (None, Kind::Message(m)) => message(table, m, &[], depth + 1)?.unwrap_or(Value::Null),
    };
    Ok((key.unwrap_or_default(), value))
}

/// Builds the JSON form of a special type.
fn special_value(
    table: &Table,
    index: usize,
    special: Special,
    bytes: &[u8],
    depth: usize,
) -> Result<Option<Value>, ProtobufError> {
    if special == Special::RawJson {
        return raw_json(bytes, depth);
    }
    // Collect values by field number; the last occurrence of a singular field wins.
    let mut single: Vec<(u32, Value)> = Vec::new();
    let mut list: Vec<Value> = Vec::new();
    visit(table, index, bytes, depth, |field, item| {
        if let Item::Value(Some(v)) = item {
            if field.repeated {
                list.push(v);
            } else {
                single.retain(|(t, _)| *t != field.tag);
                single.push((field.tag, v));
            }
        }
        Ok(())
    })?;
    let get = |tag: u32| single.iter().find(|(t, _)| *t == tag).map(|(_, v)| v);
    let int = |tag: u32| get(tag).and_then(Value::as_i64).unwrap_or(0);
    Ok(match special {
        Special::None => None,
        Special::Time | Special::MicroTime => {
            let (seconds, nanos) = (int(1), int(2));
            if (seconds == 0 || seconds == GO_ZERO_TIME_UNIX) && nanos == 0 {
                return Ok(None);
            }
            let text =
                rfc3339(seconds, nanos, special == Special::MicroTime).ok_or(ProtobufError::TimeOutOfRange(seconds))?;
            Some(Value::String(text))
        }
        Special::Duration => Some(Value::String(opkit_apimachinery::duration::format_nanos(int(1)))),
        Special::Quantity => get(1).filter(|v| v.as_str() != Some("")).cloned(),
        Special::IntOrString => match int(1) {
            1 => Some(get(3).cloned().unwrap_or(Value::String(String::new()))),
            _ => Some(Value::from(int(2))),
        },
        Special::RawJson => None,
        Special::StringArray => Some(Value::Array(list)),
        Special::SchemaOrArray => match (list.is_empty(), get(1)) {
            (false, _) => Some(Value::Array(list)),
            (true, schema) => schema.cloned(),
        },
        Special::SchemaOrBool => match get(2) {
            Some(schema) => Some(schema.clone()),
            None => Some(Value::Bool(get(1).and_then(Value::as_bool).unwrap_or(false))),
        },
        Special::SchemaOrStringArray => match (list.is_empty(), get(1)) {
            (false, _) => Some(Value::Array(list)),
            (true, schema) => schema.cloned(),
        },
    })
}

/// RawExtension, apiextensions JSON and FieldsV1: the raw bytes of field 1, embedded.
fn raw_json(bytes: &[u8], depth: usize) -> Result<Option<Value>, ProtobufError> {
    let mut raw: &[u8] = &[];
    let mut reader = Reader::new(bytes);
    while let Some((tag, wire)) = reader.key()? {
        if tag == 1 && wire == WireType::Len {
            raw = reader.len_delimited()?;
        } else {
            reader.skip(wire)?;
        }
    }
    if raw.is_empty() {
        return Ok(None);
    }
    embedded(raw, depth).map(Some)
}

/// Parses embedded raw bytes: JSON, or a nested object in the protobuf envelope.
fn embedded(raw: &[u8], depth: usize) -> Result<Value, ProtobufError> {
    if raw.starts_with(&super::MAGIC) {
        return super::decode_envelope(raw, depth + 1);
    }
    serde_json::from_slice(raw).map_err(|e| ProtobufError::InvalidEmbeddedJson(e.to_string()))
}
