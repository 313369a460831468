//! Where a task runs (the Instance and its plan, phase and step) and how a step or task
//! went this time.

use kube::ResourceExt;
use kube::api::DynamicObject;

/// Where a task runs: the Instance and the plan, phase and step.
#[derive(Clone)]
pub(crate) struct StepMeta {
    pub(crate) instance: DynamicObject,
    pub(crate) plan: String,
    pub(crate) phase: String,
    pub(crate) step: String,
    pub(crate) uid: String,
}

impl StepMeta {
    pub(crate) fn name(&self) -> String {
        self.instance.name_any()
    }

    pub(crate) fn namespace(&self) -> String {
        self.instance.namespace().unwrap_or_else(|| "default".into())
    }
}

/// How a step (or task) went this time.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Done.
    Done,
    /// Not yet (waiting for health).
    Waiting(String),
    /// Failed; retried.
    Error(String),
    /// Failed for good.
    Fatal(String),
}
