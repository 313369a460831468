//! The integration tests of this crate, one module per file, built as one test binary:
//! one link instead of one per file keeps the test build's time and disk small.

mod common;
#[path = "../../opkit-testenv/tests/support/kubectl.rs"]
mod kubectl;

mod aggregation;
mod apiservices;
mod builtin_images;
mod cert_manager;
mod certificates;
mod deletion;
mod deployment;
mod disruption;
mod eviction;
mod flowcontrol;
mod gc;
mod identity;
mod kubelet_authorization;
mod load_balancers;
mod namespace;
mod pods;
mod real_pod_contained_streams;
mod real_pod_isolation;
mod real_pod_services;
mod real_pod_streams;
mod real_pod_volumes;
mod real_pods;
mod resourcequota;
mod streams;
mod volumes;
mod workloads;
