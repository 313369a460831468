//! The admission plugins compiled into kube-apiserver that operators meet in real
//! clusters, one module per plugin, in kube's order:
//!
//! - `namespace_lifecycle`: NamespaceLifecycle (no new content in a missing or
//!   terminating namespace), asked before the object is built;
//! - `limit_ranger`: LimitRanger (container defaults, then min/max/ratio bounds);
//! - `pod_security`: Pod Security admission (namespace labels, baseline and restricted);
//! - `resource_quota`: ResourceQuota, run last.
//!
//! The ServiceAccount plugin's
//! default `serviceAccountName` and DefaultTolerationSeconds are the pod strategy's
//! create defaults (`kinds/pods.rs`).

mod limit_ranger;
pub(crate) mod namespace_lifecycle;
mod pod_security;
mod resource_quota;

use serde_json::Value;

use super::{Attributes, Verdict};
use crate::error::ApiResult;
use crate::registry::Registry;
use crate::registry::view::StoreView;

/// The built-in mutating plugins: LimitRanger's defaults.
pub(crate) async fn mutate(view: StoreView<'_>, attrs: &Attributes<'_>, obj: &mut Value) -> ApiResult<Verdict> {
    Ok(limit_ranger::mutate(view, attrs, obj))
}

/// The built-in validating plugins that run before policies and webhooks: LimitRanger's
/// bounds, then Pod Security.
pub(crate) async fn validate(view: StoreView<'_>, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<Verdict> {
    limit_ranger::validate(view, attrs, obj)?;
    pod_security::validate(view, attrs, obj).await
}

/// ResourceQuota, the last validating plugin: it charges the quotas' usage through
/// `registry`, as kube's plugin updates their status through its client.
pub(crate) async fn validate_quota(registry: &Registry, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<Verdict> {
    resource_quota::validate(registry, attrs, obj).await
}
