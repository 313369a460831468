//! The kubelet of opkit's simulated nodes, as kwok simulates kubelets, and more: a pod
//! bound to a simulated Node is started, made Ready and finished on a schedule, or, when
//! every image it names is loaded into the image store, run for real as local processes.
//! `opkit-controllers` starts it next to the other built-in controllers; it holds all of
//! the workspace's `unsafe` (namespaces, mounts, seccomp, ptys), each item with its
//! `// SAFETY:` comment.
//!
//! # Public surface
//! - [`register`]: adds the kubelet (controller `kubelet`), its process runtime and its
//!   server to a manager.
//! - [`KubeletConfig`], [`KubeletClients`], [`KubeletListener`]: what it is started with.
//! - [`pod_network_mode`], [`pod_isolation_mode`], [`NetworkMode`], [`PodIsolation`]: how
//!   real pods are networked and contained on this host.
//! - [`images`]: the image store (`opkit images load`) and the built-in images.
//! - [`exec`], [`port_forward`]: the streaming protocols of `pods/exec`, `attach` and
//!   `portforward`, as the kubelet server speaks them.
//! - [`node`]: the simulated Nodes' annotation, names and InternalIPs;
//!   [`KUBELET_ENDPOINT_ANNOTATION`], [`CONTAINER_ID_PREFIX`],
//!   [`DEFAULT_CRASH_LOOP_BACKOFF`]; [`events::EventSink`], the bounded event writer.
//!
//! # Example
//! ```
//! use opkit_kubelet::{KubeletConfig, node};
//!
//! // Every pod is simulated until an image store and the API server's URL are set.
//! let cfg = KubeletConfig::default();
//! assert!(cfg.images.is_none() && cfg.cluster_url.is_none());
//! assert_eq!(node::internal_ip(&node::node_name(0)), "10.0.0.2");
//! ```
//!
//! Starting it with a manager (as `opkit-controllers` does):
//! ```no_run
//! # fn run(mgr: &opkit::Manager, client: kube::Client) -> Result<(), opkit::BuildError> {
//! use opkit_kubelet::{KubeletClients, KubeletConfig, register};
//!
//! let clients = KubeletClients { kubelet: client.clone(), kube_proxy: client };
//! register(mgr, &KubeletConfig::default(), clients, None)
//! # }
//! ```

pub mod config;
pub mod events;
pub mod images;
pub(crate) mod ip;
pub(crate) mod kubelet;
pub(crate) mod lifecycle;
pub(crate) mod network;
pub mod node;
pub(crate) mod pod_events;
pub(crate) mod resolv_conf;
pub(crate) mod runtime;
pub(crate) mod server;
pub(crate) mod status;

pub use config::{KubeletClients, KubeletConfig};
pub use kubelet::register;
pub use network::NetworkMode;
pub use runtime::CONTAINER_ID_PREFIX;
pub use runtime::backoff::DEFAULT_BASE as DEFAULT_CRASH_LOOP_BACKOFF;
pub use runtime::container::PodIsolation;
pub use server::ENDPOINT_ANNOTATION as KUBELET_ENDPOINT_ANNOTATION;
pub use server::KubeletListener;
#[cfg(unix)]
pub use server::{exec, port_forward};

/// How the kubelet networks real pods on this machine when `requested` is asked for
/// (`None`: namespaces where they can be made): the mode, and why namespaces are not
/// used when they were wanted and are not. Probes by making and removing a sandbox.
pub fn pod_network_mode(requested: Option<NetworkMode>) -> (NetworkMode, Option<String>) {
    let networks = network::PodNetworks::new(requested, std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    (networks.mode(), networks.fallback_reason().map(str::to_string))
}

/// How the kubelet isolates real pods' containers on this machine when `requested` is
/// asked for (`None`: contained where the host can): the mode, and why containers are not
/// contained when that was wanted and is not possible (for `cluster start` and `status`).
pub fn pod_isolation_mode(requested: Option<PodIsolation>) -> (PodIsolation, Option<String>) {
    let reason = match requested {
        Some(PodIsolation::Host) => None,
        None | Some(PodIsolation::Contained) => runtime::container::containment_available().err(),
    };
    (runtime::isolation(requested), reason)
}
