//! The manager's command-line flags (and environment variables), named as
//! controller-runtime's so deployments and scaffolds carry over.

use std::net::SocketAddr;
use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::ManagerOptions;
use crate::cache::CacheScope;
use crate::leader::LeaderElectionConfig;
use crate::metrics::secure::SecureServing;
use crate::sharding::ShardingConfig;

/// Bad flags or an unusable kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum FlagsError {
    /// An address did not parse.
    #[error("invalid {flag} {value:?}: expected HOST:PORT, :PORT or 0 to disable")]
    Address {
        /// The flag.
        flag: &'static str,
        /// What was given.
        value: String,
    },
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// The client could not be built.
    #[error("client: {0}")]
    Client(#[from] kube::Error),
    /// A shard flag is not a DNS label.
    #[error("invalid {flag} {value:?}: must be a DNS label (lowercase letters, digits and '-', at most 63)")]
    Shard {
        /// The flag.
        flag: &'static str,
        /// What was given.
        value: String,
    },
}

/// Flags of an operator's manager. Embed with `#[command(flatten)]`.
#[derive(Debug, Clone, clap::Args)]
pub struct ManagerArgs {
    /// The address the metrics endpoint binds to (`:8080`; `0` disables it).
    #[arg(long, env = "METRICS_BIND_ADDRESS", default_value = ":8080")]
    pub metrics_bind_address: String,
    /// Serve the metrics endpoint over HTTPS, every request authenticated (TokenReview)
    /// and authorized (SubjectAccessReview); `--metrics-secure=false` for plain HTTP.
    #[arg(
        long,
        env = "METRICS_SECURE",
        default_value_t = false,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub metrics_secure: bool,
    /// The directory with the metrics server's certificate (default: a self-signed one).
    #[arg(long, env = "METRICS_CERT_PATH")]
    pub metrics_cert_path: Option<PathBuf>,
    /// The certificate's file name in `--metrics-cert-path`.
    #[arg(long, default_value = crate::metrics::secure::DEFAULT_CERT_NAME)]
    pub metrics_cert_name: String,
    /// The key's file name in `--metrics-cert-path`.
    #[arg(long, default_value = crate::metrics::secure::DEFAULT_KEY_NAME)]
    pub metrics_cert_key: String,
    /// The address the health probe endpoints bind to.
    #[arg(long, env = "HEALTH_PROBE_BIND_ADDRESS", default_value = ":8081")]
    pub health_probe_bind_address: String,
    /// Enable leader election, ensuring only one active manager.
    #[arg(long, env = "LEADER_ELECT")]
    pub leader_elect: bool,
    /// The name of the Lease used for leader election.
    #[arg(long, env = "LEADER_ELECTION_ID", default_value = "opkit-leader")]
    pub leader_election_id: String,
    /// The namespace of the leader election Lease (default: the pod's namespace, else `default`).
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Path to a kubeconfig (default: the files of $KUBECONFIG, else ~/.kube/config, else
    /// the in-cluster configuration).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Watch only these namespaces (repeat or comma-separate; default: all).
    #[arg(long, env = "WATCH_NAMESPACE", value_delimiter = ',')]
    pub namespace: Vec<String>,
    /// Run as one shard of the ring NAME: every replica started with the same ring
    /// reconciles its share of each controller's objects, and holds only those in its
    /// cache (see `opkit::sharding`). Replaces --leader-elect; the Leases live in the
    /// leader election namespace.
    #[arg(long, env = "SHARD_RING", value_name = "NAME")]
    pub shard_ring: Option<String>,
    /// This replica's shard ID with --shard-ring (default: $POD_NAME, else the host name).
    #[arg(long, env = "SHARD_ID")]
    pub shard_id: Option<String>,
}

/// Parses Go-style listen addresses: `:8080`, `127.0.0.1:8080`, or `0` (off).
pub(crate) fn parse_bind(flag: &'static str, value: &str) -> Result<Option<SocketAddr>, FlagsError> {
    let v = value.trim();
    if v.is_empty() || v == "0" {
        return Ok(None);
    }
    let full = if v.starts_with(':') { format!("0.0.0.0{v}") } else { v.to_string() };
    full.parse().map(Some).map_err(|_| FlagsError::Address { flag, value: value.to_string() })
}

impl ManagerArgs {
    /// The manager options these flags describe.
    pub fn options(&self) -> Result<ManagerOptions, FlagsError> {
        let leader_election = self
            .leader_elect
            .then(|| LeaderElectionConfig::new(self.leader_election_id.clone(), self.lease_namespace()));
        Ok(ManagerOptions {
            sharding: self.sharding()?,
            cache: CacheScope::namespaces(self.namespace.clone()),
            metrics_addr: parse_bind("--metrics-bind-address", &self.metrics_bind_address)?,
            metrics_secure: self.metrics_secure.then(|| SecureServing {
                cert_dir: self.metrics_cert_path.clone(),
                cert_name: self.metrics_cert_name.clone(),
                key_name: self.metrics_cert_key.clone(),
            }),
            health_addr: parse_bind("--health-probe-bind-address", &self.health_probe_bind_address)?,
            leader_election,
            ..ManagerOptions::default()
        })
    }

