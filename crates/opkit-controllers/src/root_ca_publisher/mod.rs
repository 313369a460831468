//! The root CA publisher (kube-controller-manager's `root-ca-cert-publisher`): every
//! active namespace has a ConfigMap `kube-root-ca.crt` holding the API server's CA
//! bundle under `ca.crt`, so pods can verify `kubernetes.default.svc`. It is recreated
//! when deleted and put back when edited.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use opkit::{Action, Context, Controller, Manager, ReconcileError, ReconcileResult, Request};

use crate::ControllersConfig;

/// The ConfigMap's name in every namespace.
pub(crate) const CONFIG_MAP: &str = "kube-root-ca.crt";
/// The key holding the PEM bundle.
const KEY: &str = "ca.crt";
/// kube's description annotation on the ConfigMap.
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal \
endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across \
distributions of Kubernetes clusters.";

/// Registers the controller with `mgr` when it is enabled and the CA is known.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    let Some(ca) = cfg.root_ca_pem.clone().filter(|_| cfg.enabled("root-ca-cert-publisher")) else {
        return Ok(());
    };
    Controller::new(mgr, reconcile)
        .client(crate::identity::client_for(mgr, cfg, "root-ca-cert-publisher"))
        .named("root-ca-cert-publisher")
        .with_state(std::sync::Arc::new(ca))
        .watches::<ConfigMap>(namespace_of_bundle)
        .build()
}

/// The namespace whose `kube-root-ca.crt` changed.
fn namespace_of_bundle(cm: &ConfigMap) -> Vec<Request> {
    match (cm.metadata.name.as_deref(), cm.metadata.namespace.as_deref()) {
        (Some(CONFIG_MAP), Some(ns)) => vec![Request::new(ns, None)],
        _ => vec![],
    }
}

/// The ConfigMap as the publisher writes it.
fn bundle(ca: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(CONFIG_MAP.into()),
            annotations: Some(BTreeMap::from([("kubernetes.io/description".to_string(), DESCRIPTION.to_string())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(KEY.to_string(), ca.to_string())])),
        ..Default::default()
    }
}

async fn reconcile(ctx: Context<Namespace, String>) -> ReconcileResult {
    let Some(ns) = ctx.object.as_ref() else { return Ok(Action::done()) };
    if ns.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let ca = ctx.state.as_str();
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns.name_any());
    let result = match ctx.cache.get::<ConfigMap>(CONFIG_MAP, Some(&ns.name_any())) {
        None => api.create(&PostParams::default(), &bundle(ca)).await.map(drop),
        Some(current) if current.data.as_ref().and_then(|d| d.get(KEY)).map(String::as_str) == Some(ca) => Ok(()),
        Some(current) => {
            let mut fixed = (*current).clone();
            fixed.data.get_or_insert_default().insert(KEY.into(), ca.into());
            api.replace(CONFIG_MAP, &PostParams::default(), &fixed).await.map(drop)
        }
    };
    match result {
        Ok(()) => Ok(Action::done()),
        // Created meanwhile (the watch will bring it), or the namespace is going away.
        Err(kube::Error::Api(s)) if matches!(s.code, 403 | 404 | 409) => Ok(Action::done()),
        Err(e) => Err(ReconcileError::retry(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bundle_maps_to_its_namespace() {
        let mut cm = bundle("PEM");
        cm.metadata.namespace = Some("team".into());
        assert_eq!(namespace_of_bundle(&cm), vec![Request::new("team", None)]);
        cm.metadata.name = Some("settings".into());
        assert!(namespace_of_bundle(&cm).is_empty());
    }
}
