//! Helpers shared by the controller test suites: an aggregated API server stand-in
//! (`backend.rs`), and the suite helpers (error type, waiting on a condition, kubectl)
//! that opkit-testenv's `tests/support/suite.rs` holds for opkit-controllers and
//! opkit-kubelet alike.

#![allow(dead_code)]

pub(crate) mod backend;

#[path = "../../../opkit-testenv/tests/support/suite.rs"]
mod suite;
pub(crate) use suite::{Error, WAIT, kubectl, wait};
