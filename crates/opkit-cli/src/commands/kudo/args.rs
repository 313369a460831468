//! The flags of `opkit kudo ...`, named as `kubectl kudo`'s.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::duration_flag::DurationFlag;

/// `opkit kudo ...` (also `kubectl kudo ...` through the `kubectl-kudo` shim).
#[derive(Debug, Subcommand)]
pub enum KudoCommand {
    /// Install KUDO's CRDs (Operator, OperatorVersion, Instance) and its manager, as
    /// `kubectl kudo init` does: the StatefulSet kudo-controller-manager in kudo-system,
    /// whose pod runs the engine (`opkit kudo manager`) from the opkit image. On a local
    /// opkit cluster this binary is loaded as that image first, so the pod runs for real.
    /// `--crd-only` installs the CRDs alone; `--manager` runs the engine in this process
    /// instead of a pod.
    ///
    /// Examples:
    ///   opkit kudo init --wait
    ///   opkit kudo init --crd-only && opkit kudo manager
    ///   opkit kudo init --dry-run -o json
    #[command(verbatim_doc_comment)]
    Init(KudoInitArgs),
    /// Run the KUDO engine (the controller that runs Instances' plans) against the
    /// current kubeconfig, until SIGTERM or Ctrl-C.
    ///
    /// Examples:
    ///   opkit kudo manager --kubeconfig .opkit/cluster/kubeconfig
    #[command(verbatim_doc_comment)]
    Manager(KudoManagerArgs),
    /// Install a package (a directory or a .tgz): its Operator, OperatorVersion and an
    /// Instance, whose deploy plan the engine runs.
    ///
    /// Examples:
    ///   opkit kudo install ./operator --instance web -p REPLICAS=3 --wait
    ///   opkit kudo install ./operator --skip-instance
    #[command(verbatim_doc_comment)]
    Install(KudoInstallArgs),
    /// Upgrade an Instance to another version of its package (runs `upgrade`, else
    /// `update`, else `deploy`).
    ///
    /// Examples:
    ///   opkit kudo upgrade ./operator-v2 --instance web
    #[command(verbatim_doc_comment)]
    Upgrade(KudoUpgradeArgs),
    /// Change an Instance's parameters (each runs its `trigger` plan, default `update`).
    ///
    /// Examples:
    ///   opkit kudo update --instance web -p REPLICAS=5 --wait
    #[command(verbatim_doc_comment)]
    Update(KudoUpdateArgs),
    /// Delete an Instance (its `cleanup` plan runs first).
    ///
    /// Examples:
    ///   opkit kudo uninstall --instance web
    #[command(verbatim_doc_comment)]
    Uninstall(KudoUninstallArgs),
    /// Plans of an Instance: status, history, trigger, cancel, retry.
    #[command(subcommand)]
    Plan(KudoPlanCommand),
    /// Packages on disk: create a .tgz, verify, list parameters.
    #[command(subcommand)]
    Package(KudoPackageCommand),
}

/// Where the cluster is.
#[derive(Debug, Clone, Args)]
pub struct KudoClusterArgs {
    /// The kubeconfig (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: the current one).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The namespace (default: the context's, else `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
}

/// Flags of `opkit kudo init`.
#[derive(Debug, Args)]
pub struct KudoInitArgs {
    /// Where the cluster is.
    #[command(flatten)]
    pub cluster: KudoClusterArgs,
    /// Print the CRDs and the manager's objects instead of installing them.
    #[arg(long)]
    pub dry_run: bool,
    /// Wait until the manager's pod is ready (the CRDs are always awaited).
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits: a Go duration such as `5m0s`, or seconds.
    #[arg(long, default_value_t = DurationFlag::from_secs(300))]
    pub wait_timeout: DurationFlag,
    /// Install only the CRDs, not the manager.
    #[arg(long)]
    pub crd_only: bool,
    /// The manager's image. On a local opkit cluster this binary is loaded as it; on
    /// another cluster it must be an image of the opkit binary that the nodes can pull.
    #[arg(long, default_value = DEFAULT_KUDO_IMAGE)]
    pub kudo_image: String,
    /// The local cluster's data directory, whose image store gets the manager's image
    /// (default: that of the opkit cluster the kubeconfig's context names).
    #[arg(long, env = "OPKIT_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// KUDO's webhook option; opkit's engine needs no webhook (accepted and ignored).
    #[arg(long)]
    pub unsafe_self_signed_webhook_ca: bool,
    /// Run the engine in this process after installing the CRDs, instead of the manager's
    /// pod.
    #[arg(long, conflicts_with = "crd_only")]
    pub manager: bool,
}

/// The manager's image by default: the opkit binary of this version.
pub(crate) const DEFAULT_KUDO_IMAGE: &str = concat!("opkit.dev/kudo-manager:v", env!("CARGO_PKG_VERSION"));

/// Flags of `opkit kudo manager`.
#[derive(Debug, Args)]
pub struct KudoManagerArgs {
    /// How many Instances are reconciled at once.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Do not restore objects that drifted from the last completed plan.
    #[arg(long)]
    pub no_drift_repair: bool,
    /// The manager's flags (controller-runtime's names).
    #[command(flatten)]
    pub manager: opkit::ManagerArgs,
}

/// Parameters given on the command line.
#[derive(Debug, Clone, Args)]
pub struct KudoParamArgs {
    /// A parameter, `NAME=VALUE` (repeatable).
    #[arg(short = 'p', long = "parameter")]
    pub parameter: Vec<String>,
    /// A YAML file of parameters (`NAME: VALUE`; repeatable; -p wins).
    #[arg(short = 'P', long = "parameter-file")]
    pub parameter_file: Vec<PathBuf>,
}