    /// `--leader-election-namespace`, else the pod's namespace, else `default`.
    fn lease_namespace(&self) -> String {
        self.leader_election_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .or_else(|| std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok())
            .map(|ns| ns.trim().to_string())
            .unwrap_or_else(|| "default".into())
    }

    /// `--shard-ring` and `--shard-id`: every controller sharded.
    fn sharding(&self) -> Result<Option<ShardingConfig>, FlagsError> {
        let Some(ring) = &self.shard_ring else { return Ok(None) };
        let mut cfg = ShardingConfig::new(ring.clone(), self.lease_namespace()).every_controller();
        if let Some(id) = self.shard_id.clone().or_else(|| std::env::var("POD_NAME").ok()) {
            cfg = cfg.shard_id(id);
        }
        for (flag, value) in [("--shard-ring", &cfg.ring), ("--shard-id", &cfg.shard_id)] {
            if !opkit_apimachinery::names::is_dns1123_label(value) {
                return Err(FlagsError::Shard { flag, value: value.clone() });
            }
        }
        Ok(Some(cfg))
    }

    /// The client configuration: `--kubeconfig` (else `$KUBECONFIG`'s files, else
    /// `~/.kube/config`) at `--context` (else its current context); without either flag,
    /// kube's inference, which falls back to the in-cluster configuration.
    pub async fn config(&self) -> Result<Config, FlagsError> {
        let options = KubeConfigOptions { context: self.context.clone(), ..KubeConfigOptions::default() };
        match (&self.kubeconfig, &self.context) {
            (Some(path), _) => {
                let kc = Kubeconfig::read_from(path)
                    .map_err(|e| FlagsError::Kubeconfig(format!("{}: {e}", path.display())))?;
                Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .map_err(|e| FlagsError::Kubeconfig(format!("{}: {e}", path.display())))
            }
            (None, Some(_)) => {
                Config::from_kubeconfig(&options).await.map_err(|e| FlagsError::Kubeconfig(e.to_string()))
            }
            (None, None) => Config::infer().await.map_err(|e| FlagsError::Kubeconfig(e.to_string())),
        }
    }

    /// A client for [`ManagerArgs::config`].
    pub async fn client(&self) -> Result<Client, FlagsError> {
        Ok(Client::try_from(self.config().await?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        mgr: ManagerArgs,
    }

    #[test]
    fn go_style_flags() {
        let cli = Cli::parse_from([
            "op",
            "--metrics-bind-address",
            "0",
            "--leader-elect",
            "--leader-election-id",
            "86f835c3.example.com",
            "--namespace",
            "a,b",
        ]);
        let o = cli.mgr.options().expect("options");
        assert_eq!(o.metrics_addr, None);
        assert_eq!(o.health_addr, Some("0.0.0.0:8081".parse().expect("addr")));
        assert_eq!(o.leader_election.map(|l| l.lease_name), Some("86f835c3.example.com".to_string()));
        assert_eq!(o.cache.namespaces, ["a", "b"]);
        assert!(parse_bind("--x", "nonsense").is_err());
        assert!(o.sharding.is_none());
    }

    #[test]
    fn shard_flags() {
        let args = ["op", "--shard-ring", "memcached", "--shard-id", "m-0", "--leader-election-namespace", "ops"];
        let cfg = Cli::parse_from(args).mgr.options().expect("options").sharding.expect("sharding");
        assert_eq!((cfg.ring.as_str(), cfg.shard_id.as_str(), cfg.namespace.as_str()), ("memcached", "m-0", "ops"));
        assert!(cfg.every_controller);
        let bad = Cli::parse_from(["op", "--shard-ring", "Mem_cached"]).mgr.options();
        assert!(matches!(bad, Err(FlagsError::Shard { flag: "--shard-ring", .. })), "{bad:?}");
    }

    #[test]
    fn metrics_secure_flags() {
        let plain = Cli::parse_from(["op"]).mgr.options().expect("options");
        assert_eq!(plain.metrics_secure, None);
        let secure = Cli::parse_from(["op", "--metrics-secure", "--metrics-bind-address=:8443"]).mgr.options();
        let secure = secure.expect("options").metrics_secure.expect("secure");
        assert_eq!(secure, SecureServing::default());
        let off = Cli::parse_from(["op", "--metrics-secure=false"]).mgr.options().expect("options");
        assert_eq!(off.metrics_secure, None);
        let with_certs =
            Cli::parse_from(["op", "--metrics-secure=true", "--metrics-cert-path", "/certs"]).mgr.options();
        let with_certs = with_certs.expect("options").metrics_secure.expect("secure");
        assert_eq!(with_certs.cert_dir, Some(PathBuf::from("/certs")));
        assert_eq!((with_certs.cert_name.as_str(), with_certs.key_name.as_str()), ("tls.crt", "tls.key"));
    }
}
