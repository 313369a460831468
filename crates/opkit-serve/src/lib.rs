//! HTTP(S) serving shared by the opkit API server, the operator's probe and metrics
//! endpoints and the webhook server.
//!
//! - [`Server`]: one accept loop over a bound `TcpListener` serving a hyper service over
//!   HTTP/1.1 and HTTP/2, optionally behind rustls, with a TLS handshake timeout, a
//!   header-read timeout, back-off on accept errors ([`AcceptBackoff`]), an optional cap on
//!   concurrent connections and graceful shutdown on a `CancellationToken`.
//! - [`files`]: atomic writes of keys, certificates and kubeconfigs, owner-only for secrets.
//! - [`tls`]: a development CA ([`tls::DevCa`]) issuing serving certificates, and rustls
//!   server configurations offering `h2` and `http/1.1`.

mod backoff;
pub mod files;
mod memory_return;
mod server;
pub mod tls;

pub use backoff::AcceptBackoff;
pub use server::{
    DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_SHUTDOWN_GRACE, DEFAULT_TLS_HANDSHAKE_TIMEOUT,
    PeerCertificates, RemoteAddr, Server,
};
