//! The admission plugins compiled into kube-apiserver that operators meet in real
//! clusters. Empty until they are written: every request is admitted unchanged.

use serde_json::Value;

use super::{Attributes, Verdict};
use crate::error::ApiResult;
use crate::registry::Registry;

/// The built-in mutating plugins.
pub(crate) async fn mutate(_registry: &Registry, _attrs: &Attributes<'_>, _obj: &mut Value) -> ApiResult<Verdict> {
    Ok(Verdict::default())
}

/// The built-in validating plugins that run before policies and webhooks.
pub(crate) async fn validate(_registry: &Registry, _attrs: &Attributes<'_>, _obj: &Value) -> ApiResult<Verdict> {
    Ok(Verdict::default())
}

/// ResourceQuota, the last validating plugin.
pub(crate) async fn validate_quota(_registry: &Registry, _attrs: &Attributes<'_>, _obj: &Value) -> ApiResult<Verdict> {
    Ok(Verdict::default())
}
