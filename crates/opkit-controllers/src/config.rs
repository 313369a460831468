//! Which controllers run, and how the simulated nodes and kubelets behave.

use std::collections::BTreeSet;
use std::time::Duration;

/// Settings of the built-in controllers.
#[derive(Debug, Clone)]
pub struct ControllersConfig {
    /// Controllers switched off, by name (see [`crate::ALL`]).
    pub disabled: BTreeSet<String>,
    /// How many simulated nodes to register (default 3).
    pub nodes: usize,
    /// How long a scheduled pod stays Pending before its containers start.
    pub pod_start_delay: Duration,
    /// How long a started pod takes to become Ready.
    pub pod_ready_delay: Duration,
    /// How long a Job's pod runs before it succeeds (override per pod with the
    /// `opkit.dev/run-duration` annotation, e.g. `"2s"`).
    pub job_run_time: Duration,
    /// How often nodes renew their leases in `kube-node-lease`.
    pub node_heartbeat: Duration,
    /// The addresses LoadBalancer Services get their ingress IP from; `None` gives them
    /// the Ready nodes' InternalIPs.
    pub load_balancer_pool: Option<crate::LoadBalancerPool>,
    /// The directory local-path volumes are made in; `None` records their paths but makes
    /// no directory.
    pub volume_root: Option<std::path::PathBuf>,
    /// The API server's CA bundle (PEM), published as `kube-root-ca.crt` in every
    /// namespace and put into token Secrets; `None` publishes nothing.
    pub root_ca_pem: Option<String>,
    /// The admin's client configuration, from which each controller derives a client
    /// that impersonates its own identity (see `identity`), so RBAC authorizes it as
    /// it does kube-controller-manager's controllers; `None`: every controller uses
    /// the client it is given.
    pub identities: Option<kube::Config>,
    /// The cluster CA that signs approved CertificateSigningRequests (kube's
    /// `--cluster-signing-cert-file` / `--cluster-signing-key-file`); `None` signs nothing.
    pub cluster_signing: Option<ClusterSigning>,
    /// The image store (see [`opkit_kubelet::images`]): a pod whose image is loaded there runs as
    /// a real process; `None` simulates every pod.
    pub images: Option<std::path::PathBuf>,
    /// Where real pods get their directories (working directory, logs, projected
    /// ServiceAccount files); `None` uses a directory under the system's temporary one.
    pub pod_root: Option<std::path::PathBuf>,
    /// How real pods are networked; `None` picks network namespaces where this machine
    /// can make them, else the host network.
    pub pod_network: Option<crate::NetworkMode>,
    /// How real pods' containers are isolated; `None` contains them (own namespaces, root
    /// file system, `securityContext`) where this host can, else runs them as today's
    /// host processes with a warning.
    pub pod_isolation: Option<crate::PodIsolation>,
    /// The first CrashLoopBackOff delay of real containers (kube's 10 s; the first
    /// restart is immediate), doubling per restart up to 30 times this.
    pub crash_loop_backoff: Duration,
    /// Whether the cert-manager stand-in ([`crate::certmanager`]) runs: its kinds are
    /// installed and its Certificates issued (off by default, as a cluster has no
    /// cert-manager until one is installed).
    pub cert_manager: bool,
}

/// The cluster CA's certificate and key, and the longest validity it grants.
#[derive(Clone)]
pub struct ClusterSigning {
    /// The CA certificate (PEM).
    pub ca_pem: String,
    /// The CA's private key (PEM).
    pub ca_key_pem: String,
    /// kube's `--cluster-signing-duration` (one year by default).
    pub duration: Duration,
}

impl std::fmt::Debug for ClusterSigning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSigning")
            .field("ca_pem", &self.ca_pem)
            .field("duration", &self.duration)
            .finish_non_exhaustive()
    }
}

/// kube-controller-manager's default `--cluster-signing-duration`: 8760h.
pub const DEFAULT_CLUSTER_SIGNING_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

impl Default for ControllersConfig {
    fn default() -> Self {
        ControllersConfig {
            disabled: BTreeSet::new(),
            nodes: 3,
            pod_start_delay: Duration::ZERO,
            pod_ready_delay: Duration::ZERO,
            job_run_time: Duration::from_millis(500),
            node_heartbeat: Duration::from_secs(10),
            load_balancer_pool: None,
            volume_root: None,
            root_ca_pem: None,
            identities: None,
            cluster_signing: None,
            images: None,
            pod_root: None,
            pod_network: None,
            pod_isolation: None,
            crash_loop_backoff: opkit_kubelet::DEFAULT_CRASH_LOOP_BACKOFF,
            cert_manager: false,
        }
    }
}

impl ControllersConfig {
    /// Whether the controller called `name` runs.
    pub fn enabled(&self, name: &str) -> bool {
        !self.disabled.contains(name) && !self.disabled.contains("*")
    }
    /// Everything off.
    pub fn none() -> Self {
        ControllersConfig { disabled: ["*".to_string()].into(), ..Self::default() }
    }
    /// Publishes `ca_pem` as the cluster's root CA (see [`Self::root_ca_pem`]).
    pub fn root_ca(mut self, ca_pem: &str) -> Self {
        self.root_ca_pem = Some(ca_pem.to_string());
        self
    }
    /// Signs approved CertificateSigningRequests with the CA `ca_pem` and its key
    /// `ca_key_pem`, for at most [`DEFAULT_CLUSTER_SIGNING_DURATION`] (see
    /// [`Self::cluster_signing`]).
    pub fn cluster_signing(mut self, ca_pem: &str, ca_key_pem: &str) -> Self {
        self.cluster_signing = Some(ClusterSigning {
            ca_pem: ca_pem.to_string(),
            ca_key_pem: ca_key_pem.to_string(),
            duration: DEFAULT_CLUSTER_SIGNING_DURATION,
        });
        self
    }
    /// Runs each controller under its own identity, derived from `admin` (see
    /// [`Self::identities`]).
    pub fn with_identities(mut self, admin: kube::Config) -> Self {
        self.identities = Some(admin);
        self
    }
    /// What the kubelets read of these settings.
    pub fn kubelet_config(&self) -> opkit_kubelet::KubeletConfig {
        opkit_kubelet::KubeletConfig {
            pod_start_delay: self.pod_start_delay,
            pod_ready_delay: self.pod_ready_delay,
            job_run_time: self.job_run_time,
            images: self.images.clone(),
            pod_root: self.pod_root.clone(),
            pod_network: self.pod_network,
            pod_isolation: self.pod_isolation,
            crash_loop_backoff: self.crash_loop_backoff,
            root_ca_pem: self.root_ca_pem.clone(),
            cluster_url: self.identities.as_ref().map(|admin| admin.cluster_url.clone()),
        }
    }
    /// Switches one controller off.
    pub fn disable(mut self, name: &str) -> Self {
        self.disabled.insert(name.to_string());
        self
    }
}
