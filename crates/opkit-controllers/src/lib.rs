//! The controllers that make opkit's control plane behave like a whole cluster, the way
//! kube-controller-manager, kube-scheduler and kubelets (simulated, as kwok does) do:
//! namespace lifecycle, garbage collection, workloads (Deployments, ReplicaSets,
//! StatefulSets, DaemonSets, Jobs, CronJobs), Service endpoints, load-balancer addresses
//! for Services of type LoadBalancer (as kind's cloud provider or k3s's ServiceLB), the
//! availability of aggregated APIServices, local-path volumes for claims, disruption
//! budgets' status, resource quotas' usage, FlowSchemas' `Dangling` condition, aggregated ClusterRoles' rules,
//! the `kube-root-ca.crt` ConfigMap in every namespace, legacy ServiceAccount token
//! Secrets, client certificates for approved CertificateSigningRequests, a cert-manager
//! stand-in (opt-in, [`certmanager`]), and simulated nodes whose pods are scheduled, started and made Ready — as real processes when their images are loaded into the image store.
//!
//! They are ordinary operators written with the [`opkit`] runtime. `opkit cluster start`
//! and `opkit-testenv` run them by default.
//!
//! # Example
//! ```no_run
//! # async fn run(client: kube::Client) -> Result<(), opkit::ManagerError> {
//! use opkit::{Manager, ManagerOptions};
//! use opkit_controllers::{ControllersConfig, register};
//!
//! let mgr = Manager::new(client, ManagerOptions::default());
//! register(&mgr, &ControllersConfig::default()).expect("each controller registered once");
//! mgr.run().await
//! # }
//! ```

pub(crate) mod apiservice;
pub mod certmanager;
pub(crate) mod clusterrole_aggregation;
pub(crate) mod common;
pub mod config;
pub(crate) mod cronjob;
pub(crate) mod csr_signing;
pub(crate) mod daemonset;
pub(crate) mod deployment;
pub(crate) mod disruption;
pub(crate) mod endpoints;
pub(crate) mod flowcontrol;
pub(crate) mod garbage_collector;
pub mod identity;
pub mod images;
pub(crate) mod job;
pub(crate) mod kubelet;
pub(crate) mod namespace;
pub(crate) mod node;
pub(crate) mod replicaset;
pub(crate) mod resourcequota;
pub(crate) mod root_ca_publisher;
pub(crate) mod scheduler;
pub(crate) mod service_lb;
pub(crate) mod serviceaccount_token;
pub(crate) mod statefulset;
pub(crate) mod volume;

pub use config::ControllersConfig;
pub use kubelet::network::NetworkMode;
pub use kubelet::runtime::CONTAINER_ID_PREFIX as REAL_CONTAINER_ID_PREFIX;
pub use kubelet::runtime::container::PodIsolation;
#[cfg(unix)]
pub use kubelet::server::{exec, port_forward};
pub use node::SIMULATED_ANNOTATION as SIMULATED_NODE_ANNOTATION;
pub use service_lb::{LoadBalancerPool, PoolError};

use opkit::Manager;

/// Every built-in controller, by the name used to switch it off.
pub const ALL: &[&str] = &[
    "namespace",
    "serviceaccount",
    "serviceaccount-token",
    "root-ca-cert-publisher",
    "garbagecollector",
    "deployment",
    "replicaset",
    "statefulset",
    "daemonset",
    "job",
    "cronjob",
    "endpoints",
    "service-lb",
    "apiservice",
    "persistentvolume",
    "disruption",
    "resourcequota",
    "flowcontrol",
    "clusterrole-aggregation",
    "csrsigning",
    "nodes",
    "scheduler",
    "kubelet",
];

/// How the kubelet networks real pods on this machine when `requested` is asked for
/// (`None`: namespaces where they can be made): the mode, and why namespaces are not
/// used when they were wanted and are not. Probes by making and removing a sandbox.
pub fn pod_network_mode(requested: Option<NetworkMode>) -> (NetworkMode, Option<String>) {
    let networks = kubelet::network::PodNetworks::new(requested, std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    (networks.mode(), networks.fallback_reason().map(str::to_string))
}

/// How the kubelet isolates real pods' containers on this machine when `requested` is
/// asked for (`None`: contained where the host can): the mode, and why containers are not
/// contained when that was wanted and is not possible (for `cluster start` and `status`).
pub fn pod_isolation_mode(requested: Option<PodIsolation>) -> (PodIsolation, Option<String>) {
    let reason = match requested {
        Some(PodIsolation::Host) => None,
        None | Some(PodIsolation::Contained) => kubelet::runtime::container::containment_available().err(),
    };
    (kubelet::runtime::isolation(requested), reason)
}

/// Registers every enabled controller with `mgr`. Fails if one of them is already
/// registered with it.
pub fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    namespace::register(mgr, cfg)?;
    serviceaccount_token::register(mgr, cfg)?;
    root_ca_publisher::register(mgr, cfg)?;
    garbage_collector::register(mgr, cfg);
    deployment::register(mgr, cfg)?;
    replicaset::register(mgr, cfg)?;
    statefulset::register(mgr, cfg)?;
    daemonset::register(mgr, cfg)?;
    job::register(mgr, cfg)?;
    cronjob::register(mgr, cfg)?;
    endpoints::register(mgr, cfg)?;
    service_lb::register(mgr, cfg)?;
    apiservice::register(mgr, cfg)?;
    volume::register(mgr, cfg)?;
    disruption::register(mgr, cfg)?;
    resourcequota::register(mgr, cfg)?;
    flowcontrol::register(mgr, cfg)?;
    clusterrole_aggregation::register(mgr, cfg)?;
    csr_signing::register(mgr, cfg)?;
    certmanager::register(mgr, cfg)?;
    let kubelet_listener = if cfg.enabled("kubelet") {
        kubelet::server::KubeletListener::bind(cfg).unwrap_or_else(|e| {
            tracing::error!(error = %e, "the kubelet server is not started");
            None
        })
    } else {
        None
    };
    node::register(mgr, cfg, kubelet_listener.as_ref().map(|l| l.port()))?;
    scheduler::register(mgr, cfg)?;
    kubelet::register(mgr, cfg, kubelet_listener)?;
    Ok(())
}

/// Runs every enabled controller against `client` in a background task until `stop` is
/// cancelled: what `opkit cluster start` and `opkit-testenv` do next to their server.
pub fn spawn(
    client: kube::Client,
    cfg: &ControllersConfig,
    stop: tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    // The shared cache reads as kube-controller-manager does; each controller writes as
    // itself (see `identity`).
    let admin = client.clone();
    let client = match &cfg.identities {
        Some(admin) => {
            let manager = identity::Identity { user: identity::CONTROLLER_MANAGER, groups: &[] };
            identity::client_as(admin, manager).unwrap_or(client)
        }
        None => client,
    };
    let mgr = Manager::new(client, opkit::ManagerOptions::default());
    let cfg = cfg.clone();
    tokio::spawn(async move {
        // The cert-manager stand-in's kinds are served before its informers start.
        if cfg.cert_manager
            && let Err(e) = certmanager::install(admin).await
        {
            tracing::error!(error = %e, "the cert-manager stand-in's kinds could not be installed");
        }
        if let Err(e) = register(&mgr, &cfg) {
            tracing::error!(error = %e, "cluster controllers not started");
            return;
        }
        if let Err(e) = mgr.run_until(stop).await {
            tracing::error!(error = %e, "cluster controllers stopped");
        }
    })
}
