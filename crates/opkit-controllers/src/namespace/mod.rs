//! Namespace lifecycle, as kube-controller-manager's namespace and serviceaccounts
//! controllers do it:
//!
//! - `namespace`: when a namespace is terminating, deletes all its content (every
//!   namespaced resource the server serves, custom resources included), reports progress
//!   in the namespace's status conditions (`NamespaceContentRemaining`,
//!   `NamespaceFinalizersRemaining`, and the failure conditions), waits for objects held
//!   by finalizers, then removes the `kubernetes` finalizer through `/finalize` so the
//!   namespace goes away;
//! - `serviceaccount`: keeps a `default` ServiceAccount in every active namespace.

pub(crate) mod conditions;
mod deleter;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use opkit::{Action, Context, Controller, Manager, ReconcileError, ReconcileResult, Request};
use serde_json::json;

use crate::ControllersConfig;

pub(crate) use deleter::delete_all_content;

/// The spec finalizer the namespace controller owns.
pub(crate) const KUBERNETES_FINALIZER: &str = "kubernetes";
/// How soon a namespace whose content is still going away is looked at again (kube waits
/// `estimate/2 + 1` seconds; a simulated cluster is faster).
const RECHECK: Duration = Duration::from_secs(1);

/// Errors of the namespace controllers.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NamespaceError {
    /// An API call failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Deleting the content failed somewhere (the conditions say where).
    #[error("namespace {0}: content deletion failed")]
    Content(String),
}

fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

fn has_kubernetes_finalizer(ns: &Namespace) -> bool {
    ns.spec.as_ref().and_then(|s| s.finalizers.as_ref()).is_some_and(|f| f.iter().any(|x| x == KUBERNETES_FINALIZER))
}

/// Deletes a terminating namespace's content, then finalizes it.
async fn reconcile_namespace(ctx: Context<Namespace>) -> ReconcileResult {
    let Some(cached) = ctx.object else { return Ok(Action::done()) };
    if cached.metadata.deletion_timestamp.is_none() || !has_kubernetes_finalizer(&cached) {
        return Ok(Action::done());
    }
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    let name = ctx.request.name.clone();
    // Several controllers edit a terminating namespace: work from the latest state.
    let Some(ns) = api.get_opt(&name).await.map_err(NamespaceError::from)? else { return Ok(Action::done()) };
    if ns.metadata.deletion_timestamp.is_none() || !has_kubernetes_finalizer(&ns) {
        return Ok(Action::done());
    }
    let report = delete_all_content(&ctx.client, &name, ns.metadata.deletion_timestamp.as_ref()).await;
    let current = ns.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let (merged, changed) = conditions::merge(&current, conditions::desired(&report, &crate::common::now()));
    if changed {
        let patch = json!({"status": {"conditions": merged}});
        match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {}
            Err(e) if matches!(code(&e), Some(404)) => return Ok(Action::done()),
            Err(e) => tracing::debug!(namespace = %name, error = %e, "updating namespace conditions failed"),
        }
    }
    if report.has_errors() {
        return Err(ReconcileError::retry(NamespaceError::Content(name)));
    }
    if report.content_remains() {
        return Ok(Action::requeue_after(RECHECK));
    }
    finalize(&api, &ns).await
}

/// Removes the `kubernetes` finalizer through the `/finalize` subresource.
async fn finalize(api: &Api<Namespace>, ns: &Namespace) -> ReconcileResult {
    let name = ns.metadata.name.clone().unwrap_or_default();
    let mut body = ns.clone();
    if let Some(spec) = body.spec.as_mut() {
        let mut left: Vec<String> =
            spec.finalizers.take().unwrap_or_default().into_iter().filter(|f| f != KUBERNETES_FINALIZER).collect();
        left.sort();
        left.dedup();
        spec.finalizers = Some(left);
    }
    match api.replace_subresource("finalize", &name, &PostParams::default(), &body).await {
        Ok(_) => Ok(Action::done()),
        Err(e) if matches!(code(&e), Some(404)) => Ok(Action::done()),
        // Another controller changed the namespace since it was read: finalize again from
        // the newer state (an expected race, not an error to log).
        Err(e) if matches!(code(&e), Some(409)) => Ok(Action::requeue()),
        Err(e) => Err(ReconcileError::retry(NamespaceError::from(e))),
    }
}

/// Creates the `default` ServiceAccount of an active namespace if it is missing.
async fn reconcile_service_account(ctx: Context<Namespace>) -> ReconcileResult {
    let Some(ns) = ctx.object else { return Ok(Action::done()) };
    if ns.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let name = ctx.request.name.clone();
    if ctx.cache.get::<ServiceAccount>("default", Some(&name)).is_some() {
        return Ok(Action::done());
    }
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &name);
    let sa = ServiceAccount {
        metadata: ObjectMeta { name: Some("default".into()), ..ObjectMeta::default() },
        ..ServiceAccount::default()
    };
    match api.create(&PostParams::default(), &sa).await {
        Ok(_) => Ok(Action::done()),
        // Already there, the namespace is terminating, or it is gone.
        Err(e) if matches!(code(&e), Some(409 | 403 | 404)) => Ok(Action::done()),
        Err(e) => Err(ReconcileError::retry(NamespaceError::from(e))),
    }
}

/// The namespace a `default` ServiceAccount belongs to.
fn default_sa_namespace(sa: &ServiceAccount) -> Vec<Request> {
    match (sa.metadata.name.as_deref(), sa.metadata.namespace.as_deref()) {
        (Some("default"), Some(ns)) => vec![Request::new(ns, None)],
        _ => vec![],
    }
}

/// Registers the `namespace` and `serviceaccount` controllers with `mgr` (those enabled).
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if cfg.enabled("namespace") {
        Controller::new(mgr, reconcile_namespace)
            .client(crate::identity::client_for(mgr, cfg, "namespace"))
            .named("namespace")
            .max_concurrent_reconciles(4)
            .build()?;
    }
    if cfg.enabled("serviceaccount") {
        Controller::new(mgr, reconcile_service_account)
            .client(crate::identity::client_for(mgr, cfg, "serviceaccount"))
            .named("serviceaccount")
            .watches::<ServiceAccount>(default_sa_namespace)
            .max_concurrent_reconciles(2)
            .build()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NamespaceSpec;

    #[test]
    fn only_default_service_accounts_map_to_their_namespace() {
        let mut sa = ServiceAccount::default();
        sa.metadata.name = Some("default".into());
        sa.metadata.namespace = Some("team".into());
        assert_eq!(default_sa_namespace(&sa), vec![Request::new("team", None)]);
        sa.metadata.name = Some("builder".into());
        assert!(default_sa_namespace(&sa).is_empty());
    }

    #[test]
    fn kubernetes_finalizer_detection() {
        let mut ns = Namespace::default();
        assert!(!has_kubernetes_finalizer(&ns));
        ns.spec = Some(NamespaceSpec { finalizers: Some(vec!["kubernetes".into()]) });
        assert!(has_kubernetes_finalizer(&ns));
    }
}
