//! What a running cluster records in its data directory (`DATA_DIR/cluster.json`): the
//! same document `opkit cluster start -o json` prints, with its pid and start time, read
//! by `--detach` (to know the cluster is up), `status`, `delete` and `kubeconfig`; and
//! which process holds the directory now ([`holder`]).

use std::path::{Path, PathBuf};

use opkit_apiserver::ServerError;
use opkit_apiserver::data_dir::{DataDir, Holder};
use opkit_controllers::NetworkMode;
use serde::{Deserialize, Serialize};

use crate::commands::CliError;

/// The record's file name in the data directory.
const RECORD_FILE: &str = "cluster.json";

/// The log file name of a cluster started with `--detach`.
pub(super) const LOG_FILE: &str = "cluster.log";

/// The process running a cluster from `data_dir` now, if one does.
pub(super) fn holder(data_dir: &Path) -> Result<Option<Holder>, CliError> {
    DataDir::holder(data_dir).map_err(|e| ServerError::DataDir(e).into())
}

/// What `opkit cluster start` started (and prints).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ClusterRecord {
    /// The API server's URL.
    pub server: String,
    /// The kubeconfig written for it.
    pub kubeconfig: PathBuf,
    /// The name of the kubeconfig's context, cluster and user (`NAME-admin`).
    pub context_name: String,
    /// The data directory.
    pub data_dir: PathBuf,
    /// Objects kept in memory only.
    pub in_memory: bool,
    /// The `--lb-range` pool, if any.
    pub load_balancer_addresses: Option<String>,
    /// How real pods are networked: `namespaces` or `host`.
    pub pod_network: String,
    /// Why network namespaces are not used, when they were wanted.
    pub pod_network_fallback_reason: Option<String>,
    /// How real pods' containers are isolated: `contained` or `host` (docs/security.md).
    #[serde(default)]
    pub pod_isolation: String,
    /// Why they are not contained, when that was wanted (the host cannot).
    #[serde(default)]
    pub pod_isolation_fallback_reason: Option<String>,
    /// The image store (`opkit cluster load`).
    pub images: PathBuf,
    /// Whether the cert-manager stand-in runs.
    pub cert_manager: bool,
    /// The process serving the cluster.
    pub pid: u32,
    /// When it started.
    pub started_at: jiff::Timestamp,
    /// Its log file, when it runs in the background (`--detach`).
    pub log_file: Option<PathBuf>,
}

impl ClusterRecord {
    /// Writes the record into its data directory (through a temporary file and a rename,
    /// so a reader never sees half of it).
    pub(super) fn save(&self) -> Result<(), CliError> {
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::from)?;
        crate::fileplan::write_atomic(&self.data_dir.join(RECORD_FILE), &json)?;
        Ok(())
    }

    /// The record of the cluster last started from `data_dir`, if any.
    pub(super) fn load(data_dir: &Path) -> Result<Option<ClusterRecord>, CliError> {
        let path = data_dir.join(RECORD_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(CliError::Io(std::io::Error::new(e.kind(), format!("reading {}: {e}", path.display()))));
            }
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| CliError::Usage(format!("{} is not a cluster record: {e}", path.display())))
    }

    /// The start output for people.
    pub(super) fn text(&self) -> String {
        let mut lines = vec![format!("opkit control plane listening on {}", self.server)];
        lines.push(format!(
            "storage: {}",
            if self.in_memory { "in memory".to_string() } else { self.data_dir.join("state.db").display().to_string() }
        ));
        lines.push(format!(
            "LoadBalancer Services get: {}",
            self.load_balancer_addresses.as_deref().unwrap_or("the nodes' addresses")
        ));
        let pod_network = if self.pod_network == "namespaces" { NetworkMode::Namespaces } else { NetworkMode::Host };
        lines.push(format!("Pods whose images are loaded (`opkit cluster load`) run as processes on: {pod_network}"));
        if let Some(reason) = &self.pod_network_fallback_reason {
            lines.push(format!("  (network namespaces are not available: {reason})"));
        }
        match (self.pod_isolation.as_str(), &self.pod_isolation_fallback_reason) {
            // A record written before isolation was recorded.
            ("", _) => {}
            ("contained", _) => {
                lines.push("  their containers are contained (own namespaces and root file system)".into())
            }
            (_, Some(reason)) => lines.push(format!("  their containers are NOT contained (host mode): {reason}")),
            _ => lines.push("  their containers are NOT contained (host mode, as asked)".into()),
        }
        lines.push("Other pods are simulated.".into());
        if self.cert_manager {
            lines.push(
                "cert-manager.io Issuers and Certificates are served by opkit (--cert-manager=false to install your own)."
                    .into(),
            );
        }
        lines.push(format!("To use it with kubectl (context {:?}):", self.context_name));
        lines.push(format!("  export KUBECONFIG={}", self.kubeconfig.display()));
        lines.join("\n")
    }
}
