//! The integration tests of this crate, one module per file, built as one test binary:
//! one link instead of one per file keeps the test build's time and disk small.

mod common;

mod builder;
mod cache;
mod cache_controls;
mod controller;
mod discovery;
mod dynamic;
mod errors;
mod manager;
mod metrics_secure;
mod perturb;
mod read_your_writes;
mod sharding;
mod span;
