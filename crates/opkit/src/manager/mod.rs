//! The manager: owns the client, the shared cache and the metrics, runs controllers and
//! other runnables (leader-only or on every replica), serves metrics and health probes,
//! and shuts down gracefully.

mod flags;
mod preflight;
mod runnables;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;
use kube::api::ApiResource;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cache::{Cache, CacheScope};
use crate::health::{self, Check};
use crate::leader::{LeaderElectionConfig, LeaderElector};
use crate::metrics::Metrics;
use crate::sharding::{Coordinator, ShardingConfig, ShardingError};

pub(crate) use flags::parse_bind;
pub use flags::{FlagsError, ManagerArgs};
pub(crate) use preflight::WatchedKind;
pub(crate) use runnables::panic_message;
use runnables::{Groups, Runner};

/// A failure of a runnable.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RunnableError(pub String);

/// Why the manager stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The leader lease was lost; leader-only work was stopped at once.
    #[error("leader election lost")]
    LeaderElectionLost,
    /// A runnable returned an error (controller-runtime: any runnable's error stops the
    /// manager).
    #[error("{name} failed: {source}")]
    Runnable {
        /// The runnable.
        name: String,
        /// Its error.
        source: RunnableError,
    },
    /// A runnable panicked; the manager stops as if it had returned an error.
    #[error("{name} panicked: {message}")]
    Panicked {
        /// The runnable.
        name: String,
        /// The panic message.
        message: String,
    },
    /// Serving metrics or probes failed.
    #[error("serving {what}: {source}")]
    Serve {
        /// Metrics or probes.
        what: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// Waiting for signals failed.
    #[error("signal handling: {0}")]
    Signal(std::io::Error),
    /// The sharding configuration is not usable.
    #[error(transparent)]
    Sharding(#[from] ShardingError),
    /// The API server did not answer when the manager started.
    #[error(
        "cannot reach the API server{}: {cause}; is the cluster running? (a local one starts with `opkit cluster start`)",
        preflight::at(.server.as_deref())
    )]
    Unreachable {
        /// Its URL, if the manager knows it (see [`Manager::from_config`]).
        server: Option<String>,
        /// What failed.
        cause: String,
    },
    /// A kind a controller reconciles is not served: its CustomResourceDefinition is not
    /// installed (checked when the manager starts).
    #[error(
        "the API server{} does not serve {kind} ({}, resource {resource}), which controller {controller:?} reconciles: its CustomResourceDefinition is not installed (`make install` installs the project's CRDs)",
        preflight::at(.server.as_deref()),
        preflight::group_version(group, version)
    )]
    KindNotServed {
        /// The controller.
        controller: String,
        /// The kind.
        kind: String,
        /// Its API group (empty for the core group).
        group: String,
        /// Its version.
        version: String,
        /// Its resource (plural).
        resource: String,
        /// The API server's URL, if the manager knows it.
        server: Option<String>,
    },
    /// Asking the API server which resources it serves failed (when the manager started).
    #[error("asking the API server{} which resources {api_version} serves: {cause}", preflight::at(.server.as_deref()))]
    Discovery {
        /// The group/version asked about.
        api_version: String,
        /// The API server's URL, if the manager knows it.
        server: Option<String>,
        /// What failed.
        cause: String,
    },
}

/// A health check could not be added.
#[derive(Debug, thiserror::Error)]
pub enum HealthCheckError {
    /// A check of that name exists on that endpoint.
    #[error("a {endpoint} check named {name:?} already exists")]
    Duplicate {
        /// `healthz` or `readyz`.
        endpoint: &'static str,
        /// The name.
        name: String,
    },
    /// The probe server already runs with its checks; add checks before [`Manager::run`].
    #[error("the manager already serves its probes; add the {endpoint} check {name:?} before it runs")]
    AlreadyServing {
        /// `healthz` or `readyz`.
        endpoint: &'static str,
        /// The name.
        name: String,
    },
}

