//! Plan status as KUDO keeps it in `Instance.status.planStatus` (one entry per plan, with
//! its phases and steps, KUDO's states, the execution's UID and the last update time),
//! the plan history opkit adds (an Instance annotation), and `kubectl kudo plan status`'s
//! tree.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::package::{Ordering, Plan};

/// KUDO's execution states.
pub mod state {
    /// The plan never ran.
    pub const NEVER_RUN: &str = "NEVER_RUN";
    /// Waiting for its turn.
    pub const PENDING: &str = "PENDING";
    /// Running.
    pub const IN_PROGRESS: &str = "IN_PROGRESS";
    /// Done.
    pub const COMPLETE: &str = "COMPLETE";
    /// Failed; retried (opkit: also a cancelled plan, whose message says so).
    pub const ERROR: &str = "ERROR";
    /// Failed for good.
    pub const FATAL_ERROR: &str = "FATAL_ERROR";

    /// Whether `s` is a final state (nothing runs).
    pub fn is_terminal(s: &str) -> bool {
        matches!(s, COMPLETE | ERROR | FATAL_ERROR | NEVER_RUN | "")
    }
}

/// The annotation holding an Instance's plan history (opkit; a JSON list, newest last).
pub const HISTORY_ANNOTATION: &str = "kudo.dev/plan-history";
/// How many runs the history keeps.
pub(crate) const HISTORY_LIMIT: usize = 20;

/// A step's status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepStatus {
    /// The step.
    pub name: String,
    /// Its state.
    #[serde(default)]
    pub status: String,
    /// Why (errors, what it waits for).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// A phase's status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseStatus {
    /// The phase.
    pub name: String,
    /// Its state.
    #[serde(default)]
    pub status: String,
    /// Why.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Its steps.
    #[serde(default)]
    pub steps: Vec<StepStatus>,
}

/// A plan's status (`status.planStatus[NAME]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanStatus {
    /// The plan.
    pub name: String,
    /// Its state.
    #[serde(default)]
    pub status: String,
    /// The execution's UID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Why.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When it last changed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated_timestamp: Option<String>,
    /// Its phases.
    #[serde(default)]
    pub phases: Vec<PhaseStatus>,
}

impl PlanStatus {
    /// A plan's status before it ever ran (every part NEVER_RUN).
    pub fn never_run(name: &str, plan: &Plan) -> PlanStatus {
        PlanStatus::with_state(name, plan, state::NEVER_RUN, "")
    }

    /// A new execution `uid` of `plan`: the plan IN_PROGRESS, every phase and step PENDING.
    pub fn started(name: &str, plan: &Plan, uid: &str) -> PlanStatus {
        let mut s = PlanStatus::with_state(name, plan, state::PENDING, uid);
        s.status = state::IN_PROGRESS.to_string();
        s.touch();
        s
    }

    fn with_state(name: &str, plan: &Plan, st: &str, uid: &str) -> PlanStatus {
        PlanStatus {
            name: name.to_string(),
            status: st.to_string(),
            uid: uid.to_string(),
            message: String::new(),
            last_updated_timestamp: None,
            phases: plan
                .phases
                .iter()
                .map(|ph| PhaseStatus {
                    name: ph.name.clone(),
                    status: st.to_string(),
                    message: String::new(),
                    steps: ph
                        .steps
                        .iter()
                        .map(|s| StepStatus { name: s.name.clone(), status: st.to_string(), message: String::new() })
                        .collect(),
                })
                .collect(),
        }
    }

    /// Sets the last update time to now.
    pub fn touch(&mut self) {
        self.last_updated_timestamp = Some(now());
    }

    /// Whether the execution is running (IN_PROGRESS or PENDING).
    pub fn is_running(&self) -> bool {
        !state::is_terminal(&self.status)
    }

