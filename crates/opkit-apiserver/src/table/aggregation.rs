//! The Table printer of apiregistration.k8s.io APIServices (kube-aggregator's columns).

use serde_json::Value;

use super::Printer;
use super::util::{age, age_col, arr, col, name, name_col, s, st};

/// The printer of apiregistration.k8s.io/apiservices.
pub(crate) fn apiservices() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("Service", "string", "The reference to the service that hosts this API endpoint."),
            col("Available", "string", "Whether this service is available."),
            age_col(),
        ],
        apiservice_row,
    ))
}

/// `Local` or `namespace/name` of the backing Service.
fn service_of(o: &Value) -> String {
    match (s(o, "spec.service.namespace"), s(o, "spec.service.name")) {
        ("", "") => "Local".into(),
        (ns, n) => format!("{ns}/{n}"),
    }
}

/// `True`, or the status with its reason in brackets, as kube prints it.
fn available_of(o: &Value) -> String {
    let condition = arr(o, "status.conditions").iter().find(|c| c["type"] == "Available").cloned();
    match condition {
        None => "Unknown".into(),
        Some(c) if c["status"] == "True" => "True".into(),
        Some(c) => {
            format!("{} ({})", c["status"].as_str().unwrap_or("Unknown"), c["reason"].as_str().unwrap_or_default())
        }
    }
}

fn apiservice_row(o: &Value, now: i64) -> Vec<Value> {
    vec![name(o), st(service_of(o)), st(available_of(o)), age(o, now)]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn local_and_service_backed_rows() {
        let local = json!({"metadata": {"name": "v1.apps"}, "spec": {"service": null},
            "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}});
        assert_eq!((super::service_of(&local), super::available_of(&local)), ("Local".into(), "True".into()));
        let remote = json!({"metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]}});
        assert_eq!(super::service_of(&remote), "kube-system/metrics-server");
        assert_eq!(super::available_of(&remote), "False (MissingEndpoints)");
    }
}
