//! CertificateSigningRequests (certificates.k8s.io/v1), as kube's
//! `pkg/registry/certificates/certificates/strategy.go` and
//! `pkg/apis/certificates/validation`: the requesting user is recorded in the spec at
//! creation, the spec never changes afterwards, the `Approved`/`Denied` conditions are
//! added only through the `approval` subresource and never removed, and a signer writes
//! the issued certificate through `status`, once.

use base64::Engine;
use serde_json::{Value, json};

use super::{Strategy, keep_stored_status, stored_with_new_status};
use crate::auth::user::{MASTERS, UserInfo};
use crate::authz::attributes::{Action, ResourceAttributes};
use crate::error::{ApiError, ApiResult};
use crate::registry::view::StoreView;
use crate::schema::FieldError;
use crate::selector::{FieldLabels, scalar_at};
use crate::table::{self, Printer};

/// The strategy of certificates.k8s.io certificatesigningrequests.
pub(super) struct CertificateSigningRequests;

/// The subresource through which requests are approved or denied.
const APPROVAL: &str = "approval";

/// kube's `certificates.KeyUsage` values.
const KEY_USAGES: [&str; 23] = [
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

/// The shortest `spec.expirationSeconds` kube accepts (10 minutes).
const MIN_EXPIRATION_SECONDS: i64 = 600;

/// The condition types only the approval subresource may add, and nothing may remove.
const APPROVAL_CONDITIONS: [&str; 2] = ["Approved", "Denied"];

/// The organizations (O) of the subject of `spec.request`, or kube's reason why it is
/// not a PEM certificate request.
fn parse_request(request: &Value) -> Result<Vec<String>, String> {
    const NOT_PEM: &str = "PEM block type must be CERTIFICATE REQUEST";
    let bytes = request
        .as_str()
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .ok_or_else(|| NOT_PEM.to_string())?;
    let text = String::from_utf8_lossy(&bytes);
    let (_, pem) = x509_parser::pem::parse_x509_pem(text.trim_start().as_bytes()).map_err(|_| NOT_PEM.to_string())?;
    if pem.label != "CERTIFICATE REQUEST" {
        return Err(NOT_PEM.into());
    }
    use x509_parser::prelude::FromDer;
    let (_, csr) = x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
        .map_err(|e| format!("asn1: {e}"))?;
    let subject = &csr.certification_request_info.subject;
    Ok(subject.iter_organization().filter_map(|o| o.as_str().ok()).map(String::from).collect())
}

/// The signer whose certificates authenticate to the API server.
const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";

/// kube's `ValidateSignerName`: `<fully qualified domain>/<path>`.
fn signer_name_errors(signer: &Value) -> Vec<FieldError> {
    const FIELD: &str = "spec.signerName";
    let Some(name) = signer.as_str().filter(|s| !s.is_empty()) else {
        return vec![FieldError::required(FIELD, "")];
    };
    let Some((domain, path)) = name.split_once('/') else {
        return vec![FieldError::invalid(
            FIELD,
            signer,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )];
    };
    let mut errs = Vec::new();
    if domain.split('.').count() < 2 || crate::registry::meta::validate_subdomain(FIELD, domain).is_some() {
        errs.push(FieldError::invalid(
            FIELD,
            signer,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    if path.is_empty() {
        errs.push(FieldError::invalid(FIELD, signer, "validating path: must be non-empty"));
    }
    errs
}

/// kube's `validateConditions`: known statuses, one condition per type, and a request
/// not both approved and denied.
fn condition_errors(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let conditions = obj["status"]["conditions"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in conditions.iter().enumerate() {
        let at = format!("status.conditions[{i}]");
        let kind = c["type"].as_str().unwrap_or_default();
        if kind.is_empty() {
            errs.push(FieldError::required(&format!("{at}.type"), ""));
        } else if seen.contains(&kind) {
            errs.push(FieldError::duplicate(&format!("{at}.type"), &c["type"]));
        } else {
            seen.push(kind);
        }
        let status = c["status"].as_str().unwrap_or_default();
        let allowed: &[&str] = if APPROVAL_CONDITIONS.contains(&kind) || kind == "Failed" {
            &["True"]
        } else {
            &["True", "False", "Unknown"]
        };
        if !allowed.contains(&status) {
            let supported: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
            errs.push(FieldError::not_supported(&format!("{at}.status"), &c["status"], &supported));
        }
    }
    if seen.contains(&"Approved") && seen.contains(&"Denied") {
        errs.push(FieldError::invalid(
            "status.conditions",
            &json!(["Approved", "Denied"]),
            "Approved and Denied conditions are mutually exclusive",
        ));
    }
    errs
}

/// The approval condition types of `obj`.
fn approval_conditions(obj: &Value) -> Vec<&str> {
    obj["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str())
        .filter(|t| APPROVAL_CONDITIONS.contains(t))
        .collect()
}

/// Approved/Denied conditions removed (always refused) or added (refused unless
/// `may_add`, i.e. outside the approval subresource).
fn approval_change_errors(new: &Value, old: &Value, may_add: bool) -> Vec<FieldError> {
    let (before, after) = (approval_conditions(old), approval_conditions(new));
    let mut errs = Vec::new();
    for t in before.iter().filter(|t| !after.contains(t)) {
        errs.push(FieldError::forbidden(
            "status.conditions",
            &format!("updates may not remove a condition of type {t:?}"),
        ));
    }
    if !may_add {
        for t in after.iter().filter(|t| !before.contains(t)) {
            errs.push(FieldError::forbidden(
                "status.conditions",
                &format!("updates may not add a condition of type {t:?}"),
            ));
        }
    }
    errs
}

/// kube's rules for `status.certificate`: PEM certificates, set only on an approved
/// request, and never changed once set.
fn certificate_errors(new: &Value, old: &Value) -> Vec<FieldError> {
    const FIELD: &str = "status.certificate";
    let cert = &new["status"]["certificate"];
    let previous = &old["status"]["certificate"];
    if cert.is_null() || cert == previous {
        return Vec::new();
    }
    if !previous.is_null() {
        return vec![FieldError::forbidden(FIELD, "updates may not modify existing certificate content")];
    }
    let approved = approval_conditions(new).contains(&"Approved");
    if !approved {
        return vec![FieldError::forbidden(
            FIELD,
            "updates may not set certificate content unless the Approved condition is present",
        )];
    }
    let pem = cert.as_str().and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok());
    let is_certificate = pem.is_some_and(|bytes| {
        x509_parser::pem::Pem::iter_from_buffer(&bytes).next().is_some_and(|p| {
            p.is_ok_and(|p| p.label == "CERTIFICATE" && x509_parser::parse_x509_certificate(&p.contents).is_ok())
        })
    });
    if !is_certificate {
        return vec![FieldError::invalid(
            FIELD,
            &json!("<certificate data>"),
            "must contain at least one CERTIFICATE PEM block",
        )];
    }
    Vec::new()
}

/// Whether `user` may `verb` (`approve` or `sign`) requests for `signer`: the signer's
/// name, or its domain's wildcard `<domain>/*`, as a `signers` resource name.
fn may(view: &StoreView<'_>, user: &UserInfo, verb: &str, signer: &str) -> bool {
    let mut names = vec![signer.to_string()];
    if let Some((domain, _)) = signer.split_once('/') {
        names.push(format!("{domain}/*"));
    }
    names.into_iter().any(|name| {
        let attributes = ResourceAttributes {
            group: "certificates.k8s.io".into(),
            version: "*".into(),
            resource: "signers".into(),
            name,
            ..Default::default()
        };
        view.authorize(user, &Action::resource(verb, attributes)).allowed
    })
}

/// kube's CertificateApproval and CertificateSigning admission plugins: adding an
/// Approved or Denied condition needs `approve`, setting the certificate `sign`, on the
/// request's signer.
fn check_signer_permission(view: &StoreView<'_>, new: &Value, old: &Value, user: &UserInfo) -> ApiResult<()> {
    let signer = new["spec"]["signerName"].as_str().unwrap_or_default();
    let (before, after) = (approval_conditions(old), approval_conditions(new));
    let approving = after.iter().any(|t| !before.contains(t));
    let signing =
        !new["status"]["certificate"].is_null() && new["status"]["certificate"] != old["status"]["certificate"];
    let refused = match () {
        () if approving && !may(view, user, "approve", signer) => "approve",
        () if signing && !may(view, user, "sign", signer) => "sign",
        () => return Ok(()),
    };
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    Err(ApiError::forbidden_object(
        "certificates.k8s.io",
        "certificatesigningrequests",
        name,
        &format!("user not permitted to {refused} requests with signerName {signer:?}"),
    ))
}

impl Strategy for CertificateSigningRequests {
    fn update_subresources(&self) -> &'static [&'static str] {
        &[APPROVAL]
    }

    /// kube's `csrStrategy.PrepareForUpdate`: neither the spec nor the status change
    /// through the main resource.
    fn prepare_for_update(&self, new: &mut Value, old: &Value, has_status: bool) {
        new["spec"] = old["spec"].clone();
        if has_status {
            keep_stored_status(new, old);
        }
    }

    /// kube's `csrStatusStrategy.PrepareForUpdate`: the spec stays.
    fn prepare_for_status_update(&self, body: &Value, old: &Value) -> Value {
        stored_with_new_status(body, old)
    }

    /// kube's `csrApprovalStrategy.PrepareForUpdate`: only the conditions change.
    fn prepare_for_subresource_update(&self, _sub: &str, body: &Value, old: &Value) -> Value {
        let mut n = old.clone();
        if !n["status"].is_object() {
            n["status"] = json!({});
        }
        n["status"]["conditions"] = body["status"]["conditions"].clone();
        if let (Some(mf), Some(m)) = (body["metadata"]["managedFields"].as_array(), n["metadata"].as_object_mut()) {
            m.insert("managedFields".into(), Value::Array(mf.clone()));
        }
        n
    }

    /// kube's `csrStrategy.PrepareForCreate` (the spec records who asked) and the
    /// CertificateSubjectRestriction admission plugin (no API server client certificate
    /// for `system:masters`) on create; the CertificateApproval and CertificateSigning
    /// plugins on updates.
    fn admit(&self, view: &StoreView<'_>, obj: &mut Value, old: Option<&Value>, user: &UserInfo) -> ApiResult<()> {
        if let Some(old) = old {
            return check_signer_permission(view, obj, old, user);
        }
        if obj["spec"]["signerName"] == KUBE_APISERVER_CLIENT
            && parse_request(&obj["spec"]["request"]).is_ok_and(|orgs| orgs.iter().any(|o| o == MASTERS))
        {
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            return Err(ApiError::forbidden_object(
                "certificates.k8s.io",
                "certificatesigningrequests",
                name,
                &format!("use of {KUBE_APISERVER_CLIENT} signer with {MASTERS} group is not allowed"),
            ));
        }
        if !obj["spec"].is_object() {
            obj["spec"] = json!({});
        }
        let spec = &mut obj["spec"];
        spec["username"] = json!(user.name);
        spec["uid"] = json!(user.uid);
        spec["groups"] = json!(user.groups);
        spec["extra"] = user.extra_json();
        for field in ["uid", "extra"] {
            let empty = spec[field].as_str().is_some_and(str::is_empty)
                || spec[field].as_object().is_some_and(|m| m.is_empty());
            if empty && let Some(s) = spec.as_object_mut() {
                s.remove(field);
            }
        }
        Ok(())
    }

    /// kube's `ValidateCertificateSigningRequestCreate` (the spec) and conditions.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let spec = &obj["spec"];
        let mut errs = Vec::new();
        if spec["request"].is_null() {
            errs.push(FieldError::required("spec.request", ""));
        } else if let Err(reason) = parse_request(&spec["request"]) {
            errs.push(FieldError::invalid("spec.request", &json!("<request data>"), &reason));
        }
        errs.extend(signer_name_errors(&spec["signerName"]));
        match spec["usages"].as_array() {
            None => errs.push(FieldError::required("spec.usages", "usages must be provided")),
            Some(list) if list.is_empty() => errs.push(FieldError::required("spec.usages", "usages must be provided")),
            Some(list) => {
                let supported: Vec<String> = KEY_USAGES.iter().map(|s| s.to_string()).collect();
                for (i, u) in list.iter().enumerate() {
                    let field = format!("spec.usages[{i}]");
                    if !u.as_str().is_some_and(|u| KEY_USAGES.contains(&u)) {
                        errs.push(FieldError::not_supported(&field, u, &supported));
                    } else if list[..i].contains(u) {
                        errs.push(FieldError::duplicate(&field, u));
                    }
                }
            }
        }
        if let Some(seconds) = spec["expirationSeconds"].as_i64()
            && seconds < MIN_EXPIRATION_SECONDS
        {
            errs.push(FieldError::invalid(
                "spec.expirationSeconds",
                &spec["expirationSeconds"],
                "may not specify a duration less than 600 seconds (10 minutes)",
            ));
        }
        errs.extend(condition_errors(obj));
        errs
    }

    /// kube's `ValidateCertificateSigningRequestStatusUpdate`.
    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = condition_errors(new);
        errs.extend(approval_change_errors(new, old, false));
        errs.extend(certificate_errors(new, old));
        errs
    }

    /// kube's `ValidateCertificateSigningRequestApprovalUpdate`.
    fn validate_subresource_update(&self, _sub: &str, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = condition_errors(new);
        errs.extend(approval_change_errors(new, old, true));
        errs
    }

    /// kube's `populateConditionTimestamps`: a new or changed condition gets the time
    /// of the write, an unchanged one keeps its times.
    fn before_commit(&self, obj: &mut Value, old: Option<&Value>, now: &str) -> ApiResult<Option<super::AfterCommit>> {
        let old_conditions: Vec<Value> =
            old.and_then(|o| o["status"]["conditions"].as_array().cloned()).unwrap_or_default();
        let Some(conditions) = obj["status"]["conditions"].as_array_mut() else { return Ok(None) };
        for c in conditions.iter_mut() {
            let previous = old_conditions.iter().find(|o| o["type"] == c["type"]);
            for field in ["lastUpdateTime", "lastTransitionTime"] {
                if !c[field].is_null() {
                    continue;
                }
                let kept = match previous {
                    Some(p) if field == "lastTransitionTime" && p["status"] == c["status"] => p[field].clone(),
                    Some(p) if field == "lastUpdateTime" && p == c => p[field].clone(),
                    _ => Value::Null,
                };
                c[field] = if kept.is_null() { json!(now) } else { kept };
            }
        }
        Ok(None)
    }

    fn field_labels(&self) -> FieldLabels {
        CSR_FIELD_LABELS
    }

    fn table(&self) -> Option<Printer> {
        Some(table::certificates::certificatesigningrequests())
    }
}

/// The field labels of CertificateSigningRequests.
const CSR_FIELD_LABELS: FieldLabels = FieldLabels {
    names: Some(&["metadata.name", "spec.signerName"]),
    value: |obj, field| (field == "spec.signerName").then(|| scalar_at(obj, field)),
    unsupported: None,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signer_names_are_domain_and_path() {
        assert!(signer_name_errors(&json!("kubernetes.io/kube-apiserver-client")).is_empty());
        assert!(signer_name_errors(&json!("example.com/a/b")).is_empty());
        assert_eq!(signer_name_errors(&Value::Null)[0].to_message(), "spec.signerName: Required value");
        assert_eq!(
            signer_name_errors(&json!("nodomain"))[0].to_message(),
            "spec.signerName: Invalid value: \"nodomain\": must be a fully qualified domain and path of the form 'example.com/signer-name'"
        );
        assert_eq!(signer_name_errors(&json!("localhost/x")).len(), 1);
    }

    #[test]
    fn approval_conditions_are_exclusive_and_permanent() {
        let approved = json!({"status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        let both = json!({"status": {"conditions": [{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]}});
        assert_eq!(condition_errors(&both).len(), 1);
        let none = json!({"status": {}});
        assert_eq!(
            approval_change_errors(&none, &approved, true)[0].to_message(),
            "status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""
        );
        assert!(approval_change_errors(&approved, &none, true).is_empty());
        assert_eq!(approval_change_errors(&approved, &none, false).len(), 1);
    }
}
