// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The Memcached controller: reconciles Memcached objects (cache.example.com/v1alpha1).

use opkit::{Action, Context, Controller, Manager, ReconcileResult};

use crate::api::cache_v1alpha1::Memcached;

// The RBAC rules this controller needs: `opkit generate` (make manifests) turns these
// markers into config/rbac/role.yaml. Add one for every kind the reconciler reads or writes.
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/finalizers,verbs=update

/// Moves the cluster toward the state a Memcached declares. It runs on every change of the
/// Memcached (and of whatever the controller watches), so it must be idempotent.
///
/// How to return, as in controller-runtime:
/// - `Err(e)`, or `?` on a failed call: the request is retried with exponential backoff;
/// - `Ok(Action::requeue())`: not finished; run again (with backoff) without an error;
/// - `Ok(Action::done())`: the desired state is reached; wait for the next change;
/// - `Ok(Action::requeue_after(d))`: check again after `d`, e.g. to poll an outside system.
pub async fn reconcile(ctx: Context<Memcached>) -> ReconcileResult {
    // The object comes from the manager's cache. None: it was deleted (children are
    // garbage-collected through their owner references, so there is nothing to do).
    let Some(obj) = ctx.object.as_ref() else {
        return Ok(Action::done());
    };
    tracing::info!(request = %ctx.request, generation = ?obj.metadata.generation, "reconciling Memcached");
    // TODO(user): compare obj.spec with the cluster, then create or update what is missing.
    Ok(Action::done())
}

/// Registers the controller: it reconciles Memcached (`For`). Chain `.owns::<Child>()` for
/// objects it creates and `.watches::<Other>(map)` for others it depends on.
pub fn setup(mgr: &Manager) {
    Controller::new(mgr, reconcile).build();
}
