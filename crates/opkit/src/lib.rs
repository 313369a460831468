//! The opkit operator runtime: what controller-runtime gives Go operators, built on the
//! kube crates (client, watcher, reflector).
//!
//! - A [`Manager`] owns a `kube::Client`, a shared informer [`Cache`] (one watch per type
//!   and scope, however many controllers use it), [`metrics`], health probes and leader
//!   election, and runs controllers until SIGTERM.
//! - A [`Controller`] reconciles one kind (`For`), its children ([`Controller::owns`]),
//!   related objects ([`Controller::watches`]) and external triggers
//!   ([`Controller::watches_channel`]), filtered by [`predicate`]s, with bounded
//!   concurrency, per-item backoff and a work queue that never reconciles one object twice
//!   at once. Its workers start only once the caches of all its sources have synced.
//!   Kinds known only at run time are reconciled as `DynamicObject`s
//!   ([`Controller::new_dynamic`]).
//! - A [`Reconciler`] gets a [`Context`] (the cached object, a client, the cache, an event
//!   recorder and the operator's own state) inside a tracing span, and returns an
//!   [`Action`] (done, requeue, requeue after a delay) or a [`ReconcileError`] (retried
//!   with backoff, or terminal). Panics are caught and retried.
//! - Reconciles read their own writes: the next reconcile of an object waits (bounded)
//!   for the cache to show what the previous one wrote ([`read_your_writes`], on by
//!   default). The cache drops managedFields, and takes per-kind selectors, namespaces,
//!   transforms, budgets and metadata-only watches ([`cache::CacheScope`]).
//! - [`Runnable`]s run on every replica or only on the leader; one that fails or panics
//!   stops the manager with its error.
//! - Helpers for reconcilers: [`owner`] references, [`finalizer`]s, [`status`] conditions
//!   and updates, an [`events`] recorder and server-side [`apply`].
//! - A [`webhook`] server for admission and conversion, and [`crd`] helpers.
//! - A lazy, shared kind ↔ resource map ([`discovery::RestMapper`]) for operators that
//!   learn their kinds at run time, and what the operators driven by an operator-sdk
//!   `watches.yaml` share ([`watches_file`]).
//! - Saying clearly when the operator cannot work: at start the manager checks that the
//!   API server answers and serves each controller's kind ([`ManagerError::Unreachable`],
//!   [`ManagerError::KindNotServed`]); a failed reconcile is logged at ERROR as
//!   controller-runtime's "Reconciler error" with its backoff; [`logging::init`] sets up
//!   the log (stderr, `RUST_LOG`, colour only on a terminal).
//!
//! # Example
//! A controller that stamps every ConfigMap with a label, run against an in-process
//! control plane (`opkit-testenv`); in an operator, the manager is built with
//! [`Manager::from_config`] from [`ManagerArgs::config`] (`--kubeconfig`, `--context`) and
//! runs with [`Manager::run`] until SIGTERM.
//! ```
//! use std::collections::BTreeMap;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, Patch, PatchParams, PostParams};
//! use opkit::{Action, Context, Controller, Manager, ManagerOptions, ReconcileResult};
//!
//! async fn reconcile(ctx: Context<ConfigMap>) -> ReconcileResult {
//!     let Some(cm) = ctx.object.as_ref() else { return Ok(Action::done()) }; // deleted
//!     if cm.metadata.labels.as_ref().is_some_and(|l| l.contains_key("reconciled")) {
//!         return Ok(Action::done());
//!     }
//!     let patch = serde_json::json!({"metadata": {"labels": {"reconciled": "yes"}}});
//!     ctx.api().patch(&ctx.request.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
//!     Ok(Action::done())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let env = opkit_testenv::TestEnv::builder().without_controllers().start().await?;
//! let mgr = Manager::new(env.client(), ManagerOptions::default());
//! Controller::new(&mgr, reconcile).build()?;
//! let stop = tokio_util::sync::CancellationToken::new();
//! let running = tokio::spawn(mgr.run_until(stop.clone()));
//!
//! let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! cms.create(&PostParams::default(), &cm).await?;
//! let labelled = kube::runtime::wait::await_condition(cms, "settings", |cm: Option<&ConfigMap>| {
//!     cm.and_then(|c| c.metadata.labels.as_ref()).is_some_and(|l: &BTreeMap<_, _>| l.contains_key("reconciled"))
//! });
//! tokio::time::timeout(std::time::Duration::from_secs(20), labelled).await??;
//! stop.cancel();
//! running.await??;
//! # Ok(())
//! # }
//! ```

pub mod apply;
pub mod cache;
pub mod controller;
pub mod crd;
pub mod discovery;
mod error_text;
pub mod events;
pub mod finalizer;
pub mod health;
mod hostname;
pub mod leader;
pub mod logging;
pub mod manager;
pub mod metrics;
pub mod object;
pub mod owner;
pub mod predicate;
pub mod read_your_writes;
pub mod reconcile;
pub mod sharding;
pub mod signal;
pub mod status;
pub mod watches_file;
pub mod webhook;

pub use cache::{Cache, CacheScope};
pub use controller::{BuildError, Controller, ControllerHandle};
pub use manager::{HealthCheckError, Manager, ManagerArgs, ManagerError, ManagerOptions, Runnable, RunnableError};
pub use object::{Kind, Object};
pub use read_your_writes::ReadYourWrites;
pub use reconcile::{Action, Context, ReconcileError, ReconcileResult, Reconciler, Request};

/// Re-exported so operators use the same versions as the runtime.
pub use k8s_openapi;
/// Re-exported so operators use the same versions as the runtime.
pub use kube;
