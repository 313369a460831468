//! Helpers several controllers share, each in one place: pod state ([`pods`]), ownership and
//! controller references ([`ownership`]), workload label selectors ([`selectors`]), node
//! selection by node affinity and tolerations ([`scheduling`]), template hashes ([`hash`]),
//! ControllerRevisions ([`revision`]), event publishing ([`events`]) and the workload
//! controllers' error type ([`errors`]).

pub mod errors;
pub mod events;
pub mod hash;
pub mod ownership;
pub mod pods;
pub mod revision;
pub mod scheduling;
pub mod selectors;

/// The current time as a condition timestamp (serialised as kube writes it, to the second).
pub fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
}

pub use errors::WorkloadError;
