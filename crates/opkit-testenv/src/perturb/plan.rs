//! Test plans: one fault at one precise point of the operator's run, derived from the
//! writes of its fault-free learning run, and pruned as Sieve prunes (a write that
//! changed nothing is no point to crash at or to fail).

use serde::{Deserialize, Serialize};

use crate::{Fault, FaultAction, RequestFilter, TracedRequest};

/// The kinds of fault a plan makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PlanClass {
    /// After the k-th write commits, the operator is killed before it reads the answer,
    /// and restarted with empty caches (Sieve's intermediate states).
    IntermediateState,
    /// As an intermediate state, and the restarted operator's informers list as of the
    /// revision before that write (a lagging API server's watch cache), then catch up
    /// through their watches (Sieve's stale states).
    StaleState,
    /// The k-th write is answered 500 (or, an update or patch, 409 Conflict) without
    /// running.
    ApiError,
    /// The k-th write applies, and the operator is answered 504 Timeout.
    TimeoutAfterCommit,
}

impl PlanClass {
    /// Every class.
    pub const ALL: [PlanClass; 4] =
        [PlanClass::IntermediateState, PlanClass::StaleState, PlanClass::ApiError, PlanClass::TimeoutAfterCommit];

    /// The faults of this class for a write with `verb`: an API error is a 500, and a
    /// 409 Conflict only where kube answers one (an update or patch with a stale
    /// resourceVersion).
    fn actions(self, verb: &str) -> Vec<FaultAction> {
        match self {
            PlanClass::IntermediateState => vec![FaultAction::CrashAfterCommit],
            PlanClass::StaleState => vec![FaultAction::CrashWithStaleRestart],
            PlanClass::ApiError if matches!(verb, "update" | "patch") => {
                vec![FaultAction::Reject { code: 409 }, FaultAction::Reject { code: 500 }]
            }
            PlanClass::ApiError => vec![FaultAction::Reject { code: 500 }],
            PlanClass::TimeoutAfterCommit => vec![FaultAction::FailAfterCommit],
        }
    }
}

/// One fault at one point: a plan file holds one, as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Its class.
    pub class: PlanClass,
    /// The write it fires on (1 is the operator's first write).
    pub nth_write: usize,
    /// That write in the learning run, e.g. `create configmaps/default/app-child`.
    pub write: String,
    /// The fault.
    pub fault: Fault,
}

impl Plan {
    /// A one-line description: `intermediateState after write 2 (create configmaps/default/x)`.
    pub fn describe(&self) -> String {
        let what = match self.fault.action {
            FaultAction::CrashAfterCommit => "crash after".to_string(),
            FaultAction::CrashWithStaleRestart => "crash and a stale restart after".to_string(),
            FaultAction::FailAfterCommit => "504 after committing".to_string(),
            FaultAction::Reject { code } => format!("{code} instead of"),
        };
        format!("{what} write {} ({})", self.nth_write, self.write)
    }
}

/// The plans of `classes` for the writes of a learning trace of `user`: one per class
/// action and write that changed something.
pub fn plans(user: &str, learning: &[TracedRequest], classes: &[PlanClass]) -> Vec<Plan> {
    let writes: Vec<&TracedRequest> = learning.iter().filter(|r| r.is_write()).collect();
    let mut out = Vec::new();
    for class in classes {
        for (i, write) in writes.iter().enumerate().filter(|(_, w)| w.changed) {
            for action in class.actions(&write.verb) {
                out.push(Plan {
                    class: *class,
                    nth_write: i + 1,
                    write: describe_write(write),
                    fault: Fault { filter: RequestFilter::user(user).writes(), nth: i + 1, action },
                });
            }
        }
    }
    out
}

fn describe_write(r: &TracedRequest) -> String {
    let name = r.name.clone().or_else(|| r.generate_name.as_ref().map(|g| format!("{g}*"))).unwrap_or_default();
    let sub = r.subresource.as_ref().map(|s| format!("/{s}")).unwrap_or_default();
    format!("{} {}{sub}/{}/{name}", r.verb, r.resource, r.namespace.as_deref().unwrap_or("-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(verb: &str, name: &str, changed: bool) -> TracedRequest {
        TracedRequest {
            at_ms: 0,
            verb: verb.into(),
            group: String::new(),
            resource: "configmaps".into(),
            subresource: None,
            namespace: Some("default".into()),
            name: Some(name.into()),
            generate_name: None,
            code: 200,
            changed,
            fault: None,
        }
    }

    #[test]
    fn one_plan_per_action_and_write_that_changed_something_and_a_conflict_only_for_updates() {
        let trace = vec![
            write("get", "a", false),
            write("create", "a", true),
            write("patch", "a", false),
            write("patch", "a", true),
        ];
        let plans = plans("op", &trace, &[PlanClass::IntermediateState, PlanClass::ApiError]);
        let points: Vec<(PlanClass, usize)> = plans.iter().map(|p| (p.class, p.nth_write)).collect();
        assert_eq!(
            points,
            [
                (PlanClass::IntermediateState, 1),
                (PlanClass::IntermediateState, 3),
                (PlanClass::ApiError, 1),
                (PlanClass::ApiError, 3),
                (PlanClass::ApiError, 3)
            ]
        );
        assert_eq!(plans[1].describe(), "crash after write 3 (patch configmaps/default/a)");
        assert_eq!(plans[2].fault.action, FaultAction::Reject { code: 500 }, "no conflict on a create");
        assert_eq!(plans[3].fault.action, FaultAction::Reject { code: 409 });
        let back: Plan = serde_json::from_str(&serde_json::to_string(&plans[2]).unwrap()).unwrap();
        assert_eq!(back, plans[2]);
    }
}
