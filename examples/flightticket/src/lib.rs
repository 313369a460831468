// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The flightticket operator: its API types ([`api`]) and controllers ([`controller`]).
//!
//! `main.rs` runs them in an opkit manager; the tests in `tests/` run them against an
//! in-process control plane (`opkit-testenv`).
//!
//! # Example
//! The CustomResourceDefinitions this operator serves (`opkit generate` writes them to
//! config/crd/bases):
//! ```
//! for crd in flightticket::api::crds() {
//!     assert_eq!(crd.metadata.name.as_deref(), Some("flighttickets.flights.com"));
//! }
//! ```

pub mod api;
pub mod controller;
pub mod webhook;
