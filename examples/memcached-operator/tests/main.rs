//! The integration tests of this crate, one module per file, built as one test binary:
//! one link instead of one per file keeps the test build's time and disk small.

mod leader_election;
mod memcached_controller;
mod perturb;
mod rbac;
mod startup;
mod walkthrough;
