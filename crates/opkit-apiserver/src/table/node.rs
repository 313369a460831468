//! The Table printer of node.k8s.io RuntimeClasses.

use serde_json::Value;

use super::Printer;
use super::util::{age, age_col, col, name, name_col, s, st};

/// The printer of node.k8s.io/runtimeclasses.
pub(crate) fn runtimeclasses() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col(
                "Handler",
                "string",
                "Handler specifies the underlying runtime and configuration that the CRI implementation will use to handle pods of this class.",
            ),
            age_col(),
        ],
        runtimeclass_row,
    ))
}

fn runtimeclass_row(o: &Value, now: i64) -> Vec<Value> {
    vec![name(o), st(s(o, "handler")), age(o, now)]
}
