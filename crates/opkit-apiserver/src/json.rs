//! Encoding values the server built itself as JSON. serde_json fails only on a map with
//! non-string keys or a `Serialize` impl that returns an error; `serde_json::Value` and
//! the server's own response types have neither, so a failure is a bug in the server,
//! never bad input, and it panics with that reason instead of sending an empty body.

use serde::Serialize;

/// `value` as JSON bytes.
pub(crate) fn to_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value)
        .expect("the server's own values always encode as JSON (string keys, infallible Serialize)")
}
