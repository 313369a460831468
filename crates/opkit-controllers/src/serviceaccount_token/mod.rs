//! The ServiceAccount token controller (kube-controller-manager's `serviceaccount-token`
//! for legacy token Secrets): a Secret of type `kubernetes.io/service-account-token`
//! annotated `kubernetes.io/service-account.name` gets `token`, `ca.crt` and `namespace`
//! in its data and the account's uid in `kubernetes.io/service-account.uid`. A Secret
//! whose ServiceAccount does not exist is deleted, as kube does.
//!
//! The token comes from the TokenRequest API, bound to the Secret and valid for the
//! longest lifetime kube allows, so it stops authenticating when the Secret or the
//! ServiceAccount is deleted, as a legacy token does. (kube signs legacy tokens with the
//! `kubernetes/serviceaccount` issuer and no expiry; these carry the server's issuer.)

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::{ByteString, Resource as _};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use opkit::{Action, Context, Controller, Manager, ReconcileError, ReconcileResult, Request};
use serde_json::json;

use crate::ControllersConfig;

/// The Secret type this controller fills.
pub(crate) const TOKEN_SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotation naming the Secret's ServiceAccount.
pub(crate) const ACCOUNT_NAME: &str = "kubernetes.io/service-account.name";
/// The annotation recording the ServiceAccount's uid.
pub(crate) const ACCOUNT_UID: &str = "kubernetes.io/service-account.uid";
/// The longest token lifetime the TokenRequest API grants (2^32 seconds, less one).
const LIFETIME_SECONDS: i64 = (1 << 32) - 1;

/// Registers the controller with `mgr` when it is enabled.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("serviceaccount-token") {
        return Ok(());
    }
    let ca = cfg.root_ca_pem.clone().unwrap_or_default();
    let cache = mgr.cache().clone();
    Controller::new(mgr, reconcile)
        .client(crate::identity::client_for(mgr, cfg, "serviceaccount-token"))
        .named("serviceaccount-token")
        .with_state(std::sync::Arc::new(ca))
        .watches::<ServiceAccount>(move |sa| {
            token_secrets_of(&cache.list_in::<Secret>(&sa.namespace().unwrap_or_default()), sa)
        })
        .build()
}

/// The token Secrets that name `sa`: they are deleted when it is.
fn token_secrets_of(secrets: &[std::sync::Arc<Secret>], sa: &ServiceAccount) -> Vec<Request> {
    secrets
        .iter()
        .filter(|s| is_token_secret(s) && s.namespace() == sa.namespace())
        .filter(|s| s.annotations().get(ACCOUNT_NAME) == sa.metadata.name.as_ref())
        .map(|s| Request::from_object(&**s))
        .collect()
}

fn is_token_secret(secret: &Secret) -> bool {
    secret.type_.as_deref() == Some(TOKEN_SECRET_TYPE)
}

async fn reconcile(ctx: Context<Secret, String>) -> ReconcileResult {
    let Some(secret) = ctx.object.as_ref().filter(|s| is_token_secret(s)) else { return Ok(Action::done()) };
    if secret.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let Some(account) = secret.annotations().get(ACCOUNT_NAME).cloned() else { return Ok(Action::done()) };
    let namespace = secret.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let accounts: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &namespace);
    // A live read: the cache may not have seen an account created just before its Secret.
    let Some(sa) = accounts.get_opt(&account).await.map_err(ReconcileError::retry)? else {
        return ignore_gone(secrets.delete(&secret.name_any(), &DeleteParams::default()).await.map(drop));
    };
    if secret.data.as_ref().is_some_and(|d| d.contains_key("token")) {
        return Ok(Action::done());
    }
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(LIFETIME_SECONDS),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some(Secret::API_VERSION.into()),
                kind: Some(Secret::KIND.into()),
                name: secret.metadata.name.clone(),
                uid: secret.metadata.uid.clone(),
            }),
        },
        ..Default::default()
    };
    let issued: TokenRequest = accounts
        .create_subresource("token", &account, &PostParams::default(), &request)
        .await
        .map_err(ReconcileError::retry)?;
    let token = issued.status.map(|s| s.token).unwrap_or_default();
    let patch = json!({
        "metadata": {"annotations": {ACCOUNT_UID: sa.metadata.uid}},
        "data": {
            "token": ByteString(token.into_bytes()),
            "ca.crt": ByteString(ctx.state.as_bytes().to_vec()),
            "namespace": ByteString(namespace.into_bytes()),
        },
    });
    ignore_gone(secrets.patch(&secret.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await.map(drop))
}

/// Done, also when the Secret is already gone.
fn ignore_gone(result: kube::Result<()>) -> ReconcileResult {
    match result {
        Ok(()) => Ok(Action::done()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::done()),
        Err(e) => Err(ReconcileError::retry(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn secret(name: &str, account: &str, type_: &str) -> Arc<Secret> {
        let mut s = Secret { type_: Some(type_.into()), ..Default::default() };
        s.metadata.name = Some(name.into());
        s.metadata.namespace = Some("t".into());
        s.metadata.annotations = Some(BTreeMap::from([(ACCOUNT_NAME.to_string(), account.to_string())]));
        Arc::new(s)
    }

    #[test]
    fn an_account_maps_to_its_token_secrets_only() {
        let secrets = [
            secret("a", "op", TOKEN_SECRET_TYPE),
            secret("b", "other", TOKEN_SECRET_TYPE),
            secret("c", "op", "Opaque"),
        ];
        let mut sa = ServiceAccount::default();
        sa.metadata.name = Some("op".into());
        sa.metadata.namespace = Some("t".into());
        assert_eq!(token_secrets_of(&secrets, &sa), vec![Request::new("a", Some("t"))]);
    }
}
