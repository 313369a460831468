//! The error type of the workload controllers (StatefulSet, DaemonSet, Job, CronJob,
//! endpoints).

/// Errors of the workload controllers.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkloadError {
    /// The API server refused a request.
    #[error("api request failed: {0}")]
    Api(#[from] kube::Error),
    /// An object could not be (de)serialized.
    #[error("serialization failed: {0}")]
    Json(#[from] serde_json::Error),
    /// An object lacks something the controller needs (name, uid, ...).
    #[error("invalid object: {0}")]
    Invalid(String),
}
