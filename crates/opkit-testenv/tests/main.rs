//! The integration tests of this crate, one module per file, built as one test binary:
//! one link instead of one per file keeps the test build's time and disk small.

#[path = "support/kubectl.rs"]
mod kubectl_support;

mod faults;
mod kubectl;
mod kubectl_apis;
mod kubectl_auth;
mod parallel;
mod python_client;
mod smoke;
mod wait;
