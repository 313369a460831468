//! Issuer and ClusterIssuer readiness, as cert-manager reports it: a `selfSigned`
//! issuer is ready at once; a `ca` issuer is ready when its Secret holds a CA
//! certificate and key that sign; every other issuer type is not ready, and says the
//! local stand-in does not implement it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::discovery::Scope;
use opkit::{Action, Context, Controller, Manager, ReconcileError, ReconcileResult, Request};
use opkit_serve::tls::DevCa;
use serde_json::{Value, json};

use super::CLUSTER_RESOURCE_NAMESPACE;
use super::crds::{cluster_issuer_resource, issuer_resource};

/// Whether an issuer can issue, and why (a `Ready` condition's status, reason, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Readiness {
    /// Whether it is ready.
    pub ready: bool,
    /// The condition's reason.
    pub reason: &'static str,
    /// The condition's message.
    pub message: String,
}

/// How an issuer signs.
pub(super) enum Signer {
    /// Each certificate signs itself.
    SelfSigned,
    /// A CA kept in a Secret signs.
    Ca(Box<DevCa>),
}

/// The tls.crt and tls.key of a Secret, as PEM strings.
pub(super) fn key_pair(secret: &Secret) -> Option<(String, String)> {
    let data = secret.data.as_ref()?;
    let cert = String::from_utf8(data.get("tls.crt")?.0.clone()).ok()?;
    let key = String::from_utf8(data.get("tls.key")?.0.clone()).ok()?;
    Some((cert, key))
}

/// The signer of an issuer whose `spec` is given (`namespace` is where a `ca` issuer's
/// Secret lives), or why it cannot sign.
pub(super) fn signer(spec: &Value, namespace: &str, secret: Option<&Secret>) -> Result<Signer, Readiness> {
    if spec.get("selfSigned").is_some() {
        return Ok(Signer::SelfSigned);
    }
    if let Some(ca) = spec.get("ca") {
        let name = ca["secretName"].as_str().unwrap_or_default();
        let not_ready = |message: String| Readiness { ready: false, reason: "ErrGetKeyPair", message };
        let Some(secret) = secret else {
            return Err(not_ready(format!(
                "Error getting keypair for CA issuer: secrets \"{name}\" not found (in namespace {namespace})"
            )));
        };
        let Some((cert, key)) = key_pair(secret) else {
            return Err(not_ready(format!(
                "Error getting keypair for CA issuer: secret \"{name}\" has no tls.crt and tls.key"
            )));
        };
        return DevCa::from_pem(&cert, &key).map(|ca| Signer::Ca(Box::new(ca))).map_err(|e| Readiness {
            ready: false,
            reason: "ErrInvalidKeyPair",
            message: format!("Error getting keypair for CA issuer: {e}"),
        });
    }
    Err(Readiness {
        ready: false,
        reason: "IssuerNotSupported",
        message: "the local cluster's cert-manager stand-in implements selfSigned and ca issuers only".into(),
    })
}

/// The readiness an issuer reports.
fn readiness(result: &Result<Signer, Readiness>) -> Readiness {
    match result {
        Ok(Signer::SelfSigned) => Readiness { ready: true, reason: "IsReady", message: String::new() },
        Ok(Signer::Ca(_)) => {
            Readiness { ready: true, reason: "KeyPairVerified", message: "Signing CA verified".into() }
        }
        Err(r) => r.clone(),
    }
}

/// The namespace a `ca` issuer's Secret is read from: its own, or cert-manager's for a
/// ClusterIssuer.
pub(super) fn secret_namespace(issuer: &DynamicObject) -> String {
    issuer.metadata.namespace.clone().unwrap_or_else(|| CLUSTER_RESOURCE_NAMESPACE.to_string())
}

/// The Secret a `ca` issuer names, from the cache.
pub(super) fn ca_secret(cache: &opkit::Cache, issuer: &DynamicObject) -> Option<Arc<Secret>> {
    let name = issuer.data["spec"]["ca"]["secretName"].as_str()?;
    cache.get::<Secret>(name, Some(&secret_namespace(issuer)))
}