/// Waiting for the plan.
#[derive(Debug, Clone, Args)]
pub struct KudoWaitArgs {
    /// Wait until the plan ends (COMPLETE; FATAL_ERROR fails the command).
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits: a Go duration such as `5m0s`, or seconds.
    #[arg(long, default_value_t = DurationFlag::from_secs(300))]
    pub wait_time: DurationFlag,
}

/// Flags of `opkit kudo install`.
#[derive(Debug, Args)]
pub struct KudoInstallArgs {
    /// The package: a directory with operator.yaml, or a .tgz.
    pub package: PathBuf,
    /// The Instance's name (default NAME-instance).
    #[arg(long)]
    pub instance: Option<String>,
    /// Only the Operator and OperatorVersion.
    #[arg(long)]
    pub skip_instance: bool,
    /// Parameters.
    #[command(flatten)]
    pub params: KudoParamArgs,
    /// Waiting.
    #[command(flatten)]
    pub wait: KudoWaitArgs,
    /// Where the cluster is.
    #[command(flatten)]
    pub cluster: KudoClusterArgs,
}

/// Flags of `opkit kudo upgrade`.
#[derive(Debug, Args)]
pub struct KudoUpgradeArgs {
    /// The new package version: a directory or a .tgz.
    pub package: PathBuf,
    /// The Instance.
    #[arg(long)]
    pub instance: String,
    /// Parameters.
    #[command(flatten)]
    pub params: KudoParamArgs,
    /// Waiting.
    #[command(flatten)]
    pub wait: KudoWaitArgs,
    /// Where the cluster is.
    #[command(flatten)]
    pub cluster: KudoClusterArgs,
}

/// Flags of `opkit kudo update`.
#[derive(Debug, Args)]
pub struct KudoUpdateArgs {
    /// The Instance.
    #[arg(long)]
    pub instance: String,
    /// Parameters.
    #[command(flatten)]
    pub params: KudoParamArgs,
    /// Waiting.
    #[command(flatten)]
    pub wait: KudoWaitArgs,
    /// Where the cluster is.
    #[command(flatten)]
    pub cluster: KudoClusterArgs,
}

/// Flags of `opkit kudo uninstall`.
#[derive(Debug, Args)]
pub struct KudoUninstallArgs {
    /// The Instance.
    #[arg(long)]
    pub instance: String,
    /// Wait until the Instance is gone (its cleanup plan ran).
    #[arg(long)]
    pub wait: bool,
    /// Where the cluster is.
    #[command(flatten)]
    pub cluster: KudoClusterArgs,
}

/// `opkit kudo plan ...`
#[derive(Debug, Subcommand)]
pub enum KudoPlanCommand {
    /// The plans of an Instance, as a tree (KUDO's format), or `-o json`.
    Status(KudoPlanArgs),
    /// Every run of the Instance's plans, newest last.
    History(KudoPlanArgs),
    /// Run a plan now.
    Trigger(KudoPlanNameArgs),
    /// End the active plan (FATAL_ERROR, "cancelled by user"); beyond KUDO.
    Cancel(KudoPlanNameArgs),
    /// Resume a failed or cancelled plan from its failed steps; beyond KUDO.
    Retry(KudoPlanNameArgs),
}

/// Flags of `plan status` and `plan history`.
#[derive(Debug, Args)]
pub struct KudoPlanArgs {
    /// The Instance.
    #[arg(long)]
    pub instance: String,
    /// `plan status`: wait until the active plan ends.
    #[arg(long)]
    pub wait: bool,
    /// Where the cluster is.
    #[command(flatten)]
    pub cluster: KudoClusterArgs,
}

/// Flags of `plan trigger`, `cancel` and `retry`.
#[derive(Debug, Args)]
pub struct KudoPlanNameArgs {
    /// The Instance.
    #[arg(long)]
    pub instance: String,
    /// The plan (`cancel`: optional, the active one).
    #[arg(long)]
    pub name: Option<String>,
    /// Waiting.
    #[command(flatten)]
    pub wait: KudoWaitArgs,
    /// Where the cluster is.
    #[command(flatten)]
    pub cluster: KudoClusterArgs,
}

/// `opkit kudo package ...`
#[derive(Debug, Subcommand)]
pub enum KudoPackageCommand {
    /// Write the package directory as NAME-VERSION.tgz, as KUDO does.
    Create(KudoPackageCreateArgs),
    /// Check a package as KUDO's verifier does; errors fail the command.
    Verify(KudoPackagePathArgs),
    /// List things in a package.
    #[command(subcommand)]
    List(KudoPackageListCommand),
}

/// `opkit kudo package list ...`
#[derive(Debug, Subcommand)]
pub enum KudoPackageListCommand {
    /// The parameters, as a table (name, default, required, immutable).
    #[command(alias = "parameters")]
    Params(KudoPackageParamsArgs),
}

/// A package on disk.
#[derive(Debug, Args)]
pub struct KudoPackagePathArgs {
    /// A directory with operator.yaml, or a .tgz.
    pub package: PathBuf,
}

/// Flags of `package list params`.
#[derive(Debug, Args)]
pub struct KudoPackageParamsArgs {
    /// A directory with operator.yaml, or a .tgz.
    pub package: PathBuf,
    /// Only required parameters without a default.
    #[arg(long)]
    pub required: bool,
    /// Also the descriptions.
    #[arg(long)]
    pub descriptions: bool,
}

/// Flags of `package create`.
#[derive(Debug, Args)]
pub struct KudoPackageCreateArgs {
    /// The package directory.
    pub package: PathBuf,
    /// Where to write the archive (default: the current directory).
    #[arg(long, default_value = ".")]
    pub destination: PathBuf,
    /// Replace an existing archive.
    #[arg(long)]
    pub overwrite: bool,
}
