//! Command implementations; each returns a [`CliError`] that `main` prints.

mod cluster;

use crate::cli::{Cli, ClusterCommand, Command};

/// A failure to report to the user.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The control plane failed.
    #[error(transparent)]
    Server(#[from] opkit_apiserver::ServerError),
    /// The controllers could not connect to the server.
    #[error("connecting the cluster controllers: {0}")]
    Client(String),
    /// A flag has a bad value.
    #[error("{0}")]
    Usage(String),
    /// Local I/O failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Runs the parsed command.
pub fn run(cli: Cli) -> Result<(), CliError> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match cli.command {
        Command::Cluster(ClusterCommand::Start(args)) => rt.block_on(cluster::start(args, cli.output)),
    }
}
