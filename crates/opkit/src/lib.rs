//! The opkit operator runtime: what controller-runtime gives Go operators, built on the
//! kube crates (client, watcher, reflector).
//!
//! - A [`Manager`] owns a `kube::Client`, a shared informer [`Cache`] (one watch per type
//!   and scope, however many controllers use it), [`metrics`], health probes and leader
//!   election, and runs controllers until SIGTERM.
//! - A [`Controller`] reconciles one kind (`For`), its children ([`Controller::owns`]) and
//!   related objects ([`Controller::watches`]), filtered by [`predicate`]s, with bounded
//!   concurrency, per-item backoff and a work queue that never reconciles one object twice
//!   at once.
//! - A [`Reconciler`] returns an [`Action`] (done, requeue, requeue after a delay) or a
//!   [`ReconcileError`] (retried with backoff, or terminal). Panics are caught and retried.
//! - Helpers for reconcilers: [`owner`] references, [`finalizer`]s, [`status`] conditions
//!   and updates, an [`events`] recorder and server-side [`apply`].
//! - A [`webhook`] server for admission and conversion.
//!
//! # Example
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
//! use opkit::{Action, Context, Controller, Manager, ManagerOptions, ReconcileResult};
//!
//! async fn reconcile(ctx: Context<Deployment>) -> ReconcileResult {
//!     let Some(deployment) = ctx.object else { return Ok(Action::done()) }; // deleted
//!     println!("reconciling {}", ctx.request);
//!     let _ = deployment;
//!     Ok(Action::requeue_after(Duration::from_secs(300)))
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! let mgr = Manager::new(client, ManagerOptions::default());
//! Controller::new(&mgr, reconcile).owns::<ReplicaSet>().max_concurrent_reconciles(2).build();
//! mgr.run().await?;
//! # Ok(())
//! # }
//! ```

pub mod apply;
pub mod cache;
pub mod controller;
pub mod events;
pub mod finalizer;
pub mod health;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod object;
pub mod owner;
pub mod predicate;
pub mod reconcile;
pub mod status;
pub mod webhook;

pub use cache::{Cache, CacheScope};
pub use controller::Controller;
pub use manager::{Manager, ManagerArgs, ManagerError, ManagerOptions, Runnable, RunnableError};
pub use object::Object;
pub use reconcile::{Action, Context, ReconcileError, ReconcileResult, Reconciler, Request};

/// Re-exported so operators use the same versions as the runtime.
pub use k8s_openapi;
/// Re-exported so operators use the same versions as the runtime.
pub use kube;
