//! Reading the operator's reconcile counters: scraping its `/metrics` endpoint over plain
//! HTTP on loopback, and summing `controller_runtime_reconcile_total{controller="…"}`
//! by `result` (plus `controller_runtime_reconcile_errors_total`) from the Prometheus
//! text exposition.

use std::net::SocketAddr;

use bytes::Bytes;
use http::Method;
use serde::Serialize;

use crate::BenchError;
use crate::client::{Endpoint, call};

/// The counter with one series per controller and result.
pub const RECONCILE_TOTAL: &str = "controller_runtime_reconcile_total";
/// The counter of reconciles that returned an error, per controller.
pub const RECONCILE_ERRORS_TOTAL: &str = "controller_runtime_reconcile_errors_total";

/// One controller's reconcile counters, by result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ReconcileCounts {
    /// Every reconcile (the sum over results).
    pub total: u64,
    /// `result="success"`.
    pub success: u64,
    /// `result="error"`.
    pub error: u64,
    /// `result="requeue"`.
    pub requeue: u64,
    /// `result="requeue_after"`.
    pub requeue_after: u64,
    /// `controller_runtime_reconcile_errors_total`.
    pub errors_total: u64,
}

/// A sample's label pairs, in order.
type Labels = Vec<(String, String)>;

/// Splits `name{labels} value [timestamp]` into its parts; `None` for comments, blank
/// lines and malformed samples.
fn sample(line: &str) -> Option<(&str, Labels, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, labels, rest) = match line.find('{') {
        Some(open) => {
            let close = open + line[open..].find('}')?;
            (&line[..open], parse_labels(&line[open + 1..close])?, &line[close + 1..])
        }
        None => {
            let sp = line.find(char::is_whitespace)?;
            (&line[..sp], Vec::new(), &line[sp..])
        }
    };
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some((name, labels, value))
}

/// Parses `a="x",b="y\"z"` (the inside of the braces).
fn parse_labels(s: &str) -> Option<Labels> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let eq = rest.find('=')?;
        let key = rest[..eq].trim().to_string();
        let after = rest[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => return None,
                },
                '"' => {
                    end = Some(i);
                    break;
                }
                other => value.push(other),
            }
        }
        let end = end?;
        out.push((key, value));
        rest = after[end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    Some(out)
}

fn label<'a>(labels: &'a [(String, String)], key: &str) -> Option<&'a str> {
    labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Sums `controller`'s reconcile counters in a Prometheus text exposition.
pub fn reconcile_counts(text: &str, controller: &str) -> ReconcileCounts {
    let mut c = ReconcileCounts::default();
    for (name, labels, value) in text.lines().filter_map(sample) {
        if label(&labels, "controller") != Some(controller) || !value.is_finite() || value < 0.0 {
            continue;
        }
        let v = value as u64;
        if name == RECONCILE_TOTAL {
            c.total += v;
            match label(&labels, "result") {
                Some("success") => c.success += v,
                Some("error") => c.error += v,
                Some("requeue") => c.requeue += v,
                Some("requeue_after") => c.requeue_after += v,
                _ => {}
            }
        } else if name == RECONCILE_ERRORS_TOTAL {
            c.errors_total += v;
        }
    }
    c
}

/// Fetches `http://addr/metrics` (loopback only) and returns the body as text.
pub async fn scrape(addr: SocketAddr) -> Result<String, BenchError> {
    let ep = Endpoint::plain(addr)?;
    let body = call(&ep, Method::GET, "/metrics", Bytes::new()).await?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# HELP controller_runtime_reconcile_total Total number of reconciliations per controller.
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller=\"memcached\",result=\"success\"} 250
controller_runtime_reconcile_total{controller=\"memcached\",result=\"error\"} 3
controller_runtime_reconcile_total{controller=\"memcached\",result=\"requeue\"} 100
controller_runtime_reconcile_total{result=\"requeue_after\",controller=\"memcached\"} 2 1700000000000
controller_runtime_reconcile_total{controller=\"other\",result=\"success\"} 999
controller_runtime_reconcile_errors_total{controller=\"memcached\"} 3
controller_runtime_reconcile_time_seconds_bucket{controller=\"memcached\",le=\"0.005\"} 7
workqueue_depth{controller=\"memcached\",name=\"memcached\"} 0
";

    #[test]
    fn sums_one_controllers_results() {
        let c = reconcile_counts(TEXT, "memcached");
        assert_eq!(
            c,
            ReconcileCounts { total: 355, success: 250, error: 3, requeue: 100, requeue_after: 2, errors_total: 3 }
        );
        assert_eq!(reconcile_counts(TEXT, "other").total, 999);
        assert_eq!(reconcile_counts(TEXT, "missing"), ReconcileCounts::default());
    }

    #[test]
    fn parses_escaped_labels_and_rejects_garbage() {
        let labels = parse_labels(r#"a="x\"y", b="z\\w""#).expect("labels");
        assert_eq!(labels, vec![("a".into(), "x\"y".into()), ("b".into(), "z\\w".into())]);
        assert!(parse_labels(r#"a="unterminated"#).is_none());
        assert!(sample("metric{a=\"1\"} notanumber").is_none());
        assert!(sample("metric{a=\"1\" 5").is_none());
        assert_eq!(sample("up 1").map(|s| s.2), Some(1.0));
        assert!(sample("# comment").is_none());
    }
}
