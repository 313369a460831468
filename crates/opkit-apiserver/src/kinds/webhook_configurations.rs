//! admissionregistration.k8s.io Mutating- and ValidatingWebhookConfigurations: each
//! webhook's `timeoutSeconds` is between 1 and 30, as kube validates it, and the Table
//! printer.

use serde_json::Value;

use super::Strategy;
use crate::schema::FieldError;
use crate::table::{self, Printer};

/// The longest `timeoutSeconds` a webhook may have.
const MAX_TIMEOUT_SECONDS: i64 = 30;

/// The strategy of both webhook configuration kinds.
pub(super) struct WebhookConfigurations;

impl Strategy for WebhookConfigurations {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let Some(webhooks) = obj["webhooks"].as_array() else { return errs };
        for (i, hook) in webhooks.iter().enumerate() {
            let timeout = &hook["timeoutSeconds"];
            if let Some(seconds) = timeout.as_i64()
                && !(1..=MAX_TIMEOUT_SECONDS).contains(&seconds)
            {
                errs.push(FieldError::invalid(
                    &format!("webhooks[{i}].timeoutSeconds"),
                    timeout,
                    "the timeout value must be between 1 and 30 seconds",
                ));
            }
        }
        errs
    }

    fn table(&self) -> Option<Printer> {
        Some(table::admission::webhook_configurations())
    }
}
