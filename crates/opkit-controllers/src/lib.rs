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

#![forbid(unsafe_code)]

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
pub(crate) mod job;
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
pub use node::SIMULATED_ANNOTATION as SIMULATED_NODE_ANNOTATION;
pub use opkit_kubelet::CONTAINER_ID_PREFIX as REAL_CONTAINER_ID_PREFIX;
pub use opkit_kubelet::{NetworkMode, PodIsolation, pod_isolation_mode, pod_network_mode};
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
    let kubelet_listener = cfg.cluster_signing.as_ref().filter(|_| cfg.enabled("kubelet")).and_then(|signing| {
        opkit_kubelet::KubeletListener::bind(&signing.ca_pem, &signing.ca_key_pem)
            .inspect_err(|e| tracing::error!(error = %e, "the kubelet server is not started"))
            .ok()
    });
    node::register(mgr, cfg, kubelet_listener.as_ref().map(|l| l.port()))?;
    scheduler::register(mgr, cfg)?;
    if cfg.enabled("kubelet") {
        let clients = opkit_kubelet::KubeletClients {
            kubelet: identity::client_for(mgr, cfg, "kubelet"),
            kube_proxy: identity::client_for(mgr, cfg, "kube-proxy"),
        };
        opkit_kubelet::register(mgr, &cfg.kubelet_config(), clients, kubelet_listener)?;
    }
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