/// Something the manager starts and stops: controllers, webhook servers, your own loops.
///
/// As in controller-runtime: a runnable that returns `Ok` simply ends (the manager keeps
/// running); one that returns an error or panics stops the manager, whose `run` returns
/// that error ([`ManagerError::Runnable`], [`ManagerError::Panicked`]). Runnables added
/// while the manager runs are started at once (leader-only ones once this replica leads).
pub trait Runnable: Send + 'static {
    /// A name for logs and errors.
    fn name(&self) -> String;
    /// Whether it runs only on the elected leader (default true).
    fn needs_leader_election(&self) -> bool {
        true
    }
    /// Runs until `shutdown` is cancelled.
    fn start(self: Box<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), RunnableError>>;
}

/// How a manager runs.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// What the cache watches.
    pub cache: CacheScope,
    /// Where to serve `/metrics` (None: off).
    pub metrics_addr: Option<SocketAddr>,
    /// Serve `/metrics` over HTTPS, each request authenticated and authorized by the API
    /// server (None: plain HTTP, open to all).
    pub metrics_secure: Option<crate::metrics::secure::SecureServing>,
    /// Where to serve `/healthz` and `/readyz` (None: off).
    pub health_addr: Option<SocketAddr>,
    /// Leader election (None: every replica leads).
    pub leader_election: Option<LeaderElectionConfig>,
    /// Sharding: this replica is one shard of a ring (see [`crate::sharding`]). Its
    /// leader-only runnables run while it holds its shard Lease (in place of
    /// `leader_election`), its cache holds only its shard's objects of the sharded kinds,
    /// and it takes part in electing the ring's coordinator.
    pub sharding: Option<ShardingConfig>,
    /// How long in-flight work may take to finish on shutdown.
    pub graceful_shutdown_timeout: Duration,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        ManagerOptions {
            cache: CacheScope::default(),
            metrics_addr: None,
            metrics_secure: None,
            health_addr: None,
            leader_election: None,
            sharding: None,
            graceful_shutdown_timeout: Duration::from_secs(30),
        }
    }
}

/// Registered probe checks, served from [`Manager::run`] on.
#[derive(Default)]
struct Checks {
    healthz: Vec<(String, Check)>,
    readyz: Vec<(String, Check)>,
    serving: bool,
}

struct Inner {
    client: Client,
    /// The API server's URL, for errors (known when built with [`Manager::from_config`]).
    server: Option<String>,
    cache: Cache,
    metrics: Metrics,
    options: ManagerOptions,
    runnables: Mutex<Groups>,
    controller_names: Mutex<HashSet<String>>,
    /// The kinds controllers built before `run` watch, checked when it starts.
    watched: Mutex<Vec<WatchedKind>>,
    checks: Mutex<Checks>,
    bound: Mutex<(Option<SocketAddr>, Option<SocketAddr>)>,
    /// The sharding config with the kinds controllers registered
    /// ([`ShardingConfig::every_controller`]); the bool is set once `run` took it.
    sharding: Mutex<(Option<ShardingConfig>, bool)>,
}

/// Runs controllers against one cluster. Cheap to clone.
#[derive(Clone)]
pub struct Manager {
    inner: Arc<Inner>,
}

impl Manager {
    /// A manager over `client`. Errors about the API server do not name its URL; build
    /// with [`Manager::from_config`] for that.
    #[must_use]
    pub fn new(client: Client, options: ManagerOptions) -> Manager {
        Manager::with_server(client, None, options)
    }

    /// A manager over a client built from `config` (e.g. [`ManagerArgs::config`]); its
    /// errors about the API server name `config.cluster_url`.
    pub fn from_config(config: kube::Config, options: ManagerOptions) -> Result<Manager, kube::Error> {
        let server = config.cluster_url.to_string().trim_end_matches('/').to_string();
        Ok(Manager::with_server(Client::try_from(config)?, Some(server), options))
    }

