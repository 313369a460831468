//! Kubernetes name rules (apimachinery's `validation.IsDNS1123Label`), shared by the API
//! server's object-name checks, the CLI's project checks and the runtime's sharding
//! config.

/// A DNS-1123 label: 1–63 lower-case alphanumerics and `-`, starting and ending
/// alphanumeric.
///
/// ```
/// use opkit_apimachinery::names::is_dns1123_label;
/// assert!(is_dns1123_label("shard-1"));
/// assert!(!is_dns1123_label("Shard_1") && !is_dns1123_label("-a") && !is_dns1123_label(""));
/// ```
pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}
