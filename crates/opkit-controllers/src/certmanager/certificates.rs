//! Certificates, as cert-manager's certificate controllers issue them: the key and
//! certificate the `spec` asks for (common name, DNS names, IP addresses, `isCA`,
//! `duration`), signed by the referenced Issuer or ClusterIssuer, written to the Secret
//! `spec.secretName` (`tls.crt`, `tls.key`, `ca.crt`, type `kubernetes.io/tls`, with
//! cert-manager's annotations), and the `Ready` condition, validity and revision in the
//! status. A certificate is issued again when what it asks for changes or its Secret
//! is deleted or edited away; it is not renewed before expiry.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::Scope;
use opkit::{Action, Context, Controller, Manager, ReconcileError, ReconcileResult, Request};
use opkit_serve::tls::{CertificateRequest, IssuedCert};
use serde_json::{Value, json};

use super::crds::{certificate_resource, cluster_issuer_resource, issuer_resource};
use super::issuers::{Readiness, Signer, ca_secret, key_pair, secret_namespace, set_ready, signer};
use super::{CERTIFICATE_NAME, GROUP};

/// cert-manager's default certificate duration: 2160h (90 days).
const DEFAULT_DURATION: Duration = Duration::from_secs(2160 * 3600);

/// What a Certificate asks for, read from its `spec`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wanted {
    secret_name: String,
    common_name: Option<String>,
    dns_names: Vec<String>,
    ip_addresses: Vec<String>,
    is_ca: bool,
    duration: Duration,
    issuer_name: String,
    issuer_kind: String,
    issuer_group: String,
}

impl Wanted {
    /// Reads a Certificate's `spec`; `Err` is why it cannot be issued.
    fn of(spec: &Value) -> Result<Wanted, String> {
        let strings = |v: &Value| -> Vec<String> {
            v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_string)).collect()
        };
        let secret_name = spec["secretName"].as_str().unwrap_or_default().to_string();
        if secret_name.is_empty() {
            return Err("spec.secretName is required".into());
        }
        let issuer = &spec["issuerRef"];
        let issuer_name = issuer["name"].as_str().unwrap_or_default().to_string();
        if issuer_name.is_empty() {
            return Err("spec.issuerRef.name is required".into());
        }
        let duration = match spec["duration"].as_str() {
            Some(d) => opkit_apimachinery::duration::parse(d).map_err(|e| format!("spec.duration: {e}"))?,
            None => DEFAULT_DURATION,
        };
        let wanted = Wanted {
            secret_name,
            common_name: spec["commonName"].as_str().map(str::to_string),
            dns_names: strings(&spec["dnsNames"]),
            ip_addresses: strings(&spec["ipAddresses"]),
            is_ca: spec["isCA"].as_bool().unwrap_or(false),
            duration,
            issuer_name,
            issuer_kind: issuer["kind"].as_str().filter(|k| !k.is_empty()).unwrap_or("Issuer").to_string(),
            issuer_group: issuer["group"].as_str().filter(|g| !g.is_empty()).unwrap_or(GROUP).to_string(),
        };
        if wanted.common_name.is_none() && wanted.dns_names.is_empty() && wanted.ip_addresses.is_empty() {
            return Err("at least one of commonName, dnsNames or ipAddresses must be set".into());
        }
        Ok(wanted)
    }

    /// The annotations cert-manager writes on the Secret, which also say what the
    /// certificate in it was issued for.
    fn annotations(&self, certificate: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (CERTIFICATE_NAME.to_string(), certificate.to_string()),
            ("cert-manager.io/issuer-name".to_string(), self.issuer_name.clone()),
            ("cert-manager.io/issuer-kind".to_string(), self.issuer_kind.clone()),
            ("cert-manager.io/issuer-group".to_string(), self.issuer_group.clone()),
            ("cert-manager.io/common-name".to_string(), self.common_name.clone().unwrap_or_default()),
            ("cert-manager.io/alt-names".to_string(), self.dns_names.join(",")),
            ("cert-manager.io/ip-sans".to_string(), self.ip_addresses.join(",")),
            ("cert-manager.io/uri-sans".to_string(), String::new()),
        ])
    }

    /// Whether `secret` holds a certificate issued for this request.
    fn satisfied_by(&self, certificate: &str, secret: &Secret) -> bool {
        let annotations = secret.metadata.annotations.clone().unwrap_or_default();
        let wanted = self.annotations(certificate);
        wanted.iter().all(|(k, v)| annotations.get(k) == Some(v)) && key_pair(secret).is_some()
    }
}

