//! The kubelet's HTTPS server: exec and port-forward streaming (the router lands with the
//! runtime's server).

pub mod exec;
pub mod port_forward;
pub(crate) mod stream;
