//! The certificate signing controller (kube-controller-manager's `csrsigning`) for the
//! `kubernetes.io/kube-apiserver-client` signer: an approved CertificateSigningRequest
//! for that signer gets a client certificate from the cluster CA in
//! `status.certificate`, valid for its `spec.expirationSeconds` (at most the cluster
//! signing duration), so the requester can authenticate to the API server as the
//! request's subject (CN the user, O its groups). A request whose usages a client
//! certificate cannot have gets a `Failed` condition instead. Requests for other
//! signers are left alone, as with no signer configured for them.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use opkit::{Action, Context, Controller, Manager, ReconcileError, ReconcileResult};
use opkit_serve::tls::{DevCa, ExtendedKeyUsagePurpose, Grant, KeyUsagePurpose};

use crate::ControllersConfig;

/// The signer this controller signs for.
pub(crate) const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";

/// How far before now a certificate becomes valid, for clocks that lag (kube's backdate).
const BACKDATE: Duration = Duration::from_secs(5 * 60);

/// The CA and the longest validity it grants.
struct Signer {
    ca: DevCa,
    max_duration: Duration,
}

/// Registers the controller with `mgr` when it is enabled and the cluster CA's key is known.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    let Some(signing) = cfg.cluster_signing.as_ref().filter(|_| cfg.enabled("csrsigning")) else {
        return Ok(());
    };
    let ca = match DevCa::from_pem(&signing.ca_pem, &signing.ca_key_pem) {
        Ok(ca) => ca,
        Err(e) => {
            tracing::error!(error = %e, "the cluster CA cannot sign; certificate signing requests stay unsigned");
            return Ok(());
        }
    };
    Controller::new(mgr, reconcile)
        .client(crate::identity::client_for(mgr, cfg, "csrsigning"))
        .named("csrsigning")
        .with_state(Arc::new(Signer { ca, max_duration: signing.duration }))
        .build()
}

/// Whether the request has a condition of type `kind`.
fn has_condition(csr: &CertificateSigningRequest, kind: &str) -> bool {
    csr.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| cs.iter().any(|c| c.type_ == kind))
}

/// The key usages and extended key usages of a client certificate asked for in
/// `usages`, or why a client certificate cannot have them (kube's
/// `ValidateKubeAPIServerClientUsages`-style check of the signer).
fn client_usages(usages: &[String]) -> Result<(Vec<KeyUsagePurpose>, Vec<ExtendedKeyUsagePurpose>), String> {
    let (mut key, mut extended) = (Vec::new(), Vec::new());
    for usage in usages {
        match usage.as_str() {
            "digital signature" => key.push(KeyUsagePurpose::DigitalSignature),
            "key encipherment" => key.push(KeyUsagePurpose::KeyEncipherment),
            "client auth" => extended.push(ExtendedKeyUsagePurpose::ClientAuth),
            other => return Err(format!("invalid usage for client certificate: {other}")),
        }
    }
    if extended.is_empty() {
        return Err("missing required usage for client certificate: client auth".into());
    }
    Ok((key, extended))
}

/// The certificate for `csr` (PEM), or why the signer refuses it.
fn sign(signer: &Signer, csr: &CertificateSigningRequest) -> Result<String, String> {
    let (key_usages, extended_key_usages) = client_usages(csr.spec.usages.as_deref().unwrap_or_default())?;
    let request = String::from_utf8(csr.spec.request.0.clone()).map_err(|_| "the request is not PEM".to_string())?;
    let requested = csr.spec.expiration_seconds.and_then(|s| u64::try_from(s).ok()).map(Duration::from_secs);
    let ttl = requested.map_or(signer.max_duration, |r| r.min(signer.max_duration));
    let now = SystemTime::now();
    let grant = Grant { key_usages, extended_key_usages, not_before: now - BACKDATE, not_after: now + ttl };
    signer.ca.sign_request(&request, &grant).map_err(|e| format!("the request cannot be signed: {e}"))
}

async fn reconcile(ctx: Context<CertificateSigningRequest, Signer>) -> ReconcileResult {
    let Some(csr) = ctx.object.clone() else { return Ok(Action::done()) };
    let issued = csr.status.as_ref().and_then(|s| s.certificate.as_ref()).is_some_and(|c| !c.0.is_empty());
    if csr.spec.signer_name != KUBE_APISERVER_CLIENT
        || issued
        || !has_condition(&csr, "Approved")
        || has_condition(&csr, "Denied")
        || has_condition(&csr, "Failed")
    {
        return Ok(Action::done());
    }
    let mut updated = (*csr).clone();
    let status = updated.status.get_or_insert_default();
    match sign(&ctx.state, &csr) {
        Ok(pem) => status.certificate = Some(ByteString(pem.into_bytes())),
        Err(message) => status.conditions.get_or_insert_default().push(CertificateSigningRequestCondition {
            type_: "Failed".into(),
            status: "True".into(),
            reason: Some("SignerValidationFailure".into()),
            message: Some(message),
            last_update_time: Some(crate::common::now()),
            last_transition_time: Some(crate::common::now()),
        }),
    }
    let api: Api<CertificateSigningRequest> = ctx.api_for();
    match api.replace_status(&csr.name_any(), &PostParams::default(), &updated).await {
        Ok(_) => Ok(Action::done()),
        // Changed or gone meanwhile: the watch brings the new state.
        Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => Ok(Action::done()),
        Err(e) => Err(ReconcileError::retry(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_certificates_take_client_usages_only() {
        let ok = client_usages(&["digital signature".into(), "key encipherment".into(), "client auth".into()]);
        assert!(ok.is_ok_and(|(k, e)| k.len() == 2 && e == [ExtendedKeyUsagePurpose::ClientAuth]));
        assert_eq!(
            client_usages(&["server auth".into()]).unwrap_err(),
            "invalid usage for client certificate: server auth"
        );
        assert_eq!(
            client_usages(&["digital signature".into()]).unwrap_err(),
            "missing required usage for client certificate: client auth"
        );
    }
}