/// Registers the Certificate controller.
pub(super) fn register(mgr: &Manager, client: kube::Client) -> Result<(), opkit::BuildError> {
    let certificates = certificate_resource();
    let cache = mgr.cache().clone();
    let by_issuer = {
        let cache = cache.clone();
        let certificates = certificates.clone();
        move |issuer: &DynamicObject| -> Vec<Request> {
            let all = cache.dynamic_informer(&certificates, Scope::Namespaced).list();
            let kind = if issuer.metadata.namespace.is_some() { "Issuer" } else { "ClusterIssuer" };
            all.iter()
                .filter(|c| {
                    let r = &c.data["spec"]["issuerRef"];
                    r["name"].as_str() == issuer.metadata.name.as_deref()
                        && r["kind"].as_str().filter(|k| !k.is_empty()).unwrap_or("Issuer") == kind
                        && (kind == "ClusterIssuer" || c.metadata.namespace == issuer.metadata.namespace)
                })
                .map(|c| Request::new(c.metadata.name.clone().unwrap_or_default(), c.metadata.namespace.as_deref()))
                .collect()
        }
    };
    let by_cluster_issuer = by_issuer.clone();
    Controller::new_dynamic(mgr, certificates.clone(), Scope::Namespaced, reconcile)
        .client(client)
        .named("cert-manager-certificate")
        .watches::<Secret>(|secret| {
            let annotations = secret.metadata.annotations.as_ref();
            match annotations.and_then(|a| a.get(CERTIFICATE_NAME)) {
                Some(name) => vec![Request::new(name.clone(), secret.metadata.namespace.as_deref())],
                None => vec![],
            }
        })
        .watches_dynamic(&issuer_resource(), Scope::Namespaced, by_issuer)
        .watches_dynamic(&cluster_issuer_resource(), Scope::Cluster, by_cluster_issuer)
        .build()
}

