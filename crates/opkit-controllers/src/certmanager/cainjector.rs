//! cert-manager's CA injector: a ValidatingWebhookConfiguration,
//! MutatingWebhookConfiguration, CustomResourceDefinition (its conversion webhook) or
//! APIService annotated `cert-manager.io/inject-ca-from: <namespace>/<certificate>`
//! gets the `ca.crt` of that Certificate's Secret as its `caBundle`, and one annotated
//! `cert-manager.io/inject-ca-from-secret: <namespace>/<secret>` gets that Secret's,
//! when the Secret allows it (`cert-manager.io/allow-direct-injection: "true"`). The
//! bundle follows the Secret: a reissued certificate is injected again.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, PostParams};
use kube::discovery::Scope;
use opkit::{Action, Cache, Context, Controller, Manager, Object, ReconcileError, ReconcileResult, Request};

use super::crds::certificate_resource;
use super::{CERTIFICATE_NAME, INJECT_CA_FROM, INJECT_CA_FROM_SECRET};

/// The annotation a Secret needs before its CA is injected directly.
const ALLOW_DIRECT_INJECTION: &str = "cert-manager.io/allow-direct-injection";

/// A kind the injector fills `caBundle` into.
trait CaInjectable: Object {
    /// Sets every `caBundle` of the object to `ca`; whether anything changed.
    fn inject(&mut self, ca: &[u8]) -> bool;
}

/// Sets `slot` to `ca`; whether it changed.
fn set_bundle(slot: &mut Option<ByteString>, ca: &[u8]) -> bool {
    if slot.as_ref().map(|b| b.0.as_slice()) == Some(ca) {
        return false;
    }
    *slot = Some(ByteString(ca.to_vec()));
    true
}

impl CaInjectable for ValidatingWebhookConfiguration {
    fn inject(&mut self, ca: &[u8]) -> bool {
        let mut changed = false;
        for webhook in self.webhooks.iter_mut().flatten() {
            changed |= set_bundle(&mut webhook.client_config.ca_bundle, ca);
        }
        changed
    }
}

impl CaInjectable for MutatingWebhookConfiguration {
    fn inject(&mut self, ca: &[u8]) -> bool {
        let mut changed = false;
        for webhook in self.webhooks.iter_mut().flatten() {
            changed |= set_bundle(&mut webhook.client_config.ca_bundle, ca);
        }
        changed
    }
}

impl CaInjectable for CustomResourceDefinition {
    fn inject(&mut self, ca: &[u8]) -> bool {
        // Only a conversion webhook has a client configuration to fill.
        let webhook = self.spec.conversion.as_mut().and_then(|c| c.webhook.as_mut());
        match webhook.and_then(|w| w.client_config.as_mut()) {
            Some(config) => set_bundle(&mut config.ca_bundle, ca),
            None => false,
        }
    }
}

impl CaInjectable for APIService {
    fn inject(&mut self, ca: &[u8]) -> bool {
        match self.spec.as_mut() {
            Some(spec) => set_bundle(&mut spec.ca_bundle, ca),
            None => false,
        }
    }
}

/// Registers one injector per kind.
pub(super) fn register(mgr: &Manager, client: kube::Client) -> Result<(), opkit::BuildError> {
    injector::<ValidatingWebhookConfiguration>(mgr, client.clone())?;
    injector::<MutatingWebhookConfiguration>(mgr, client.clone())?;
    injector::<CustomResourceDefinition>(mgr, client.clone())?;
    injector::<APIService>(mgr, client)
}

/// The injector of kind `K`: reconciles annotated objects, and again when a Secret they
/// draw from changes.
fn injector<K: CaInjectable>(mgr: &Manager, client: kube::Client) -> Result<(), opkit::BuildError> {
    let cache = mgr.cache().clone();
    let name = format!("cert-manager-cainjector-{}", K::kind(&()).to_lowercase());
    Controller::new(mgr, reconcile::<K>)
        .client(client)
        .named(name)
        .watches::<Secret>(move |secret| drawing_from::<K>(&cache, secret))
        .build()
}

