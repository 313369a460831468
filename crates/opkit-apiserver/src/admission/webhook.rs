//! Mutating and validating admission webhooks. Empty until written: every request is
//! admitted unchanged.

use serde_json::Value;

use super::{Attributes, Verdict};
use crate::error::ApiResult;
use crate::registry::Registry;

/// Calls the matching mutating webhooks in order.
pub(crate) async fn mutate(_registry: &Registry, _attrs: &Attributes<'_>, _obj: &mut Value) -> ApiResult<Verdict> {
    Ok(Verdict::default())
}

/// Calls the matching validating webhooks.
pub(crate) async fn validate(_registry: &Registry, _attrs: &Attributes<'_>, _obj: &Value) -> ApiResult<Verdict> {
    Ok(Verdict::default())
}
