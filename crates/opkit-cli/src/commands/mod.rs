//! Command implementations; each returns a [`CliError`] that `main` prints.

mod cluster;
mod completion;
mod create_api;
mod create_webhook;
mod deploy;
mod generate;
mod images;
mod init;
mod install;
mod kubeconfig;
mod run;
mod run_webhooks;

use crate::cli::{Cli, ClusterCommand, Command, CreateCommand};
use crate::output::Output;

/// A failure to report to the user. Its message names what failed and why.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The control plane failed.
    #[error(transparent)]
    Server(#[from] opkit_apiserver::ServerError),
    /// The controllers could not connect to the server.
    #[error("connecting the cluster controllers: {0}")]
    Client(String),
    /// A flag has a bad value, or the command cannot run here.
    #[error("{0}")]
    Usage(String),
    /// The project or a name is not valid.
    #[error(transparent)]
    Project(#[from] crate::project::ProjectError),
    /// Scaffolding failed; nothing was written.
    #[error(transparent)]
    Scaffold(#[from] crate::scaffold::ScaffoldError),
    /// Writing files failed; what was written was rolled back.
    #[error(transparent)]
    Plan(#[from] crate::fileplan::PlanError),
    /// An RBAC marker is malformed.
    #[error(transparent)]
    Rbac(#[from] crate::rbac::RbacError),
    /// A webhook marker is malformed.
    #[error(transparent)]
    WebhookMarker(#[from] crate::webhook_markers::WebhookMarkerError),
    /// The kustomize manifests could not be rendered.
    #[error(transparent)]
    Kustomize(#[from] crate::kustomize::KustomizeError),
    /// Talking to the cluster failed.
    #[error(transparent)]
    Cluster(#[from] crate::cluster_ops::ClusterOpsError),
    /// The kubeconfig could not be used.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// Building or running the operator failed.
    #[error("{0}")]
    Build(String),
    /// Generated files are out of date (`opkit generate --check`).
    #[error("generated files are out of date: {0}; run `opkit generate`")]
    OutOfDate(String),
    /// The local cluster's image store failed.
    #[error(transparent)]
    Images(#[from] opkit_controllers::images::ImageError),
    /// A request to the cluster failed.
    #[error("{0}")]
    ClusterRequest(String),
    /// Local I/O failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Runs the parsed command.
pub fn run(cli: Cli) -> Result<(), CliError> {
    let mut out = Output::new(cli.output);
    let rt = || tokio::runtime::Builder::new_multi_thread().enable_all().build();
    match cli.command {
        Command::Cluster(ClusterCommand::Start(args)) => rt()?.block_on(cluster::start(args, cli.output)),
        Command::Cluster(ClusterCommand::Load(args)) => images::load(args, &mut out),
        Command::Cluster(ClusterCommand::Images(args)) => images::list(args, &mut out),
        Command::Init(args) => init::init(args, &mut out),
        Command::Create(CreateCommand::Api(args)) => create_api::create_api(args, &mut out),
        Command::Create(CreateCommand::Webhook(args)) => create_webhook::create_webhook(args, &mut out),
        Command::Generate(args) => generate::generate(args, &mut out),
        Command::Install(args) => rt()?.block_on(install::install(args, &mut out)),
        Command::Uninstall(args) => rt()?.block_on(install::uninstall(args, &mut out)),
        Command::Run(args) => rt()?.block_on(run::run(args, &mut out)),
        Command::Deploy(args) => rt()?.block_on(deploy::deploy(args, &mut out)),
        Command::Undeploy(args) => rt()?.block_on(deploy::undeploy(args, &mut out)),
        Command::BuildInstaller(args) => deploy::build_installer(args, &mut out),
        Command::Completion { shell } => {
            completion::print(shell);
            Ok(())
        }
    }
}

/// The current directory, as the project root.
fn project_dir() -> Result<std::path::PathBuf, CliError> {
    Ok(std::env::current_dir()?)
}