/// Registers the Issuer and ClusterIssuer controllers.
pub(super) fn register(mgr: &Manager, client: kube::Client) -> Result<(), opkit::BuildError> {
    for (resource, scope) in [(issuer_resource(), Scope::Namespaced), (cluster_issuer_resource(), Scope::Cluster)] {
        let secrets_of = resource.clone();
        let cache = mgr.cache().clone();
        let issuers_scope = scope.clone();
        Controller::new_dynamic(mgr, resource.clone(), scope.clone(), reconcile)
            .client(client.clone())
            .named(format!("cert-manager-{}", resource.kind.to_lowercase()))
            .watches::<Secret>(move |secret| {
                // A `ca` issuer waits for its Secret.
                let issuers = cache.dynamic_informer(&secrets_of, issuers_scope.clone()).list();
                issuers
                    .iter()
                    .filter(|i| {
                        i.data["spec"]["ca"]["secretName"].as_str() == secret.metadata.name.as_deref()
                            && Some(secret_namespace(i)) == secret.metadata.namespace
                    })
                    .map(|i| Request::new(i.metadata.name.clone().unwrap_or_default(), i.metadata.namespace.as_deref()))
                    .collect()
            })
            .build()?;
    }
    Ok(())
}

/// Sets the issuer's `Ready` condition.
async fn reconcile(ctx: Context<DynamicObject>) -> ReconcileResult {
    let Some(issuer) = ctx.object.as_ref() else { return Ok(Action::done()) };
    let secret = ca_secret(&ctx.cache, issuer);
    let namespace = secret_namespace(issuer);
    let ready = readiness(&signer(&issuer.data["spec"], &namespace, secret.as_deref()));
    let api = ctx.dynamic_api();
    let name = issuer.metadata.name.clone().unwrap_or_default();
    let conditions = set_ready(issuer.data["status"]["conditions"].as_array(), &ready, issuer.metadata.generation);
    if Some(&conditions) == issuer.data["status"]["conditions"].as_array() {
        return Ok(Action::done());
    }
    let patch = json!({"status": {"conditions": conditions}});
    match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(Action::done()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::done()),
        Err(e) => Err(ReconcileError::retry(e)),
    }
}

/// `conditions` with its `Ready` condition set as `ready` says (the transition time kept
/// when the status does not change).
pub(super) fn set_ready(conditions: Option<&Vec<Value>>, ready: &Readiness, generation: Option<i64>) -> Vec<Value> {
    let status = if ready.ready { "True" } else { "False" };
    let previous = conditions.and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
    let transition = match previous {
        Some(p) if p["status"] == status => p["lastTransitionTime"].clone(),
        _ => serde_json::to_value(crate::common::now()).unwrap_or(Value::Null),
    };
    let mut condition = json!({
        "type": "Ready",
        "status": status,
        "reason": ready.reason,
        "message": ready.message,
        "lastTransitionTime": transition,
    });
    if let Some(g) = generation {
        condition["observedGeneration"] = json!(g);
    }
    let mut out: Vec<Value> = conditions.into_iter().flatten().filter(|c| c["type"] != "Ready").cloned().collect();
    out.push(condition);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_is_ready_and_unknown_issuers_say_why_not() {
        assert!(readiness(&signer(&json!({"selfSigned": {}}), "ns", None)).ready);
        let acme = readiness(&signer(&json!({"acme": {}}), "ns", None));
        assert!(!acme.ready);
        assert_eq!(acme.reason, "IssuerNotSupported");
        let ca = readiness(&signer(&json!({"ca": {"secretName": "root"}}), "ns", None));
        assert_eq!((ca.ready, ca.reason), (false, "ErrGetKeyPair"));
        assert!(ca.message.contains("\"root\""), "{}", ca.message);
    }

    #[test]
    fn a_ca_secret_with_a_key_pair_signs() {
        let root = DevCa::generate("root").expect("a CA");
        let secret = Secret {
            data: Some(
                [
                    ("tls.crt".to_string(), k8s_openapi::ByteString(root.cert_pem().as_bytes().to_vec())),
                    ("tls.key".to_string(), k8s_openapi::ByteString(root.key_pem().as_bytes().to_vec())),
                ]
                .into(),
            ),
            ..Default::default()
        };
        let ready = readiness(&signer(&json!({"ca": {"secretName": "root"}}), "ns", Some(&secret)));
        assert_eq!((ready.ready, ready.reason), (true, "KeyPairVerified"));
    }

    #[test]
    fn the_transition_time_is_kept_while_the_status_holds() {
        let ready = Readiness { ready: true, reason: "IsReady", message: String::new() };
        let first = set_ready(None, &ready, Some(1));
        let again = set_ready(Some(&first), &ready, Some(1));
        assert_eq!(first, again);
    }
}
