//! Helpers shared by the kubelet's test suites: real pods (`real_pods.rs`), and the suite helpers
//! (error type, waiting on a condition, kubectl) that opkit-testenv's
//! `tests/support/suite.rs` holds for opkit-controllers and opkit-kubelet alike.

#![allow(dead_code)]

pub(crate) mod real_pods;

#[path = "../../../opkit-testenv/tests/support/suite.rs"]
mod suite;
pub(crate) use suite::{Error, WAIT, kubectl, wait};