    /// Ends a running execution in `st` with `message`: the plan and its unfinished phases
    /// and steps (cancel).
    pub fn finish_unfinished(&mut self, st: &str, message: &str) {
        for phase in &mut self.phases {
            for step in &mut phase.steps {
                if !state::is_terminal(&step.status) || step.status == state::ERROR {
                    step.status = st.to_string();
                    step.message = message.to_string();
                }
            }
            if phase.status != state::COMPLETE {
                phase.status = st.to_string();
            }
        }
        self.status = st.to_string();
        self.message = message.to_string();
        self.touch();
    }

    /// Retries a failed execution: steps and phases in ERROR or FATAL_ERROR go back to
    /// PENDING, completed ones stay, and the plan is IN_PROGRESS again (same UID).
    pub fn retry(&mut self) {
        for phase in &mut self.phases {
            for step in &mut phase.steps {
                if matches!(step.status.as_str(), state::ERROR | state::FATAL_ERROR) {
                    step.status = state::PENDING.to_string();
                    step.message.clear();
                }
            }
            if phase.status != state::COMPLETE {
                phase.status = state::PENDING.to_string();
                phase.message.clear();
            }
        }
        self.status = state::IN_PROGRESS.to_string();
        self.message.clear();
        self.touch();
    }
}

/// One run of a plan, as the history keeps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// The plan.
    pub plan: String,
    /// The execution's UID.
    pub uid: String,
    /// Its final state.
    pub status: String,
    /// Why it started (`instance created`, `parameter REPLICAS changed`, ...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// When it started.
    pub started: String,
    /// When it ended.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub finished: String,
    /// The final message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Reads the history annotation (empty when absent or not valid).
pub fn history_of(annotations: &BTreeMap<String, String>) -> Vec<HistoryEntry> {
    annotations.get(HISTORY_ANNOTATION).and_then(|h| serde_json::from_str(h).ok()).unwrap_or_default()
}

/// The history with `entry` added or updated (by UID), at most [`HISTORY_LIMIT`] long.
pub(crate) fn record(mut history: Vec<HistoryEntry>, entry: HistoryEntry) -> Vec<HistoryEntry> {
    match history.iter_mut().find(|h| h.uid == entry.uid) {
        Some(existing) => *existing = entry,
        None => history.push(entry),
    }
    let excess = history.len().saturating_sub(HISTORY_LIMIT);
    history.drain(..excess);
    history
}

/// Now, as RFC 3339 in UTC to the second.
pub(crate) fn now() -> String {
    opkit::status::now().0.to_string()
}

fn strategy(s: Ordering) -> &'static str {
    match s {
        Ordering::Serial => "serial",
        Ordering::Parallel => "parallel",
    }
}

