//! Table printers for scheduling policy objects: pod disruption budgets (policy) and
//! priority classes (scheduling.k8s.io).

use serde_json::Value;

use super::Printer;
use super::util::{age, age_col, at, col, i, int, name, name_col, s, st};

/// The printer of policy/poddisruptionbudgets.
pub(crate) fn poddisruptionbudgets() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("Min Available", "string", "The minimum number of pods that must be available."),
            col("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
            col("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
            age_col(),
        ],
        |o, now| {
            let iors = |p: &str| match at(o, p) {
                Some(Value::String(v)) => v.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => "N/A".into(),
            };
            vec![
                name(o),
                st(iors("spec.minAvailable")),
                st(iors("spec.maxUnavailable")),
                i(int(o, "status.disruptionsAllowed", 0)),
                age(o, now),
            ]
        },
    ))
}

/// The printer of scheduling.k8s.io/priorityclasses.
pub(crate) fn priorityclasses() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("Value", "integer", "value represents the integer value of this priority class."),
            col(
                "Global-Default",
                "boolean",
                "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class.",
            ),
            age_col(),
            col(
                "PreemptionPolicy",
                "string",
                "preemptionPolicy is the Policy for preempting pods with lower priority.",
            ),
        ],
        |o, now| {
            let gd = at(o, "globalDefault").and_then(Value::as_bool).unwrap_or(false);
            vec![name(o), i(int(o, "value", 0)), Value::Bool(gd), age(o, now), st(s(o, "preemptionPolicy"))]
        },
    ))
}
