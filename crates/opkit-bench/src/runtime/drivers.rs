//! The two runtimes under comparison, each running the same trivial reconciler over the
//! ConfigMaps of the benchmark namespace: an `opkit` manager with one controller, and a
//! bare `kube::runtime::Controller`. Both record into a [`Recorder`] and nothing else.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::{controller as kube_controller, watcher};
use opkit::{Action, CacheScope, Context, Controller, Manager, ManagerOptions, ReconcileResult};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::cluster::NAMESPACE;
use super::recorder::Recorder;

/// How long a controller may take to stop after being cancelled.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// Which controller runtime drives the reconciler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// `opkit::Manager` + `opkit::Controller`.
    Opkit,
    /// A bare `kube::runtime::Controller`.
    Kube,
}

impl std::fmt::Display for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Runtime::Opkit => "opkit",
            Runtime::Kube => "kube::runtime",
        })
    }
}

/// A controller running in a task of this process.
pub struct Running {
    stop: CancellationToken,
    task: JoinHandle<Result<(), String>>,
}

impl Running {
    /// Cancels the controller and waits (bounded) for it to stop; returns its error, if
    /// it failed.
    pub async fn stop(self) -> Option<String> {
        self.stop.cancel();
        let abort = self.task.abort_handle();
        match tokio::time::timeout(STOP_TIMEOUT, self.task).await {
            Ok(Ok(Ok(()))) => None,
            Ok(Ok(Err(e))) => Some(e),
            Ok(Err(e)) => Some(format!("controller task failed: {e}")),
            Err(_) => {
                abort.abort();
                Some(format!("controller did not stop within {STOP_TIMEOUT:?}"))
            }
        }
    }
}

/// The opkit manager the benchmark (and the memory child process) runs: a cache scoped to
/// the benchmark namespace and one ConfigMap controller with `concurrency` workers.
pub fn opkit_manager(client: kube::Client, concurrency: usize, rec: Arc<Recorder>) -> Manager {
    let opts = ManagerOptions {
        cache: CacheScope::namespaces(vec![NAMESPACE.to_string()]),
        graceful_shutdown_timeout: STOP_TIMEOUT,
        ..ManagerOptions::default()
    };
    let mgr = Manager::new(client, opts);
    let reconcile = move |ctx: Context<ConfigMap>| {
        let rec = rec.clone();
        async move {
            rec.record(&ctx.request.name);
            ReconcileResult::Ok(Action::done())
        }
    };
    Controller::new(&mgr, reconcile)
        .max_concurrent_reconciles(concurrency)
        .build()
        .expect("the only controller of a fresh manager has a unique name");
    mgr
}

async fn kube_reconcile(obj: Arc<ConfigMap>, rec: Arc<Recorder>) -> Result<kube_controller::Action, Infallible> {
    rec.record(obj.metadata.name.as_deref().unwrap_or_default());
    Ok(kube_controller::Action::await_change())
}

fn kube_error_policy(_obj: Arc<ConfigMap>, _err: &Infallible, _rec: Arc<Recorder>) -> kube_controller::Action {
    kube_controller::Action::requeue(Duration::from_secs(1))
}

/// Starts `runtime`'s controller over the benchmark namespace with `concurrency`
/// concurrent reconciles.
pub fn start(runtime: Runtime, client: kube::Client, concurrency: usize, rec: Arc<Recorder>) -> Running {
    let stop = CancellationToken::new();
    let token = stop.clone();
    let task = match runtime {
        Runtime::Opkit => {
            let mgr = opkit_manager(client, concurrency, rec);
            tokio::spawn(async move { mgr.run_until(token).await.map_err(|e| format!("opkit manager: {e}")) })
        }
        Runtime::Kube => {
            let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
            let cfg = kube_controller::Config::default().concurrency(u16::try_from(concurrency).unwrap_or(u16::MAX));
            let stream = kube::runtime::Controller::new(api, watcher::Config::default()).with_config(cfg).run(
                kube_reconcile,
                kube_error_policy,
                rec,
            );
            tokio::spawn(async move {
                tokio::select! {
                    _ = token.cancelled() => {},
                    _ = stream.for_each(|_| futures::future::ready(())) => {},
                }
                Ok(())
            })
        }
    };
    Running { stop, task }
}
