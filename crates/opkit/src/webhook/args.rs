//! [`WebhookArgs`]: an operator's webhook flags (and environment variables), as kubebuilder's
//! scaffold has them: whether to serve webhooks (`ENABLE_WEBHOOKS`), where, and with which
//! certificate.

use std::path::PathBuf;

use clap::ArgAction;

use super::WebhookServer;
use crate::manager::{FlagsError, parse_bind};

/// Where controller-runtime's webhook server reads `tls.crt`/`tls.key` by default (the
/// scaffold's Deployment mounts the serving-certificate Secret there).
pub const DEFAULT_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// Flags of an operator's webhook server. Embed with `#[command(flatten)]`.
#[derive(Debug, Clone, clap::Args)]
pub struct WebhookArgs {
    /// Serve the admission and conversion webhooks (`ENABLE_WEBHOOKS=false` runs the
    /// controllers alone, e.g. in `make run` without certificates).
    #[arg(long, env = "ENABLE_WEBHOOKS", action = ArgAction::Set, default_value_t = true, num_args = 0..=1, default_missing_value = "true")]
    pub enable_webhooks: bool,
    /// The address the webhook server binds to.
    #[arg(long, env = "WEBHOOK_BIND_ADDRESS", default_value = ":9443")]
    pub webhook_bind_address: String,
    /// The directory holding the serving certificate (`tls.crt`, `tls.key`), re-read when it
    /// changes.
    #[arg(long, env = "WEBHOOK_CERT_DIR", default_value = DEFAULT_CERT_DIR)]
    pub webhook_cert_dir: PathBuf,
}

impl WebhookArgs {
    /// A server configured by these flags, without handlers; `None` when webhooks are
    /// disabled.
    pub fn server(&self) -> Result<Option<WebhookServer>, FlagsError> {
        if !self.enable_webhooks {
            return Ok(None);
        }
        let Some(addr) = parse_bind("--webhook-bind-address", &self.webhook_bind_address)? else {
            return Ok(None);
        };
        Ok(Some(WebhookServer::new().bind(addr).cert_dir(self.webhook_cert_dir.clone())))
    }
}