/// The objects of kind `K` whose annotations draw a CA from `secret`.
fn drawing_from<K: CaInjectable>(cache: &Cache, secret: &Secret) -> Vec<Request> {
    let ns = secret.metadata.namespace.clone().unwrap_or_default();
    let by_secret = format!("{ns}/{}", secret.metadata.name.clone().unwrap_or_default());
    let certificate = secret.metadata.annotations.as_ref().and_then(|a| a.get(CERTIFICATE_NAME));
    let by_certificate = certificate.map(|c| format!("{ns}/{c}"));
    cache
        .list::<K>()
        .iter()
        .filter(|o| {
            let annotations = o.meta().annotations.as_ref();
            let from = |key: &str| annotations.and_then(|a| a.get(key)).cloned();
            from(INJECT_CA_FROM_SECRET).as_ref() == Some(&by_secret)
                || (by_certificate.is_some() && from(INJECT_CA_FROM) == by_certificate)
        })
        .map(|o| Request::from_object(o.as_ref()))
        .collect()
}

/// Splits `namespace/name`.
fn namespaced_name(reference: &str) -> Option<(&str, &str)> {
    reference.split_once('/').filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
}

/// The CA bundle an object's annotations point at, if it is there yet.
fn bundle_for(cache: &Cache, annotations: &std::collections::BTreeMap<String, String>) -> Option<Vec<u8>> {
    let ca_of = |secret: &Secret| secret.data.as_ref()?.get("ca.crt").map(|b| b.0.clone()).filter(|b| !b.is_empty());
    if let Some((ns, name)) = annotations.get(INJECT_CA_FROM_SECRET).and_then(|r| namespaced_name(r)) {
        let secret = cache.get::<Secret>(name, Some(ns))?;
        let allowed = secret.metadata.annotations.as_ref().and_then(|a| a.get(ALLOW_DIRECT_INJECTION));
        return if allowed.map(String::as_str) == Some("true") { ca_of(&secret) } else { None };
    }
    let (ns, certificate) = annotations.get(INJECT_CA_FROM).and_then(|r| namespaced_name(r))?;
    let certificates = cache.dynamic_informer(&certificate_resource(), Scope::Namespaced).list();
    let found = certificates
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(certificate) && c.metadata.namespace.as_deref() == Some(ns))?;
    let secret_name = found.data["spec"]["secretName"].as_str()?;
    let secret = cache.get::<Secret>(secret_name, Some(ns))?;
    // cert-manager injects only from a Secret the Certificate wrote.
    let owner = secret.metadata.annotations.as_ref().and_then(|a| a.get(CERTIFICATE_NAME));
    if owner.map(String::as_str) != Some(certificate) {
        return None;
    }
    ca_of(&secret)
}

async fn reconcile<K: CaInjectable>(ctx: Context<K>) -> ReconcileResult {
    let Some(object) = ctx.object.as_ref() else { return Ok(Action::done()) };
    let Some(annotations) = object.meta().annotations.as_ref() else { return Ok(Action::done()) };
    let Some(ca) = bundle_for(&ctx.cache, annotations) else { return Ok(Action::done()) };
    let mut injected = K::clone(object);
    if !injected.inject(&ca) {
        return Ok(Action::done());
    }
    let api: Api<K> = Api::all(ctx.client.clone());
    let name = object.meta().name.clone().unwrap_or_default();
    match api.replace(&name, &PostParams::default(), &injected).await {
        Ok(_) => Ok(Action::done()),
        // Changed meanwhile: the change brings the next attempt.
        Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => Ok(Action::done()),
        Err(e) => Err(ReconcileError::retry(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_webhook_gets_the_bundle_and_a_crd_only_with_a_conversion_webhook() {
        let mut config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "v"},
            "webhooks": [
                {"name": "a.example.com", "clientConfig": {"service": {"namespace": "s", "name": "w"}},
                 "sideEffects": "None", "admissionReviewVersions": ["v1"]},
                {"name": "b.example.com", "clientConfig": {"service": {"namespace": "s", "name": "w"}},
                 "sideEffects": "None", "admissionReviewVersions": ["v1"]},
            ],
        }))
        .expect("a configuration");
        assert!(config.inject(b"CA"));
        assert!(!config.inject(b"CA"), "injecting the same bundle changes nothing");
        assert!(
            config.webhooks.iter().flatten().all(|w| w.client_config.ca_bundle == Some(ByteString(b"CA".to_vec())))
        );
        let mut crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "things", "kind": "Thing"}, "versions": []},
        }))
        .expect("a CRD");
        assert!(!crd.inject(b"CA"));
        assert_eq!(namespaced_name("system/serving-cert"), Some(("system", "serving-cert")));
        assert_eq!(namespaced_name("serving-cert"), None);
    }
}
