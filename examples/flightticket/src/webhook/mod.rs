// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The admission and conversion webhooks of this operator (`opkit create webhook` adds
//! them): [`setup`] registers each on the manager's webhook server, at the paths of the
//! `+kubebuilder:webhook` markers from which `opkit generate` (`make manifests`) writes
//! config/webhook/manifests.yaml.

use opkit::Manager;
use opkit::webhook::WebhookServer;

pub mod flights_v1_flight_ticket;
// +opkit:scaffold:webhook-modules

/// Registers every webhook of this operator on `server`.
pub fn setup(mgr: &Manager, server: WebhookServer) -> WebhookServer {
    let server = flights_v1_flight_ticket::setup(mgr, server);
    // +opkit:scaffold:webhook-setup
    server
}
