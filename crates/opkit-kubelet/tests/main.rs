//! The integration tests of the kubelet, one module per file, built as one test binary:
//! one link instead of one per file keeps the test build's time and disk small. They run
//! a whole local cluster (opkit-testenv, with the controllers that start this kubelet).

mod common;
#[path = "../../opkit-testenv/tests/support/kubectl.rs"]
mod kubectl;

mod builtin_images;
mod ephemeral;
mod kubelet_authorization;
mod real_pod_contained_streams;
mod real_pod_isolation;
mod real_pod_services;
mod real_pod_streams;
mod real_pod_volumes;
mod real_pods;
mod streams;
