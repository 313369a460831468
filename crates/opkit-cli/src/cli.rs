//! Command-line definitions (clap): every subcommand, flag and its help text.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// opkit: build, test and run Kubernetes operators in Rust.
#[derive(Debug, Parser)]
#[command(name = "opkit", version, about, long_about = None)]
pub struct Cli {
    /// Output format.
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people.
    Text,
    /// One JSON document, for programs.
    Json,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a local Kubernetes-compatible control plane.
    #[command(subcommand)]
    Cluster(ClusterCommand),
}

/// `opkit cluster ...`
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Start the control plane on 127.0.0.1 and write a kubeconfig (context `opkit`).
    ///
    /// Objects are kept in <data-dir>/state.db (SQLite), so a restart keeps everything.
    ///
    /// Examples:
    ///   opkit cluster start
    ///   opkit cluster start --port 0 --in-memory --kubeconfig /tmp/kubeconfig
    #[command(verbatim_doc_comment)]
    Start(StartArgs),
}

/// Flags of `opkit cluster start`.
#[derive(Debug, clap::Args)]
pub struct StartArgs {
    /// Directory for the database, certificates and token.
    #[arg(long, env = "OPKIT_DATA_DIR", default_value = ".opkit/cluster")]
    pub data_dir: PathBuf,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 6443)]
    pub port: u16,
    /// Where to write the kubeconfig (default: <data-dir>/kubeconfig).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Keep objects in memory only.
    #[arg(long)]
    pub in_memory: bool,
    /// Cluster controllers to switch off (comma-separated names, or `*` for all):
    /// namespace, serviceaccount, garbagecollector, deployment, replicaset, statefulset,
    /// daemonset, job, cronjob, endpoints, nodes, scheduler, kubelet.
    #[arg(long, value_delimiter = ',')]
    pub disable_controllers: Vec<String>,
    /// How many simulated nodes to run.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
}
