//! The webhook server as a manager runnable (controller-runtime's manager runs its
//! `webhook.Server`): registered with [`Manager::add_webhook_server`], it runs on every
//! replica (webhooks must answer whichever replica the Service picks, leader or not),
//! starts only when handlers are registered, and adds a `webhook` readiness check that
//! passes once it listens.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::WebhookServer;
use crate::manager::{HealthCheckError, Manager, Runnable, RunnableError};

/// The name of the readiness check a registered webhook server adds.
pub const WEBHOOK_READYZ_CHECK: &str = "webhook";

/// Whether, and where, a webhook server registered with a manager listens. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct WebhookServerStatus {
    listening: Arc<OnceLock<SocketAddr>>,
}

impl WebhookServerStatus {
    /// The bound address, once listening (useful with port 0).
    pub fn addr(&self) -> Option<SocketAddr> {
        self.listening.get().copied()
    }

    /// Whether the server listens.
    pub fn is_listening(&self) -> bool {
        self.listening.get().is_some()
    }
}

/// Runs a [`WebhookServer`] until the manager stops.
struct WebhookRunnable {
    server: WebhookServer,
    status: WebhookServerStatus,
}

impl Runnable for WebhookRunnable {
    fn name(&self) -> String {
        "webhook-server".into()
    }

    fn needs_leader_election(&self) -> bool {
        false
    }

    fn start(self: Box<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), RunnableError>> {
        Box::pin(async move {
            let WebhookRunnable { server, status } = *self;
            // Preparing certificates reads (and may generate) files: keep that blocking
            // work off the async workers.
            let runtime = tokio::runtime::Handle::current();
            let token = shutdown.clone();
            let started = tokio::task::spawn_blocking(move || runtime.block_on(server.start(token)))
                .await
                .map_err(|e| RunnableError(format!("webhook server start: {e}")))?;
            let addr = started.map_err(|e| RunnableError(e.to_string()))?;
            let _ = status.listening.set(addr);
            shutdown.cancelled().await;
            Ok(())
        })
    }
}

impl Manager {
    /// Registers a webhook server: it starts with the manager on every replica (not
    /// only the leader), and `/readyz` gets a [`WEBHOOK_READYZ_CHECK`] check that passes
    /// once it listens (controller-runtime's `StartedChecker`). A server without
    /// handlers (no paths) is not started and adds no check. If it fails to start, the
    /// manager stops with its error.
    ///
    /// Register it before [`Manager::run`] (its readiness check is served from then on).
    pub fn add_webhook_server(&self, server: WebhookServer) -> Result<WebhookServerStatus, HealthCheckError> {
        let status = WebhookServerStatus::default();
        if server.paths().is_empty() {
            tracing::info!("webhook server has no handlers; not starting it");
            return Ok(status);
        }
        let probe = status.clone();
        self.add_readyz_check(WEBHOOK_READYZ_CHECK, move || {
            if probe.is_listening() { Ok(()) } else { Err("webhook server not listening yet".into()) }
        })?;
        self.add(WebhookRunnable { server, status: status.clone() });
        Ok(status)
    }
}
