//! Ansible operators, as operator-sdk's ansible plugin (`ansible-operator`) runs them.
//!
//! A `watches.yaml` (module `watches`) maps each watched kind to an Ansible role or
//! playbook. One generic reconciler per kind (`reconciler`) runs `ansible-runner` for each
//! custom resource (`runner`) with the spec as snake-cased extra vars (`paramconv`), reads
//! the run's job events (`job_events`) and writes operator-sdk's status conditions
//! (`status`). The run's Kubernetes modules talk to the API server through a local proxy
//! (`proxy`) that adds owner references to what they create, watches those kinds and
//! answers reads from the cache, and takes the user metrics roles send (`user_metrics`).
//! Job events are read while a run goes and logged per `--ansible-log-events`
//! (`log_events`). opkit's own `operator_sdk.util` collection (`k8s_status`, `k8s_event`,
//! `osdk_metric`, `requeue_after`; [`install_collection`]) is passed to every run.
//!
//! # Public surface
//!
//! - [`load_watches`], [`parse_watches`]: `watches.yaml` as [`Watch`]es (each with a
//!   [`Runnable`], an optional [`Finalizer`] and a blacklist of [`GroupVersionKind`]s).
//! - [`setup`] with [`OperatorOptions`] ([`LogEvents`] for `--ansible-log-events`,
//!   [`UnknownLogEvents`] when it does not parse): starts
//!   the API proxy and one controller per watch; the [`ProxyGuard`] it returns stops the
//!   proxy when dropped.
//! - [`kubeconfig_for`], [`proxy_token`], [`NamespacedOwner`]: the kubeconfig a run gets,
//!   pointing at the proxy as the resource it reconciles.
//! - [`install_collection`]: writes opkit's `operator_sdk.util` collection.
//! - [`OperatorError`]: why the operator could not start or reconcile.
//!
//! # Example
//!
//! Reading a watches file (a runnable doctest), then running the operator against a
//! cluster:
//!
//! ```
//! let project = std::env::temp_dir().join(format!("opkit-ansible-doc-{}", std::process::id()));
//! std::fs::create_dir_all(project.join("roles/memcached"))?;
//! let text = "- {group: cache.example.com, version: v1alpha1, kind: Memcached, role: memcached}";
//! let watches = opkit_ansible_operator::parse_watches(text, &project, &|_| None, 1)?;
//! assert_eq!(watches[0].kind, "Memcached");
//! # std::fs::remove_dir_all(&project)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let watches = opkit_ansible_operator::load_watches(std::path::Path::new("watches.yaml"), 1)?;
//! let client = kube::Client::try_default().await?;
//! let mgr = opkit::Manager::new(client, opkit::ManagerOptions::default());
//! let options = opkit_ansible_operator::OperatorOptions::default();
//! let _proxy = opkit_ansible_operator::setup(&mgr, watches, options).await?;
//! mgr.run().await?;
//! # Ok(()) }
//! ```

mod job_events;
mod log_events;
mod metrics;
mod paramconv;
mod proxy;
mod reconciler;
mod runner;
mod status;
mod user_metrics;
mod watches;

use std::path::{Path, PathBuf};

pub use log_events::{LogEvents, UnknownLogEvents};
pub use proxy::{NamespacedOwner, kubeconfig_for, proxy_token};
pub use reconciler::{OperatorOptions, ProxyGuard, setup};
pub use watches::{Finalizer, GroupVersionKind, Runnable, Watch, load_watches, parse_watches};

/// The files of opkit's `operator_sdk.util` collection, built into the crate.
const COLLECTION_FILES: &[(&str, &str)] = &[
    ("galaxy.yml", include_str!("../collections/ansible_collections/operator_sdk/util/galaxy.yml")),
    ("README.md", include_str!("../collections/ansible_collections/operator_sdk/util/README.md")),
    ("meta/runtime.yml", include_str!("../collections/ansible_collections/operator_sdk/util/meta/runtime.yml")),
    (
        "plugins/module_utils/client.py",
        include_str!("../collections/ansible_collections/operator_sdk/util/plugins/module_utils/client.py"),
    ),
    (
        "plugins/modules/k8s_status.py",
        include_str!("../collections/ansible_collections/operator_sdk/util/plugins/modules/k8s_status.py"),
    ),
    (
        "plugins/modules/k8s_event.py",
        include_str!("../collections/ansible_collections/operator_sdk/util/plugins/modules/k8s_event.py"),
    ),
    (
        "plugins/modules/osdk_metric.py",
        include_str!("../collections/ansible_collections/operator_sdk/util/plugins/modules/osdk_metric.py"),
    ),
    (
        "plugins/modules/requeue_after.py",
        include_str!("../collections/ansible_collections/operator_sdk/util/plugins/modules/requeue_after.py"),
    ),
];

/// Writes opkit's `operator_sdk.util` collection (built into the crate, so an installed
/// `opkit` has it) under `dir` (as `dir/ansible_collections/operator_sdk/util`) and
/// returns `dir`, the collections path put first on `ANSIBLE_COLLECTIONS_PATH` for every run.
pub fn install_collection(dir: &Path) -> Result<PathBuf, OperatorError> {
    let root = dir.join("ansible_collections").join("operator_sdk").join("util");
    for (name, text) in COLLECTION_FILES {
        let path = root.join(name);
        let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(&path, text));
        written.map_err(|e| {
            OperatorError::Runner(format!("writing the operator_sdk.util collection to {}: {e}", path.display()))
        })?;
    }
    Ok(dir.to_path_buf())
}

/// Why the Ansible operator could not start or reconcile.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// The watches file could not be read or is not valid, or a watched kind is not served.
    #[error(transparent)]
    Watches(#[from] opkit::watches_file::WatchesError),
    /// `ansible-runner` is not installed.
    #[error(
        "ansible-runner was not found on PATH ({0}); install it with crates/opkit-ansible-operator/install-ansible.sh (what .ci/run does) or `pip install ansible-runner ansible-core kubernetes`"
    )]
    RunnerMissing(String),
    /// Preparing or running `ansible-runner` failed.
    #[error("ansible-runner: {0}")]
    Runner(String),
    /// The API proxy could not listen.
    #[error("the API proxy could not listen on {address}: {source}")]
    ProxyListen {
        /// The address.
        address: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A controller could not be built.
    #[error(transparent)]
    Build(#[from] opkit::BuildError),
    /// A request to the API server failed.
    #[error(transparent)]
    Kube(Box<kube::Error>),
}

impl From<kube::Error> for OperatorError {
    fn from(e: kube::Error) -> OperatorError {
        OperatorError::Kube(Box::new(e))
    }
}