/// `kubectl kudo plan status`'s tree for an Instance of operator version `ov_name` with
/// `plans` (from the OperatorVersion) and `statuses` (from the Instance).
pub fn status_tree(
    instance: &str,
    namespace: &str,
    ov_name: &str,
    active: &str,
    plans: &BTreeMap<String, Plan>,
    statuses: &BTreeMap<String, PlanStatus>,
) -> String {
    let mut out = format!("Plan(s) for {instance:?} in namespace {namespace:?}:\n.\n");
    let active = if active.is_empty() { "<none>".to_string() } else { format!("{active:?}") };
    let _ = writeln!(out, "└── {instance} (Operator-Version: {ov_name:?} Active-Plan: {active})");
    let count = plans.len();
    for (i, (name, plan)) in plans.iter().enumerate() {
        let last = i + 1 == count;
        let (branch, indent) = if last { ("└── ", "    ") } else { ("├── ", "│   ") };
        let status = statuses.get(name);
        let state_of = |s: Option<&str>| match s {
            Some(s) if !s.is_empty() && s != state::NEVER_RUN => s.to_string(),
            _ => "NOT ACTIVE".to_string(),
        };
        let mut line = format!(
            "    {branch}Plan {name} ({} strategy) [{}]",
            strategy(plan.strategy),
            state_of(status.map(|s| s.status.as_str()))
        );
        if let Some(ts) = status.and_then(|s| s.last_updated_timestamp.as_deref()) {
            let _ = write!(line, ", last updated {}", ts.replace('T', " ").trim_end_matches('Z'));
        }
        if let Some(m) = status.map(|s| s.message.as_str()).filter(|m| !m.is_empty()) {
            let _ = write!(line, " ({m})");
        }
        out.push_str(&line);
        out.push('\n');
        let phases = plan.phases.len();
        for (j, phase) in plan.phases.iter().enumerate() {
            let last_phase = j + 1 == phases;
            let (pb, pi) = if last_phase { ("└── ", "    ") } else { ("├── ", "│   ") };
            let ps = status.and_then(|s| s.phases.iter().find(|p| p.name == phase.name));
            let _ = writeln!(
                out,
                "    {indent}{pb}Phase {} ({} strategy) [{}]",
                phase.name,
                strategy(phase.strategy),
                state_of(ps.map(|p| p.status.as_str()))
            );
            let steps = phase.steps.len();
            for (k, step) in phase.steps.iter().enumerate() {
                let sb = if k + 1 == steps { "└── " } else { "├── " };
                let ss = ps.and_then(|p| p.steps.iter().find(|s| s.name == step.name));
                let mut line =
                    format!("    {indent}{pi}{sb}Step {} [{}]", step.name, state_of(ss.map(|s| s.status.as_str())));
                if let Some(m) = ss.map(|s| s.message.as_str()).filter(|m| !m.is_empty()) {
                    let _ = write!(line, " ({m})");
                }
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::package::{Phase, Step};

    fn plan() -> Plan {
        Plan {
            strategy: Ordering::Serial,
            phases: vec![Phase {
                name: "main".into(),
                strategy: Ordering::Parallel,
                steps: vec![Step { name: "everything".into(), tasks: vec!["app".into()] }],
            }],
        }
    }

    #[test]
    fn prints_kudos_tree() {
        let plans = BTreeMap::from([("deploy".to_string(), plan()), ("update".to_string(), plan())]);
        let mut deploy = PlanStatus::started("deploy", &plan(), "u1");
        deploy.last_updated_timestamp = Some("2019-10-17T01:01:01Z".into());
        deploy.phases[0].steps[0].message = "waiting".into();
        let statuses = BTreeMap::from([("deploy".to_string(), deploy)]);
        let tree = status_tree("fo", "default", "fo-0.2.0", "deploy", &plans, &statuses);
        assert_eq!(
            tree,
            "Plan(s) for \"fo\" in namespace \"default\":\n.\n└── fo (Operator-Version: \"fo-0.2.0\" Active-Plan: \"deploy\")\n    ├── Plan deploy (serial strategy) [IN_PROGRESS], last updated 2019-10-17 01:01:01\n    │   └── Phase main (parallel strategy) [PENDING]\n    │       └── Step everything [PENDING] (waiting)\n    └── Plan update (serial strategy) [NOT ACTIVE]\n        └── Phase main (parallel strategy) [NOT ACTIVE]\n            └── Step everything [NOT ACTIVE]\n"
        );
    }

    #[test]
    fn cancel_then_retry_keeps_completed_steps() {
        let mut p = Plan::default();
        p.phases.push(Phase {
            name: "a".into(),
            strategy: Ordering::Serial,
            steps: vec![Step { name: "one".into(), tasks: vec![] }, Step { name: "two".into(), tasks: vec![] }],
        });
        let mut s = PlanStatus::started("deploy", &p, "u");
        s.phases[0].steps[0].status = state::COMPLETE.into();
        s.phases[0].steps[1].status = state::IN_PROGRESS.into();
        s.finish_unfinished(state::ERROR, "cancelled");
        assert_eq!(s.status, state::ERROR);
        assert_eq!(s.phases[0].steps[1].status, state::ERROR);
        s.retry();
        assert_eq!(s.phases[0].steps[0].status, state::COMPLETE);
        assert_eq!(s.phases[0].steps[1].status, state::PENDING);
        assert!(s.is_running());
    }
}
