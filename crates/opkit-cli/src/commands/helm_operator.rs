//! `opkit helm-operator`: the generic Helm-chart operator (`opkit-helm-operator`) run
//! from a watches file, with the manager flags every opkit operator takes.

use crate::cli::HelmOperatorArgs;
use crate::commands::CliError;

/// Reads the watches file, registers a controller per watched kind and runs the manager
/// until SIGTERM or Ctrl-C.
pub(super) async fn run(args: HelmOperatorArgs) -> Result<(), CliError> {
    let watches = opkit_helm_operator::load_watches(&args.watches_file)?;
    let options = args.manager.options().map_err(|e| CliError::Usage(e.to_string()))?;
    let config = args.manager.config().await.map_err(|e| CliError::Kubeconfig(e.to_string()))?;
    let mgr = opkit::Manager::from_config(config, options).map_err(|e| CliError::Client(e.to_string()))?;
    opkit_helm_operator::setup(&mgr, watches).await?;
    tracing::info!(watches = %args.watches_file.display(), "starting the helm operator");
    mgr.run().await.map_err(|e| CliError::Build(e.to_string()))
}