/// Issues the certificate when its Secret does not hold what it asks for, and reports.
async fn reconcile(ctx: Context<DynamicObject>) -> ReconcileResult {
    let Some(certificate) = ctx.object.as_ref() else { return Ok(Action::done()) };
    let name = certificate.metadata.name.clone().unwrap_or_default();
    let namespace = certificate.metadata.namespace.clone().unwrap_or_default();
    let wanted = match Wanted::of(&certificate.data["spec"]) {
        Ok(w) => w,
        Err(message) => {
            let ready = Readiness { ready: false, reason: "InvalidSpec", message };
            return report(&ctx, certificate, &ready, None).await;
        }
    };
    let issuer = find_issuer(&ctx, &wanted, &namespace);
    let signer = match issuer {
        None => {
            let message = format!(
                "Referenced \"{}\" not found: {}.{GROUP} \"{}\" not found",
                wanted.issuer_kind,
                wanted.issuer_kind.to_lowercase(),
                wanted.issuer_name
            );
            return report(&ctx, certificate, &Readiness { ready: false, reason: "Pending", message }, None).await;
        }
        Some(issuer) => {
            let secret = ca_secret(&ctx.cache, &issuer);
            match signer(&issuer.data["spec"], &secret_namespace(&issuer), secret.as_deref()) {
                Ok(s) => s,
                Err(why) => {
                    let message = format!("Issuer \"{}\" is not ready: {}", wanted.issuer_name, why.message);
                    let ready = Readiness { ready: false, reason: "IssuerNotReady", message };
                    return report(&ctx, certificate, &ready, None).await;
                }
            }
        }
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let current = ctx.cache.get::<Secret>(&wanted.secret_name, Some(&namespace));
    if current.as_deref().is_some_and(|s| wanted.satisfied_by(&name, s)) {
        // Issued before: the validity in the status was written then.
        return report(&ctx, certificate, &up_to_date(), None).await;
    }
    let now = SystemTime::now();
    let request = CertificateRequest {
        common_name: wanted.common_name.clone(),
        hosts: wanted.dns_names.iter().chain(&wanted.ip_addresses).cloned().collect(),
        is_ca: wanted.is_ca,
        not_before: now,
        not_after: now + wanted.duration,
    };
    let issued = match &signer {
        Signer::SelfSigned => request.self_signed().map(|c| (c.cert_pem.clone(), c)),
        Signer::Ca(ca) => ca.issue_requested(&request).map(|c| (ca.cert_pem().to_string(), c)),
    };
    let (ca_pem, issued) = match issued {
        Ok(i) => i,
        Err(e) => {
            let ready = Readiness { ready: false, reason: "Failed", message: format!("issuing failed: {e}") };
            return report(&ctx, certificate, &ready, None).await;
        }
    };
    let secret = tls_secret(&name, &wanted, &issued, &ca_pem, current.as_deref());
    let written = match current {
        Some(_) => secrets.replace(&wanted.secret_name, &PostParams::default(), &secret).await,
        None => secrets.create(&PostParams::default(), &secret).await,
    };
    match written {
        Ok(_) => report(&ctx, certificate, &up_to_date(), Some((request.not_before, request.not_after))).await,
        // Changed or created meanwhile: the Secret's watch brings the next attempt.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Action::done()),
        Err(e) => Err(ReconcileError::retry(e)),
    }
}

/// The Issuer or ClusterIssuer `wanted` refers to, from the cache.
fn find_issuer(ctx: &Context<DynamicObject>, wanted: &Wanted, namespace: &str) -> Option<Arc<DynamicObject>> {
    if wanted.issuer_group != GROUP {
        return None;
    }
    let (resource, scope, ns) = match wanted.issuer_kind.as_str() {
        "ClusterIssuer" => (cluster_issuer_resource(), Scope::Cluster, None),
        _ => (issuer_resource(), Scope::Namespaced, Some(namespace.to_string())),
    };
    let informer = ctx.cache.dynamic_informer(&resource, scope);
    informer
        .list()
        .into_iter()
        .find(|i| i.metadata.name.as_deref() == Some(wanted.issuer_name.as_str()) && i.metadata.namespace == ns)
}

/// The `Ready` condition of an issued certificate.
fn up_to_date() -> Readiness {
    Readiness { ready: true, reason: "Ready", message: "Certificate is up to date and has not expired".into() }
}

/// The Secret holding an issued certificate (keeping the labels and other annotations of
/// the Secret it replaces).
fn tls_secret(
    certificate: &str,
    wanted: &Wanted,
    issued: &IssuedCert,
    ca_pem: &str,
    current: Option<&Secret>,
) -> Secret {
    let mut metadata = current
        .map(|s| s.metadata.clone())
        .unwrap_or_else(|| ObjectMeta { name: Some(wanted.secret_name.clone()), ..Default::default() });
    metadata.annotations.get_or_insert_default().extend(wanted.annotations(certificate));
    metadata.labels.get_or_insert_default().insert("controller.cert-manager.io/fao".into(), "true".into());
    metadata.managed_fields = None;
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    Secret {
        metadata,
        type_: Some("kubernetes.io/tls".into()),
        data: Some(BTreeMap::from([
            ("tls.crt".to_string(), bytes(&issued.cert_pem)),
            ("tls.key".to_string(), bytes(&issued.key_pem)),
            ("ca.crt".to_string(), bytes(ca_pem)),
        ])),
        ..Default::default()
    }
}

/// Writes the Certificate's status: the `Ready` condition and, once issued, its
/// validity, renewal time (two thirds through, as cert-manager computes it) and revision.
async fn report(
    ctx: &Context<DynamicObject>,
    certificate: &DynamicObject,
    ready: &Readiness,
    validity: Option<(SystemTime, SystemTime)>,
) -> ReconcileResult {
    let status = &certificate.data["status"];
    let conditions = set_ready(status["conditions"].as_array(), ready, certificate.metadata.generation);
    let mut patch = json!({"status": {"conditions": conditions}});
    if let Some((not_before, not_after)) = validity {
        let time = |t: SystemTime| {
            let ts = k8s_openapi::jiff::Timestamp::try_from(t).ok()?;
            serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts)).ok()
        };
        let renewal = not_before + not_after.duration_since(not_before).unwrap_or_default() * 2 / 3;
        let before = time(not_before);
        let changed = status["notBefore"] != before.clone().unwrap_or(Value::Null);
        let revision = status["revision"].as_i64().unwrap_or(0) + i64::from(changed);
        patch["status"]["notBefore"] = json!(before);
        patch["status"]["notAfter"] = json!(time(not_after));
        patch["status"]["renewalTime"] = json!(time(renewal));
        patch["status"]["revision"] = json!(revision.max(1));
    }
    let unchanged = patch["status"].as_object().is_some_and(|p| p.iter().all(|(k, v)| &status[k] == v));
    if unchanged {
        return Ok(Action::done());
    }
    let api = ctx.dynamic_api();
    let name = certificate.metadata.name.clone().unwrap_or_default();
    match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(Action::done()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::done()),
        Err(e) => Err(ReconcileError::retry(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Value {
        json!({
            "secretName": "webhook-server-cert",
            "dnsNames": ["webhook-service.system.svc", "webhook-service.system.svc.cluster.local"],
            "issuerRef": {"kind": "Issuer", "name": "selfsigned-issuer"},
        })
    }

    #[test]
    fn the_scaffolds_certificate_reads_with_cert_managers_defaults() {
        let wanted = Wanted::of(&spec()).expect("valid");
        assert_eq!(wanted.duration, DEFAULT_DURATION);
        assert_eq!(wanted.issuer_group, GROUP);
        assert!(!wanted.is_ca);
        let missing = Wanted::of(&json!({"issuerRef": {"name": "x"}, "dnsNames": ["a"]})).expect_err("no secret");
        assert!(missing.contains("secretName"), "{missing}");
        let bad =
            Wanted::of(&json!({"secretName": "s", "issuerRef": {"name": "x"}, "dnsNames": ["a"], "duration": "soon"}));
        assert!(bad.expect_err("bad duration").contains("spec.duration"));
    }

    #[test]
    fn a_secret_satisfies_the_request_it_was_issued_for_only() {
        let wanted = Wanted::of(&spec()).expect("valid");
        let issued = CertificateRequest {
            common_name: None,
            hosts: wanted.dns_names.clone(),
            is_ca: false,
            not_before: SystemTime::now(),
            not_after: SystemTime::now() + Duration::from_secs(3600),
        }
        .self_signed()
        .expect("issued");
        let secret = tls_secret("serving-cert", &wanted, &issued, &issued.cert_pem, None);
        assert!(wanted.satisfied_by("serving-cert", &secret));
        assert!(!wanted.satisfied_by("other-cert", &secret));
        let mut more = spec();
        more["dnsNames"] = json!(["elsewhere.svc"]);
        assert!(!Wanted::of(&more).expect("valid").satisfied_by("serving-cert", &secret));
    }
}
