// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The Memcached operator, opkit's reference sample: the operator-sdk tutorial's
//! operator in Rust. [`api`] holds the `Memcached` type (`cache.example.com/v1alpha1`,
//! spec `size` 1..=5, status `nodes`), [`controller`] its reconciler, and
//! [`walkthrough`] drives the whole story against a cluster.
//!
//! `main.rs` runs the controllers in an opkit manager; the tests in `tests/` run them
//! against an in-process control plane (`opkit-testenv`).
//!
//! # Example
//! The walkthrough on an embedded control plane with simulated nodes and pods:
//! ```
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let env = opkit_testenv::TestEnv::start().await?;
//! let summary = memcached_operator::walkthrough::run(env.client(), "default", &|step: &str| println!("{step}")).await?;
//! assert_eq!(summary.nodes_at_5.len(), 5);
//! # Ok(())
//! # }
//! ```

pub mod api;
pub mod controller;
pub mod walkthrough;
