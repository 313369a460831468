//! Encoding values the server built itself as JSON. serde_json fails only on a map with
//! non-string keys or a `Serialize` impl that returns an error; `serde_json::Value` and
//! the server's own response types have neither, so a failure is a bug in the server,
//! never bad input, and it panics with that reason instead of sending an empty body.
//! Also the names Go's JSON decoder gives JSON types in its errors.

use serde::Serialize;

/// `value` as JSON bytes.
pub(crate) fn to_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value)
        .expect("the server's own values always encode as JSON (string keys, infallible Serialize)")
}

/// The length of `value` encoded as JSON, counted without keeping the bytes.
pub(crate) fn encoded_len(value: &serde_json::Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, value)
        .expect("a serde_json::Value always encodes as JSON (string keys, infallible Serialize)");
    counter.0
}

/// The name Go's JSON decoder gives the type of `v` in its errors ("cannot unmarshal
/// array into ...").
pub(crate) fn go_json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
