//! The Table printer for admission webhook configurations (admissionregistration.k8s.io).

use super::Printer;
use super::util::{Col, age, age_col, arr, col, i, name, name_col};

/// The columns of webhook configurations.
fn webhooks() -> Vec<Col> {
    vec![
        name_col(),
        col("Webhooks", "integer", "Webhooks indicates the number of webhooks registered in this configuration"),
        age_col(),
    ]
}

/// The printer of admissionregistration.k8s.io mutating and validating webhook configurations.
pub(crate) fn webhook_configurations() -> Printer {
    Printer::of((webhooks(), |o, now| vec![name(o), i(arr(o, "webhooks").len() as i64), age(o, now)]))
}