    fn with_server(client: Client, server: Option<String>, options: ManagerOptions) -> Manager {
        let mut scope = options.cache.clone();
        if let Some(sharding) = &options.sharding {
            for kind in sharding.kinds() {
                scope = scope.requiring_label(&kind.resource, &sharding.shard_selector());
            }
        }
        let cache = Cache::new(client.clone(), scope);
        Manager {
            inner: Arc::new(Inner {
                client,
                server,
                cache,
                metrics: Metrics::new(),
                options: options.clone(),
                runnables: Mutex::new(Groups::default()),
                controller_names: Mutex::new(HashSet::new()),
                watched: Mutex::new(Vec::new()),
                checks: Mutex::new(Checks::default()),
                bound: Mutex::new((None, None)),
                sharding: Mutex::new((options.sharding.clone(), false)),
            }),
        }
    }

    /// A client.
    pub fn client(&self) -> Client {
        self.inner.client.clone()
    }
    /// The shared cache.
    pub fn cache(&self) -> &Cache {
        &self.inner.cache
    }
    /// The metrics registry.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }
    /// The options.
    pub fn options(&self) -> &ManagerOptions {
        &self.inner.options
    }
    /// The bound metrics and health addresses, once running (useful with port 0).
    pub fn bound_addresses(&self) -> (Option<SocketAddr>, Option<SocketAddr>) {
        *self.inner.bound.lock()
    }

    /// Adds a runnable. Before [`Manager::run`] it waits for the manager to start; while
    /// the manager runs it starts at once, or, if it needs leader election, as soon as
    /// this replica leads (controller-runtime's runnable groups).
    pub fn add(&self, r: impl Runnable) {
        self.inner.runnables.lock().add(Box::new(r));
    }

    /// Claims a controller name; false if a controller of that name was already built
    /// with this manager.
    pub(crate) fn claim_controller_name(&self, name: &str) -> bool {
        self.inner.controller_names.lock().insert(name.to_string())
    }

    /// With [`ShardingConfig::every_controller`], shards `resource`: a controller's `For`
    /// kind (`reconciled`) by key, an `Owns` kind by owner. Called before the informer
    /// is created, so that it lists only this shard's objects; a kind whose informer
    /// exists already stays unsharded (logged, and refused at build if reconciled).
    pub(crate) fn shard_controller_kind(&self, resource: &ApiResource, reconciled: bool) {
        let mut sharding = self.inner.sharding.lock();
        let (config, taken) = &mut *sharding;
        let (Some(cfg), false) = (config.as_mut().filter(|c| c.every_controller), *taken) else { return };
        if cfg.has_kind(resource) || self.inner.cache.require_label(resource, &cfg.shard_selector()) {
            cfg.add_kind(resource, reconciled, !reconciled);
        } else {
            tracing::warn!(ring = %cfg.ring, kind = %resource.kind,
                "the cache already watches this kind unsharded; build the controllers before reading the cache");
        }
    }

    /// Whether sharding places `resource`'s objects by key (false without sharding).
    pub(crate) fn shards_kind(&self, resource: &ApiResource) -> bool {
        self.inner.sharding.lock().0.as_ref().is_some_and(|c| c.shards_kind(resource))
    }

    /// Records the kinds a controller watches, to check when the manager starts that the
    /// API server serves them.
    pub(crate) fn add_watched_kinds(&self, kinds: impl IntoIterator<Item = WatchedKind>) {
        self.inner.watched.lock().extend(kinds);
    }

