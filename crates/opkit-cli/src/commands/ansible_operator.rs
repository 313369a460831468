//! `opkit ansible-operator`: the generic Ansible operator (`opkit-ansible-operator`) run
//! from a watches file, with ansible-operator's flags and the manager flags every opkit
//! operator takes.

use std::path::{Path, PathBuf};

use crate::cli::AnsibleOperatorArgs;
use crate::commands::CliError;

/// Reads the watches file, starts the API proxy, registers a controller per watched kind
/// and runs the manager until SIGTERM or Ctrl-C.
pub(super) async fn run(args: AnsibleOperatorArgs) -> Result<(), CliError> {
    if !on_path("ansible-runner") {
        return Err(opkit_ansible_operator::OperatorError::RunnerMissing("not on PATH".to_string()).into());
    }
    let reconcile_period = opkit_apimachinery::duration::parse(&args.reconcile_period)
        .map_err(|e| CliError::Usage(format!("--reconcile-period {:?}: {e}", args.reconcile_period)))?;
    let log_events = args
        .ansible_log_events
        .parse::<opkit_ansible_operator::LogEvents>()
        .map_err(|e| CliError::Usage(format!("--ansible-log-events: {e}")))?;
    let watches = opkit_ansible_operator::load_watches(&args.watches_file, args.max_concurrent_reconciles.max(1))?;
    let project_dir = args.watches_file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let split = |paths: &Option<String>| -> Vec<PathBuf> {
        paths.iter().flat_map(|p| p.split(':')).filter(|p| !p.is_empty()).map(PathBuf::from).collect()
    };
    let mut roles_paths = split(&args.ansible_roles_path);
    roles_paths.push(std::path::absolute(project_dir.join("roles"))?);
    let options = opkit_ansible_operator::OperatorOptions {
        proxy_address: std::net::SocketAddr::from(([127, 0, 0, 1], args.proxy_port)),
        verbosity: args.ansible_verbosity,
        ansible_args: args.ansible_args.clone(),
        reconcile_period,
        roles_paths,
        collections_paths: split(&args.ansible_collections_path),
        inject_owner_ref: args.inject_owner_ref,
        log_events,
        ..opkit_ansible_operator::OperatorOptions::for_project(project_dir)?
    };
    let manager_options = args.manager.options().map_err(|e| CliError::Usage(e.to_string()))?;
    let config = args.manager.config().await.map_err(|e| CliError::Kubeconfig(e.to_string()))?;
    let mgr = opkit::Manager::from_config(config, manager_options).map_err(|e| CliError::Client(e.to_string()))?;
    let proxy = opkit_ansible_operator::setup(&mgr, watches, options).await?;
    tracing::info!(watches = %args.watches_file.display(), proxy = %proxy.address, "starting the ansible operator");
    mgr.run().await.map_err(|e| CliError::Build(e.to_string()))
}

/// Whether `program` is an executable file in a `PATH` directory.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}
