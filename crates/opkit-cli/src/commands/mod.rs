//! Command implementations; each returns a [`CliError`] that `main` prints.

mod ansible_operator;
mod bundle;
mod catalog;
mod cleanup;
mod cluster;
mod completion;
mod create_api;
mod create_webhook;
mod deploy;
mod edit;
mod generate;
mod generate_bundle;
mod helm;
mod helm_operator;
mod images;
mod init;
mod install;
mod kubeconfig;
pub(crate) mod kudo;
mod olm;
mod pod_warnings;
mod run;
mod run_bundle;
mod run_webhooks;
mod scorecard;
mod test;
mod test_perturb;
mod version;

use crate::cli::{
    BundleCommand, CatalogCommand, Cli, ClusterCommand, Command, CreateCommand, HelmCommand, OlmCommand, OutputFormat,
    RunCommand,
};
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
    /// A wait timed out; the pods it waited for last warned this.
    #[error("{error}; the pods' last Warning event: {warning}")]
    PodWarning {
        /// The timeout.
        error: Box<CliError>,
        /// `pod NAME: REASON: MESSAGE`.
        warning: String,
    },
    /// Deleting timed out; these objects are still held, by their finalizers.
    #[error("{timeout}; still held: {}", if held.is_empty() { "nothing (they went after the timeout)".to_string() } else { held.join("; ") })]
    Held {
        /// The wait that timed out.
        timeout: crate::cluster_ops::ClusterOpsError,
        /// Each object being deleted that still exists, with its finalizers.
        held: Vec<String>,
    },
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
    Images(#[from] opkit_kubelet::images::ImageError),
    /// A request to the cluster failed.
    #[error("{0}")]
    ClusterRequest(String),
    /// A Helm chart could not be rendered.
    #[error(transparent)]
    Helm(#[from] opkit_helm::HelmError),
    /// The Helm operator could not start.
    #[error(transparent)]
    HelmOperator(#[from] opkit_helm_operator::OperatorError),
    /// A kuttl suite could not be loaded or run.
    #[error(transparent)]
    Kuttl(#[from] opkit_kuttl::KuttlError),
    /// The Ansible operator could not start.
    #[error(transparent)]
    AnsibleOperator(#[from] opkit_ansible_operator::OperatorError),
    /// A KUDO package, plan or engine failed.
    #[error(transparent)]
    Kudo(#[from] opkit_kudo::KudoError),
    /// OLM (`olm`, `run bundle`, `cleanup`, `catalog`) failed.
    #[error(transparent)]
    Olm(#[from] opkit_olm::OlmError),
    /// A file-based catalog is not valid (`catalog validate`).
    #[error("the catalog is not valid:\n  {}", .0.join("\n  "))]
    InvalidCatalog(Vec<String>),
    /// Local I/O failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// An OLM bundle could not be read or written.
    #[error(transparent)]
    OlmBundle(#[from] opkit_olm_bundle::BundleError),
    /// The project's manifests do not make an OLM bundle.
    #[error(transparent)]
    OlmGenerate(#[from] opkit_olm_bundle::generate::GenerateError),
    /// A CSV marker is malformed.
    #[error(transparent)]
    CsvMarker(#[from] opkit_olm_bundle::generate::MarkerError),
    /// No cluster runs from the data directory (`cluster stop`, `cluster kubeconfig`).
    #[error("no cluster is running from {}", dir.display())]
    NotRunning {
        /// The data directory.
        dir: std::path::PathBuf,
    },
    /// The port `cluster start` should listen on is taken.
    #[error(
        "port {port} on 127.0.0.1 is already in use{}; stop what listens there, or choose another port with --port N (--port 0 picks a free one)",
        by.as_deref().map(|cluster| format!(" by the opkit cluster running from {cluster}")).unwrap_or_default()
    )]
    PortInUse {
        /// The port.
        port: u16,
        /// The opkit cluster listening there, when it is one: `DIR (pid N, URL)`.
        by: Option<String>,
    },
    /// `cluster start --detach` could not bring the cluster up.
    #[error("{0}")]
    Detached(String),
    /// The command printed its result and ends with this exit code (`cluster status`: 3
    /// when no cluster runs); nothing more is printed.
    #[error("exit code {code}")]
    Reported {
        /// The exit code.
        code: u8,
    },
}

impl CliError {
    /// A stable name for the kind of failure, for `-o json` errors
    /// (`{"error": {"kind": ..., "message": ...}}`).
    pub fn kind(&self) -> &'static str {
        match self {
            CliError::Server(opkit_apiserver::ServerError::DataDir(
                opkit_apiserver::data_dir::DataDirError::InUse { .. },
            )) => "already-running",
            CliError::Server(_) => "server",
            CliError::Client(_) => "client",
            CliError::Usage(_) => "usage",
            CliError::Project(_) => "project",
            CliError::Scaffold(_) => "scaffold",
            CliError::Plan(_) => "file-write",
            CliError::Rbac(_) => "rbac-marker",
            CliError::WebhookMarker(_) => "webhook-marker",
            CliError::Kustomize(_) => "kustomize",
            CliError::Cluster(_) => "cluster",
            CliError::Held { .. } => "held",
            CliError::PodWarning { error, .. } => error.kind(),
            CliError::Kubeconfig(_) => "kubeconfig",
            CliError::Build(_) => "build",
            CliError::OutOfDate(_) => "out-of-date",
            CliError::Images(_) => "images",
            CliError::ClusterRequest(_) => "cluster-request",
            CliError::Helm(_) => "helm",
            CliError::HelmOperator(_) => "helm-operator",
            CliError::Kuttl(_) => "kuttl",
            CliError::AnsibleOperator(_) => "ansible-operator",
            CliError::Kudo(_) => "kudo",
            CliError::Olm(_) => "olm",
            CliError::InvalidCatalog(_) => "invalid-catalog",
            CliError::Io(_) => "io",
            CliError::OlmBundle(_) => "olm-bundle",
            CliError::OlmGenerate(_) => "olm-generate",
            CliError::CsvMarker(_) => "csv-marker",
            CliError::NotRunning { .. } => "not-running",
            CliError::PortInUse { .. } => "port-in-use",
            CliError::Detached(_) => "detached-start",
            CliError::Reported { .. } => "reported",
        }
    }

    /// The process's exit code for this failure: 1, or what a [`CliError::Reported`]
    /// command chose.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Reported { code } => *code,
            _ => 1,
        }
    }
}

/// Runs the parsed command.
pub fn run(cli: Cli) -> Result<(), CliError> {
    if cli.output == OutputFormat::Xunit && !matches!(cli.command, Command::Scorecard(_)) {
        return Err(CliError::Usage("-o xunit is scorecard's format; other commands print text or json".into()));
    }
    let mut out = Output::new(cli.output);
    let rt = || tokio::runtime::Builder::new_multi_thread().enable_all().build();
    match cli.command {
        Command::Cluster(ClusterCommand::Start(args)) => rt()?.block_on(cluster::start(args, cli.output)),
        Command::Cluster(ClusterCommand::Load(args)) => images::load(args, &mut out),
        Command::Cluster(ClusterCommand::Images(args)) => images::list(args, &mut out),
        Command::Cluster(ClusterCommand::Stop(args)) => cluster::stop(args, &mut out),
        Command::Cluster(ClusterCommand::Status(args)) => cluster::status(args, &mut out),
        Command::Cluster(ClusterCommand::Delete(args)) => cluster::delete(args, &mut out),
        Command::Cluster(ClusterCommand::Kubeconfig(args)) => cluster::kubeconfig(args, &mut out),
        Command::Version(args) => rt()?.block_on(version::version(args, &mut out)),
        Command::Init(args) => init::init(args, &mut out),
        Command::Create(CreateCommand::Api(args)) => create_api::create_api(args, &mut out),
        Command::Create(CreateCommand::Webhook(args)) => create_webhook::create_webhook(args, &mut out),
        Command::Generate(args) => generate::generate(args, &mut out),
        Command::Edit(args) => edit::edit(args, &mut out),
        Command::Install(args) => rt()?.block_on(install::install(args, &mut out)),
        Command::Uninstall(args) => rt()?.block_on(install::uninstall(args, &mut out)),
        Command::Run(mut args) => match args.bundle.take() {
            Some(RunCommand::Bundle(bundle)) => rt()?.block_on(run_bundle::bundle(bundle, &mut out)),
            Some(RunCommand::BundleUpgrade(upgrade)) => rt()?.block_on(run_bundle::bundle_upgrade(upgrade, &mut out)),
            None => rt()?.block_on(run::run(args, &mut out)),
        },
        Command::Olm(OlmCommand::Install(args)) => rt()?.block_on(olm::install(args, &mut out)),
        Command::Olm(OlmCommand::Status(args)) => rt()?.block_on(olm::status(args, &mut out)),
        Command::Olm(OlmCommand::Uninstall(args)) => rt()?.block_on(olm::uninstall(args, &mut out)),
        Command::Olm(OlmCommand::Run(args)) => rt()?.block_on(olm::run(args)),
        Command::Catalog(CatalogCommand::Render(args)) => catalog::render(args, &mut out),
        Command::Catalog(CatalogCommand::Validate(args)) => catalog::validate(args, &mut out),
        Command::Cleanup(args) => rt()?.block_on(cleanup::cleanup(args, &mut out)),
        Command::Deploy(args) => rt()?.block_on(deploy::deploy(args, &mut out)),
        Command::Undeploy(args) => rt()?.block_on(deploy::undeploy(args, &mut out)),
        Command::Helm(HelmCommand::Template(args)) => helm::template(args, &mut out),
        Command::BuildInstaller(args) => deploy::build_installer(args, &mut out),
        Command::HelmOperator(args) => rt()?.block_on(helm_operator::run(args)),
        Command::Test(args) => rt()?.block_on(test::test(args, &mut out)),
        Command::Bundle(BundleCommand::Validate(args)) => bundle::validate(args, &mut out),
        Command::Scorecard(args) => rt()?.block_on(scorecard::scorecard(args, &mut out)),
        Command::AnsibleOperator(args) => rt()?.block_on(ansible_operator::run(args)),
        Command::Kudo(command) => rt()?.block_on(kudo::run(command, &mut out)),
        Command::Completion { shell } => {
            completion::print(shell);
            Ok(())
        }
    }
}

/// The project root: the nearest directory, from the current one up, that holds a
/// `PROJECT` file (as cargo finds `Cargo.toml`); the current directory when none does, so
/// that the command says it is not a project.
fn project_dir() -> Result<std::path::PathBuf, CliError> {
    let cwd = std::env::current_dir()?;
    let found = cwd.ancestors().find(|dir| dir.join(crate::project::FILE).is_file());
    Ok(found.map_or_else(|| cwd.clone(), std::path::Path::to_path_buf))
}
