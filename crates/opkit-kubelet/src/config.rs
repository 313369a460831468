//! How a kubelet behaves: the delays of simulated pods, and where and how real pods run.

use std::path::PathBuf;
use std::time::Duration;

use crate::network::NetworkMode;
use crate::runtime::container::PodIsolation;

/// Settings of the kubelets (the part of the cluster controllers' settings they read).
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// How long a scheduled pod stays Pending before its containers start.
    pub pod_start_delay: Duration,
    /// How long a started pod takes to become Ready.
    pub pod_ready_delay: Duration,
    /// How long a run-to-completion pod runs before it succeeds (override per pod with
    /// the `opkit.dev/run-duration` annotation).
    pub job_run_time: Duration,
    /// The image store (see [`crate::images`]): a pod whose image is loaded there runs as
    /// a real process; `None` simulates every pod.
    pub images: Option<PathBuf>,
    /// Where real pods get their directories; `None` uses a directory under the system's
    /// temporary one.
    pub pod_root: Option<PathBuf>,
    /// How real pods are networked; `None` picks network namespaces where this machine
    /// can make them, else the host network.
    pub pod_network: Option<NetworkMode>,
    /// How real pods' containers are isolated; `None` contains them where this host can.
    pub pod_isolation: Option<PodIsolation>,
    /// The first CrashLoopBackOff delay of real containers.
    pub crash_loop_backoff: Duration,
    /// The API server's CA bundle (PEM), trusted by real pods' ServiceAccount files.
    pub root_ca_pem: Option<String>,
    /// The API server's URL, which real pods reach; `None` simulates every pod.
    pub cluster_url: Option<http::Uri>,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        KubeletConfig {
            pod_start_delay: Duration::ZERO,
            pod_ready_delay: Duration::ZERO,
            job_run_time: Duration::from_millis(500),
            images: None,
            pod_root: None,
            pod_network: None,
            pod_isolation: None,
            crash_loop_backoff: crate::runtime::backoff::DEFAULT_BASE,
            root_ca_pem: None,
            cluster_url: None,
        }
    }
}

/// The clients a kubelet acts with.
#[derive(Clone)]
pub struct KubeletClients {
    /// The kubelet's own (a node's identity): pods, their status and events.
    pub kubelet: kube::Client,
    /// kube-proxy's: the Services and EndpointSlices its Service proxy and cluster DNS
    /// follow.
    pub kube_proxy: kube::Client,
}
