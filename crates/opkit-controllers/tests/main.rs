//! The integration tests of this crate, one module per file, built as one test binary:
//! one link instead of one per file keeps the test build's time and disk small.

mod common;
#[path = "../../opkit-testenv/tests/support/kubectl.rs"]
mod kubectl;

mod aggregation;
mod apiservices;
mod cert_manager;
mod certificates;
mod deletion;
mod deployment;
mod disruption;
mod eviction;
mod flowcontrol;
mod gc;
mod identity;
mod load_balancers;
mod namespace;
mod pods;
mod resourcequota;
mod volumes;
mod workloads;