    /// Adds a liveness check served at `/healthz` (and `/healthz/<name>`), as
    /// controller-runtime's `AddHealthzCheck`. Add checks before [`Manager::run`].
    pub fn add_healthz_check(
        &self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Result<(), HealthCheckError> {
        self.add_check("healthz", name.into(), Arc::new(check))
    }

    /// Adds a readiness check served at `/readyz` (and `/readyz/<name>`), as
    /// controller-runtime's `AddReadyzCheck`. Add checks before [`Manager::run`]. The
    /// manager has a built-in `informers` readiness check (the cache has synced).
    pub fn add_readyz_check(
        &self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Result<(), HealthCheckError> {
        self.add_check("readyz", name.into(), Arc::new(check))
    }

    fn add_check(&self, endpoint: &'static str, name: String, check: Check) -> Result<(), HealthCheckError> {
        let mut checks = self.inner.checks.lock();
        if checks.serving {
            return Err(HealthCheckError::AlreadyServing { endpoint, name });
        }
        let reserved = endpoint == "readyz" && name == "informers";
        let list = if endpoint == "healthz" { &mut checks.healthz } else { &mut checks.readyz };
        if reserved || list.iter().any(|(n, _)| *n == name) {
            return Err(HealthCheckError::Duplicate { endpoint, name });
        }
        list.push((name, check));
        Ok(())
    }

    /// Runs until SIGTERM or Ctrl-C, then shuts down gracefully.
    pub async fn run(self) -> Result<(), ManagerError> {
        let shutdown = CancellationToken::new();
        let running = self.run_until(shutdown.clone());
        tokio::pin!(running);
        let signalled = tokio::select! {
            result = &mut running => return result,
            signalled = crate::signal::shutdown_requested() => signalled,
        };
        shutdown.cancel();
        let result = running.await;
        signalled.map_err(ManagerError::Signal)?;
        result
    }

    /// Runs until `shutdown` is cancelled, a runnable fails or panics, or leadership is
    /// lost; then stops every runnable and waits for them up to the graceful shutdown
    /// timeout.
    ///
    /// First it checks that the API server answers ([`ManagerError::Unreachable`]) and
    /// serves the kind of every controller built so far ([`ManagerError::KindNotServed`]:
    /// its CRD is not installed); a kind a controller only owns or watches that is not
    /// served yet is logged, and the controller waits for it as for any cache.
    pub async fn run_until(self, shutdown: CancellationToken) -> Result<(), ManagerError> {
        let watched = self.inner.watched.lock().clone();
        preflight::check_served(&self.inner.client, self.inner.server.as_deref(), &watched).await?;
        let all = shutdown.child_token();
        let mut opts = self.inner.options.clone();
        opts.sharding = {
            let mut sharding = self.inner.sharding.lock();
            sharding.1 = true;
            sharding.0.clone()
        };
        if let Some(sharding) = &opts.sharding {
            sharding.validate()?;
            if opts.leader_election.is_some() {
                tracing::warn!(ring = %sharding.ring, "sharding replaces leader election: leader-only work runs while this replica holds its shard lease");
            }
            let identity = crate::sharding::unique_identity(&sharding.shard_id);
            opts.leader_election = Some(sharding.lease_config(sharding.shard_lease_name(&sharding.shard_id), identity));
            self.add(Coordinator::new(self.client(), sharding.clone(), self.inner.metrics.clone()));
        }
        self.serve_metrics_and_probes(&opts, &all).await?;
        self.inner.cache.start(all.clone());
        let (failures, mut failed) = mpsc::unbounded_channel();
        let tracker = TaskTracker::new();
        let everywhere = Runner { token: all.clone(), tracker: tracker.clone(), failures: failures.clone() };
        self.inner.runnables.lock().everywhere.start(everywhere);
        let leader = Runner { token: all.child_token(), tracker: tracker.clone(), failures };
        let elector = match opts.leader_election.clone() {
            None => {
                self.inner.runnables.lock().leader.start(leader);
                None
            }
            Some(cfg) => Some(self.elect_then_lead(cfg, leader, &all)),
        };
        let mut result = Ok(());
        tokio::select! {
            _ = all.cancelled() => {},
            Some(e) = failed.recv() => {
                if matches!(e, ManagerError::LeaderElectionLost) {
                    tracing::error!("leader election lost; stopping");
                }
                result = Err(e);
            }
        }
        all.cancel();
        {
            let mut groups = self.inner.runnables.lock();
            groups.everywhere.stop();
            groups.leader.stop();
        }
        tracker.close();
        let drained = tokio::time::timeout(opts.graceful_shutdown_timeout, tracker.wait()).await;
        if drained.is_err() {
            tracing::warn!(timeout = ?opts.graceful_shutdown_timeout, "graceful shutdown timed out; abandoning in-flight work");
        }
        while let Ok(e) = failed.try_recv() {
            if result.is_ok() && !matches!(e, ManagerError::LeaderElectionLost) {
                result = Err(e);
            }
        }
        if let Some(elector) = elector {
            elector.stop_and_release().await;
        }
        result
    }

    async fn serve_metrics_and_probes(
        &self,
        opts: &ManagerOptions,
        all: &CancellationToken,
    ) -> Result<(), ManagerError> {
        if let Some(addr) = opts.metrics_addr {
            let metrics = self.inner.metrics.clone();
            let bound = match &opts.metrics_secure {
                Some(serving) => crate::metrics::secure::serve(addr, metrics, self.client(), serving, all.clone())
                    .await
                    .map_err(std::io::Error::other),
                None => health::serve_metrics(addr, metrics, all.clone()).await,
            }
            .map_err(|source| ManagerError::Serve { what: "metrics", source })?;
            self.inner.bound.lock().0 = Some(bound);
        }
        let (mut healthz, mut readyz) = {
            let mut checks = self.inner.checks.lock();
            checks.serving = true;
            (checks.healthz.clone(), checks.readyz.clone())
        };
        if let Some(addr) = opts.health_addr {
            let cache = self.inner.cache.clone();
            if healthz.is_empty() {
                healthz.push(("ping".into(), Arc::new(|| Ok(()))));
            }
            let synced: Check = Arc::new(move || {
                if cache.is_synced() { Ok(()) } else { Err(format!("caches not synced: {:?}", cache.unsynced())) }
            });
            readyz.insert(0, ("informers".into(), synced));
            let bound = health::serve_probes(addr, healthz, readyz, all.clone())
                .await
                .map_err(|source| ManagerError::Serve { what: "health probes", source })?;
            self.inner.bound.lock().1 = Some(bound);
        }
        Ok(())
    }

    /// Contends for leadership in the background; once leading, starts the leader-only
    /// group; if leadership is lost, stops that group at once and reports
    /// [`ManagerError::LeaderElectionLost`]. The elector runs on its own token: it stops
    /// (and, with `release_on_cancel`, releases the lease) only when [`RunningElector::
    /// stop_and_release`] is called, after the leader-only work has stopped.
    fn elect_then_lead(&self, cfg: LeaderElectionConfig, leader: Runner, all: &CancellationToken) -> RunningElector {
        let stop = CancellationToken::new();
        let (mut rx, task) =
            LeaderElector::new(self.client(), cfg, Some(self.inner.metrics.clone())).start(stop.clone());
        let mgr = self.clone();
        let all = all.clone();
        let tracker = leader.tracker.clone();
        tracker.spawn(async move {
            let leading = tokio::select! {
                _ = all.cancelled() => false,
                r = rx.wait_for(|l| *l) => r.is_ok(),
            };
            if !leading {
                return;
            }
            let (token, failures) = (leader.token.clone(), leader.failures.clone());
            mgr.inner.runnables.lock().leader.start(leader);
            tokio::select! {
                _ = all.cancelled() => {},
                _ = rx.wait_for(|l| !*l) => {
                    token.cancel();
                    let _ = failures.send(ManagerError::LeaderElectionLost);
                }
            }
        });
        RunningElector { stop, task }
    }
}

/// The leader elector of a running manager.
struct RunningElector {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl RunningElector {
    /// Stops contending and waits for the elector, so that a lease released on cancel is
    /// released before `run` returns: the process usually exits right after, which would
    /// drop the release half-way (controller-runtime releases in the same order).
    async fn stop_and_release(self) {
        self.stop.cancel();
        if let Err(e) = self.task.await {
            tracing::warn!(error = %e, "leader election task failed");
        }
    }
}
