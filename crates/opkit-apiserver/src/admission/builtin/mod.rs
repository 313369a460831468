//! The admission plugins compiled into kube-apiserver that operators meet in real
//! clusters, one module per plugin:
//!
//! - `pod_security`: Pod Security admission (namespace labels, baseline and restricted).
//!
//! NamespaceLifecycle is `kinds::namespaces::check_open`; the ServiceAccount plugin's
//! default `serviceAccountName` and DefaultTolerationSeconds are the pod strategy's
//! create defaults (`kinds/pods.rs`).

mod pod_security;

use serde_json::Value;

use super::{Attributes, Verdict};
use crate::error::ApiResult;
use crate::registry::Registry;

/// The built-in mutating plugins.
pub(crate) async fn mutate(_registry: &Registry, _attrs: &Attributes<'_>, _obj: &mut Value) -> ApiResult<Verdict> {
    Ok(Verdict::default())
}

/// The built-in validating plugins that run before policies and webhooks.
pub(crate) async fn validate(registry: &Registry, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<Verdict> {
    pod_security::validate(registry, attrs, obj).await
}

/// ResourceQuota, the last validating plugin.
pub(crate) async fn validate_quota(_registry: &Registry, _attrs: &Attributes<'_>, _obj: &Value) -> ApiResult<Verdict> {
    Ok(Verdict::default())
}
