//! CustomResourceDefinition schema handling as kube-apiserver (apiextensions-apiserver) does it:
//! compiling a version's `openAPIV3Schema` ([`CrdSchema`]), defaulting, pruning and validating
//! custom resources against it (OpenAPI value validations, list types, CEL rules), and
//! validating CustomResourceDefinition objects themselves ([`validate_crd`]).

mod cel;
mod cel_cost;

pub(crate) use cel_cost::CEL_RESERVED;
pub(crate) mod cel_depth;
mod crd;
mod crd_schema;
mod errors;
mod format;
mod mutate;
mod structural;
mod validate;
mod walk;

#[cfg(test)]
mod tests;

use serde_json::Value;

pub(crate) use crd::validate_crd;
pub(crate) use errors::{FieldError, FieldErrorReason};

use structural::Schema;

/// The error kube adds instead of running CEL rules when the object already has a
/// type/required/enum/size error.
const BLOCKING_MESSAGE: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// A compiled openAPIV3Schema of one CRD version (structural schema), ready to default, prune
/// and validate objects.
#[derive(Debug)]
pub struct CrdSchema {
    root: Schema,
}

impl CrdSchema {
    /// Compiles `open_api_v3_schema` (regex patterns and CEL rules included). Errors name the
    /// offending schema location, e.g. `openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule`.
    pub fn new(open_api_v3_schema: &Value) -> Result<CrdSchema, Vec<FieldError>> {
        Self::compile_at(open_api_v3_schema, "openAPIV3Schema")
    }

    /// Like [`CrdSchema::new`], with error paths rooted at `path`.
    pub(crate) fn compile_at(schema: &Value, path: &str) -> Result<CrdSchema, Vec<FieldError>> {
        let mut errs = Vec::new();
        let root = Schema::compile(schema, path, &mut errs);
        if errs.is_empty() { Ok(CrdSchema { root }) } else { Err(errs) }
    }

    /// Applies `default` values recursively, after dropping `null`s of non-nullable fields
    /// without a default (as the apiserver does when decoding a custom resource).
    pub fn apply_defaults(&self, obj: &mut Value) {
        mutate::prune_non_nullable_nulls(obj, &self.root);
        mutate::default(obj, &self.root);
    }

    /// Drops fields unknown to the schema and returns their paths, sorted (e.g. `spec.items[0].bar`).
    /// `apiVersion`, `kind` and `metadata` at the root are always kept.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut out = Vec::new();
        mutate::prune(obj, Some(&self.root), true, "", &mut out);
        out.sort();
        out
    }

    /// The paths [`CrdSchema::prune`] would drop, without modifying `obj`.
    pub fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        let mut copy = obj.clone();
        self.prune(&mut copy)
    }

    /// Validates a (defaulted, pruned) custom resource: OpenAPI value validations, list-type
    /// invariants, then `x-kubernetes-validations` CEL rules (transition rules see `old`).
    /// CEL rules are skipped, with kube's notice, when the object has blocking errors.
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate::validate_value(&self.root, obj, "", true, &mut errs);
        walk::validate_list_types(&self.root, obj, "", &mut errs);
        if !self.has_cel() {
            return errs;
        }
        let blocking = errs.iter().any(|e| {
            matches!(
                e.reason,
                FieldErrorReason::NotSupported
                    | FieldErrorReason::Required
                    | FieldErrorReason::TooLong
                    | FieldErrorReason::TooMany
                    | FieldErrorReason::TypeInvalid
            )
        });
        if blocking {
            errs.push(FieldError::invalid("<nil>", &Value::Null, BLOCKING_MESSAGE));
        } else {
            walk::validate_cel(&self.root, obj, old, "", &mut errs, &mut cel_cost::RuntimeBudget::default());
        }
        errs
    }

    /// Whether any node carries CEL rules.
    pub fn has_cel(&self) -> bool {
        fn any(s: &Schema) -> bool {
            s.cel.is_some()
                || s.properties.iter().any(|(_, c)| any(c))
                || s.additional_schema().is_some_and(any)
                || s.items.as_deref().is_some_and(any)
                || s.all_of.iter().any(any)
        }
        any(&self.root)
    }
}
