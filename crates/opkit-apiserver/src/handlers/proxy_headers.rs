//! The headers the API server's proxies (aggregated APIs, the kubelet's pod streams) do
//! not pass on: those that describe one connection (RFC 9110's hop-by-hop fields), and,
//! towards a backend, the caller's own credentials (the proxy authenticates itself).

use http::HeaderMap;

/// Fields that describe one connection, never forwarded (an upgrade is answered on its own).
const HOP_BY_HOP: &[&str] =
    &["connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"];

/// The caller's credentials and identity, which a backend gets from the proxy instead.
const CREDENTIALS: &[&str] = &["authorization", "host", "x-remote-user", "x-remote-group"];

/// Whether request header `name` is forwarded to a backend.
pub(super) fn forwards_request_header(name: &str) -> bool {
    !HOP_BY_HOP.contains(&name) && !CREDENTIALS.contains(&name)
}

/// Copies a backend's response headers to the client's answer, but for hop-by-hop ones
/// and the length (the proxy frames the body again).
pub(super) fn copy_response_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for (name, value) in from {
        if !HOP_BY_HOP.contains(&name.as_str()) && name != http::header::CONTENT_LENGTH {
            to.append(name, value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_fields_and_credentials_stay_behind() {
        assert!(forwards_request_header("accept"));
        assert!(!forwards_request_header("authorization"));
        assert!(!forwards_request_header("connection"));
        let mut from = HeaderMap::new();
        from.insert("content-type", http::HeaderValue::from_static("application/json"));
        from.insert("transfer-encoding", http::HeaderValue::from_static("chunked"));
        from.insert("content-length", http::HeaderValue::from_static("3"));
        let mut to = HeaderMap::new();
        copy_response_headers(&from, &mut to);
        assert_eq!(to.len(), 1);
        assert!(to.contains_key("content-type"));
    }
}
