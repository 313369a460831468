//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding. Empty until written:
//! every request is admitted.

use serde_json::Value;

use super::{Attributes, Verdict};
use crate::error::ApiResult;
use crate::registry::Registry;

/// Evaluates the bound policies that match the request.
pub(crate) async fn validate(_registry: &Registry, _attrs: &Attributes<'_>, _obj: &Value) -> ApiResult<Verdict> {
    Ok(Verdict::default())
}
