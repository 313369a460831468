//! Table printer for certificates.k8s.io certificate signing requests.

use serde_json::Value;

use super::Printer;
use super::human_duration;
use super::util::{age, age_col, arr, at, col, name, name_col, s, st};

/// The printer of certificates.k8s.io/certificatesigningrequests.
pub(crate) fn certificatesigningrequests() -> Printer {
    Printer::of((
        vec![
            name_col(),
            age_col(),
            col("SignerName", "string", "Only requests for this signer are signed by it."),
            col("Requestor", "string", "Name of the user who created the request."),
            col("RequestedDuration", "string", "The validity duration the requestor asked for."),
            col("Condition", "string", "The approval, failure and issuance of the request."),
        ],
        csr_row,
    ))
}

/// kube's `extractCSRStatus`: Denied, else Approved, else Pending; then Failed and Issued.
fn condition(o: &Value) -> String {
    let has = |t: &str| arr(o, "status.conditions").iter().any(|c| c["type"] == t);
    let mut out = String::from(if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    });
    if has("Failed") {
        out.push_str(",Failed");
    }
    if at(o, "status.certificate").and_then(Value::as_str).is_some_and(|c| !c.is_empty()) {
        out.push_str(",Issued");
    }
    out
}

fn csr_row(o: &Value, now: i64) -> Vec<Value> {
    let or_none = |v: &str| if v.is_empty() { "<none>".to_string() } else { v.to_string() };
    let duration = at(o, "spec.expirationSeconds").and_then(Value::as_i64).map_or("<none>".to_string(), human_duration);
    vec![
        name(o),
        age(o, now),
        st(or_none(s(o, "spec.signerName"))),
        st(or_none(s(o, "spec.username"))),
        st(duration),
        st(condition(o)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_print_as_kubectl_does() {
        let csr = json!({"metadata": {"name": "alice"}, "spec": {"signerName": "kubernetes.io/kube-apiserver-client",
            "username": "kubernetes-admin", "expirationSeconds": 86400},
            "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "LS0t"}});
        let row = csr_row(&csr, 0);
        assert_eq!(
            row[2..6].to_vec(),
            vec![
                json!("kubernetes.io/kube-apiserver-client"),
                json!("kubernetes-admin"),
                json!("24h"),
                json!("Approved,Issued")
            ]
        );
        assert_eq!(condition(&json!({})), "Pending");
    }
}
