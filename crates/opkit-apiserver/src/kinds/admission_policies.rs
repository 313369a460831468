//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding: kube's defaults and
//! validation of the objects, and, once a policy is written, its type checking written
//! (`admission::policy::type_check`). The compiled policies (`admission::policy`'s
//! cache) are rebuilt when the next request sees a newer write to either resource.

use serde_json::Value;

use super::{AfterCommit, Strategy};
use crate::admission::policy::model::{default_match_resources, read_binding, read_policy};
use crate::admission::policy::type_check::spawn_status_update;
use crate::error::ApiResult;
use crate::registry::Registry;
use crate::schema::FieldError;
use crate::table::{self, Printer};

/// `validatingadmissionpolicies`.
pub(crate) struct ValidatingAdmissionPolicies;

/// `validatingadmissionpolicybindings`.
pub(crate) struct ValidatingAdmissionPolicyBindings;

impl Strategy for ValidatingAdmissionPolicies {
    /// `failurePolicy: Fail` and the match defaults.
    fn default(&self, obj: &mut Value, _creating: bool) {
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else { return };
        spec.entry("failurePolicy").or_insert_with(|| Value::from("Fail"));
        if let Some(m) = spec.get_mut("matchConstraints") {
            default_match_resources(m);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        read_policy(obj).1
    }

    fn before_commit(&self, _obj: &mut Value, _old: Option<&Value>, _now: &str) -> ApiResult<Option<AfterCommit>> {
        Ok(Some(Box::new(|registry: &Registry, stored: &Value| spawn_status_update(registry, stored))))
    }

    fn table(&self) -> Option<Printer> {
        Some(table::admission::validating_admission_policies())
    }
}

impl Strategy for ValidatingAdmissionPolicyBindings {
    /// The match defaults of `matchResources`.
    fn default(&self, obj: &mut Value, _creating: bool) {
        if let Some(m) = obj.get_mut("spec").and_then(|s| s.get_mut("matchResources")) {
            default_match_resources(m);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        read_binding(obj).1
    }

    fn table(&self) -> Option<Printer> {
        Some(table::admission::validating_admission_policy_bindings())
    }
}
