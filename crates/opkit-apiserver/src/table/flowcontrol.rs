//! The Table printers of flowcontrol.apiserver.k8s.io FlowSchemas and
//! PriorityLevelConfigurations (kube's columns).

use serde_json::Value;

use super::Printer;
use super::util::{age, age_col, arr, at, col, name, name_col, s, st};

/// The printer of flowcontrol.apiserver.k8s.io/flowschemas.
pub(crate) fn flowschemas() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("PriorityLevel", "string", "`name` is the name of the priority level configuration being referenced"),
            col(
                "MatchingPrecedence",
                "string",
                "`matchingPrecedence` is used to choose among the FlowSchemas that match a given request.",
            ),
            col(
                "DistinguisherMethod",
                "string",
                "`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema.",
            ),
            age_col(),
            col("MissingPL", "string", "references a broken or non-existent PriorityLevelConfiguration"),
        ],
        flowschema_row,
    ))
}

fn flowschema_row(o: &Value, now: i64) -> Vec<Value> {
    let method = match s(o, "spec.distinguisherMethod.type") {
        "" => "*",
        m => m,
    };
    let dangling = arr(o, "status.conditions").iter().find(|c| c["type"] == "Dangling");
    let missing = dangling.and_then(|c| c["status"].as_str()).unwrap_or("?");
    vec![
        name(o),
        st(s(o, "spec.priorityLevelConfiguration.name")),
        at(o, "spec.matchingPrecedence").cloned().unwrap_or(Value::Null),
        st(method),
        age(o, now),
        st(missing),
    ]
}

/// The printer of flowcontrol.apiserver.k8s.io/prioritylevelconfigurations.
pub(crate) fn prioritylevelconfigurations() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col(
                "Type",
                "string",
                "`type` indicates whether this priority level is subject to limitation on request execution.",
            ),
            col(
                "NominalConcurrencyShares",
                "string",
                "`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level.",
            ),
            col("Queues", "string", "`queues` is the number of queues for this priority level."),
            col(
                "HandSize",
                "string",
                "`handSize` is a small positive number that configures the shuffle sharding of requests into queues.",
            ),
            col(
                "QueueLengthLimit",
                "string",
                "`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time.",
            ),
            age_col(),
        ],
        prioritylevel_row,
    ))
}

fn prioritylevel_row(o: &Value, now: i64) -> Vec<Value> {
    let value_or_none = |path: &str| at(o, path).filter(|v| !v.is_null()).cloned().unwrap_or_else(|| st("<none>"));
    let queuing = |key: &str| value_or_none(&format!("spec.limited.limitResponse.queuing.{key}"));
    vec![
        name(o),
        st(s(o, "spec.type")),
        value_or_none("spec.limited.nominalConcurrencyShares"),
        queuing("queues"),
        queuing("handSize"),
        queuing("queueLengthLimit"),
        age(o, now),
    ]
}
