//! The manager's runnable groups (controller-runtime's `runnableGroup`s): runnables that
//! run on every replica, and runnables that run only while this replica leads. Each group
//! holds what was added before it started and starts it all at once; what is added
//! later starts at once. A runnable that returns `Ok` just ends; one that fails or panics
//! reports a [`ManagerError`] that stops the manager.

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{ManagerError, Runnable};

/// Where a started group spawns its runnables.
#[derive(Clone)]
pub(super) struct Runner {
    /// Cancelled when the group must stop.
    pub(super) token: CancellationToken,
    /// Every spawned runnable, to wait for on shutdown.
    pub(super) tracker: TaskTracker,
    /// Failures (errors and panics) of runnables.
    pub(super) failures: mpsc::UnboundedSender<ManagerError>,
}

impl Runner {
    /// Starts `r` in its own task. A panic in `start` or in its future is caught and
    /// reported as [`ManagerError::Panicked`].
    pub(super) fn spawn(&self, r: Box<dyn Runnable>) {
        let name = r.name();
        let token = self.token.clone();
        let failures = self.failures.clone();
        self.tracker.spawn(async move {
            let outcome = AssertUnwindSafe(async move { r.start(token).await }).catch_unwind().await;
            let failure = match outcome {
                Ok(Ok(())) => {
                    tracing::debug!(runnable = %name, "runnable finished");
                    return;
                }
                Ok(Err(source)) => ManagerError::Runnable { name, source },
                Err(panic) => ManagerError::Panicked { name, message: panic_message(&*panic) },
            };
            tracing::error!(error = %failure, "runnable failed; stopping the manager");
            // The receiver is gone only once the manager stopped; nothing is left to stop.
            let _ = failures.send(failure);
        });
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runnables waiting for their group to start, or the started group's runner.
#[derive(Default)]
pub(super) struct Group {
    pending: Vec<Box<dyn Runnable>>,
    runner: Option<Runner>,
}

impl Group {
    /// Adds `r`: started at once if the group runs, else kept until it starts.
    pub(super) fn add(&mut self, r: Box<dyn Runnable>) {
        match &self.runner {
            Some(runner) => runner.spawn(r),
            None => self.pending.push(r),
        }
    }

    /// Starts the group: every pending runnable now, later ones as they are added.
    pub(super) fn start(&mut self, runner: Runner) {
        for r in std::mem::take(&mut self.pending) {
            runner.spawn(r);
        }
        self.runner = Some(runner);
    }

    /// Stops starting runnables (the manager is shutting down); later ones are kept.
    pub(super) fn stop(&mut self) {
        self.runner = None;
    }
}

/// The two groups.
#[derive(Default)]
pub(super) struct Groups {
    /// Runnables on every replica (`needs_leader_election() == false`).
    pub(super) everywhere: Group,
    /// Runnables only on the leader.
    pub(super) leader: Group,
}

impl Groups {
    /// Adds `r` to its group.
    pub(super) fn add(&mut self, r: Box<dyn Runnable>) {
        if r.needs_leader_election() { self.leader.add(r) } else { self.everywhere.add(r) }
    }
}
