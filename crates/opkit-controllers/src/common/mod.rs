//! Helpers several controllers share, each in one place: pod state ([`pods`]), ownership and
//! controller references ([`ownership`]), workload label selectors ([`selectors`]), node
//! selection by node affinity and tolerations ([`scheduling`]), template hashes ([`hash`]),
//! ControllerRevisions ([`revision`]), event publishing ([`events`]) and the workload
//! controllers' error type ([`errors`]).

pub(crate) mod errors;
pub(crate) mod events;
pub(crate) mod hash;
pub(crate) mod ownership;
pub(crate) mod pods;
pub(crate) mod revision;
pub(crate) mod scheduling;
pub(crate) mod selectors;

/// The current time as a condition timestamp (serialised as kube writes it, to the second).
pub(crate) fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
}

pub(crate) use errors::WorkloadError;
