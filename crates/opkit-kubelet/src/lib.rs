//! The kubelet of opkit's simulated nodes, as kwok simulates kubelets, and more: a pod
//! bound to a simulated Node is started, made Ready and finished on a schedule, or, when
//! every image it names is loaded into the image store, run for real as local processes.
//!
//! TODO: surface list.

pub mod config;
pub mod events;
pub mod images;
pub mod ip;
pub mod kubelet;
pub mod lifecycle;
pub mod network;
pub mod node;
pub mod pod_events;
pub mod resolv_conf;
pub mod runtime;
pub mod server;
pub mod status;

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
