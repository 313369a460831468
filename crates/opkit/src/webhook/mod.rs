//! Admission and conversion webhooks (controller-runtime's `webhook` package): an HTTPS server
//! (rustls with the ring provider, HTTP/1.1 and HTTP/2) whose certificate is reloaded from disk
//! when it changes, typed validating/mutating handlers over kube `Resource` types speaking
//! `admission.k8s.io/v1` AdmissionReview (kube's `kube::core::admission` types), CRD conversion
//! over `apiextensions.k8s.io/v1` ConversionReview (`kube::core::conversion`), and development
//! certificates from opkit-serve's CA.
//!
//! Operators register typed, async [`CustomDefaulter`]s and [`CustomValidator`]s and hub/spoke
//! conversion ([`Hub`], [`Convertible`]) with [`Manager::webhook_for`](crate::Manager::webhook_for)
//! at the paths kubebuilder's markers name; [`WebhookArgs`] are the flags that say where the
//! server listens and where its certificate is.

mod admission;
mod args;
mod conversion;
mod custom;
mod hub;
mod review;
mod runnable;
mod server;
pub(crate) mod tls;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::PathBuf;

pub use admission::{AdmissionHandler, Defaulter, Validator, defaulting_patch};
pub use args::{DEFAULT_CERT_DIR, WebhookArgs};
pub use conversion::{
    CONVERSION_API_VERSION, ConversionRequest, ConversionResponse, ConversionReview, Converter, convert_review,
};
pub use custom::{
    AdmissionContext, AdmissionError, CustomDefaulter, CustomValidator, FieldError, FieldErrorReason, WebhookBuilder,
    webhook_path,
};
pub use hub::{Convertible, Hub};
pub use kube::core::DynamicObject;
pub use review::{ADMISSION_API_VERSION, AdmissionRequest, AdmissionResponse, AdmissionResponseExt, Operation};
pub use runnable::{WEBHOOK_READYZ_CHECK, WebhookServerStatus};
pub use server::{CONVERSION_PATH, DEFAULT_ADDR, MAX_REQUEST_BYTES, WebhookServer};
pub use tls::{CA_FILE, CERT_FILE, DevCerts, KEY_FILE};

/// Errors starting the webhook server or preparing its certificates.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The listen address could not be bound.
    #[error("binding webhook server to {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// A certificate file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A certificate or key file does not hold a usable PEM certificate chain / private key.
    #[error("invalid certificate material in {}: {message}", path.display())]
    InvalidCert {
        /// The offending file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Neither `cert_dir` nor `dev_certs` was configured.
    #[error("no certificate directory configured (use cert_dir or dev_certs)")]
    NoCertDir,
    /// Development certificate generation failed.
    #[error("generating development certificates: {0}")]
    CertGen(#[from] opkit_serve::tls::CertGenError),
    /// rustls rejected the configuration.
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// Two handlers were registered for the same path.
    #[error("webhook path {0} registered twice")]
    DuplicatePath(String),
    /// A handler path does not start with `/`.
    #[error("webhook path {0:?} must start with '/'")]
    InvalidPath(String),
}
