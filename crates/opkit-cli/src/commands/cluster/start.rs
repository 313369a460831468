//! `opkit cluster start`: the local control plane in this process, stopped by Ctrl-C or
//! SIGTERM (`opkit cluster stop`); with `--detach`, in a background process
//! ([`super::detach`]).

use std::net::SocketAddr;
use std::path::Path;

use kube::config::KubeConfigOptions;
use opkit_apiserver::data_dir::DataDir;
use opkit_apiserver::{ApiServer, RunningServer, ServerConfig, ServerError, StorageConfig};
use opkit_controllers::{ControllersConfig, NetworkMode, PodIsolation};
use tokio_util::sync::CancellationToken;

use super::record::ClusterRecord;
use crate::cli::{OutputFormat, PodIsolationFlag, PodNetworkFlag, StartArgs};
use crate::commands::CliError;

/// The data directory `opkit cluster start` uses without `--data-dir`.
pub(crate) const DEFAULT_DATA_DIR: &str = ".opkit/cluster";

/// Starts the control plane and serves until a signal arrives; with `--detach`, starts
/// it in the background and returns once it is ready.
pub(crate) async fn start(args: StartArgs, output: OutputFormat) -> Result<(), CliError> {
    let mut controllers = controllers_config(&args)?;
    if args.context_name.is_empty() {
        return Err(CliError::Usage("--context-name must not be empty".into()));
    }
    if args.detach {
        return super::detach::start_detached(&args, output).await;
    }
    // Ctrl-C and SIGTERM are listened for before anything starts: a stop asked for while
    // the cluster starts (`cluster stop` right after `start --detach` returned) is a clean
    // stop once it is up, never the signal's default action killing the process.
    let mut shutdown = std::pin::pin!(opkit::signal::shutdown_requested());
    if let std::task::Poll::Ready(result) = futures::poll!(shutdown.as_mut()) {
        return Ok(result?);
    }
    let data_dir = std::path::absolute(&args.data_dir)?;
    std::fs::create_dir_all(&data_dir)?;
    controllers.volume_root = Some(data_dir.join("volumes"));
    controllers.images = Some(data_dir.join("images"));
    controllers.pod_root = Some(data_dir.join("pods"));
    let pods = PodModes::choose(&args, &mut controllers);
    let server = match ApiServer::start(server_config(&args, &data_dir)?).await {
        Ok(server) => server,
        Err(ServerError::Io { source, .. }) if source.kind() == std::io::ErrorKind::AddrInUse => {
            return Err(CliError::PortInUse { port: args.port, by: our_cluster_on(args.port, &data_dir) });
        }
        Err(e) => return Err(e.into()),
    };
    let stop_controllers = CancellationToken::new();
    let controllers_task = run_controllers(&server, controllers, stop_controllers.clone()).await?;
    let record = write_kubeconfig_and_record(&server, args, data_dir, pods)?;
    print_started(&record, output)?;
    shutdown.await?;
    if output == OutputFormat::Text {
        println!("stopping");
    }
    stop_controllers.cancel();
    // The kubelet stops real pods' processes (SIGTERM, then SIGKILL after their grace).
    let _ = controllers_task.await;
    server.shutdown().await;
    Ok(())
}

/// The built-in controllers' configuration from the flags: the nodes, the load-balancer
/// pool and the controllers `--disable-controllers` names (each must be known, or `*`).
fn controllers_config(args: &StartArgs) -> Result<ControllersConfig, CliError> {
    let mut controllers =
        ControllersConfig { nodes: args.nodes, load_balancer_pool: args.lb_range, ..ControllersConfig::default() };
    for name in &args.disable_controllers {
        if name != "*" && !opkit_controllers::ALL.contains(&name.as_str()) {
            return Err(CliError::Usage(format!(
                "unknown controller {name:?} in --disable-controllers; known: {}",
                opkit_controllers::ALL.join(", ")
            )));
        }
        controllers = controllers.disable(name);
    }
    controllers.cert_manager = args.cert_manager;
    Ok(controllers)
}

/// How pods run: the network and isolation modes in use, each with why it fell back
/// from the one asked for (if it did).
struct PodModes {
    network: NetworkMode,
    network_fallback: Option<String>,
    isolation: PodIsolation,
    isolation_fallback: Option<String>,
}

impl PodModes {
    /// The modes `--pod-network` and `--pod-isolation` ask for as this machine allows
    /// them, set in `controllers`.
    fn choose(args: &StartArgs, controllers: &mut ControllersConfig) -> PodModes {
        let requested = match args.pod_network {
            PodNetworkFlag::Auto => None,
            PodNetworkFlag::Namespaces => Some(NetworkMode::Namespaces),
            PodNetworkFlag::Host => Some(NetworkMode::Host),
        };
        let (network, network_fallback) = opkit_controllers::pod_network_mode(requested);
        controllers.pod_network = Some(network);
        let requested = match args.pod_isolation {
            PodIsolationFlag::Auto => None,
            PodIsolationFlag::Host => Some(PodIsolation::Host),
        };
        let (isolation, isolation_fallback) = opkit_controllers::pod_isolation_mode(requested);
        controllers.pod_isolation = requested;
        PodModes { network, network_fallback, isolation, isolation_fallback }
    }
}

/// The API server's configuration: durable in `data_dir` (unless `--in-memory`), on
/// `--port` of the loopback, with the audit log and encryption the flags ask for.
fn server_config(args: &StartArgs, data_dir: &Path) -> Result<ServerConfig, CliError> {
    let mut cfg = ServerConfig::durable(data_dir);
    cfg.bind = SocketAddr::from(([127, 0, 0, 1], args.port));
    if args.in_memory {
        cfg.storage = StorageConfig::InMemory;
    }
    cfg.audit_log = args.audit_log.as_deref().map(std::path::absolute).transpose()?;
    cfg.encryption_provider_config = args.encryption_provider_config.clone();
    Ok(cfg)
}

/// Writes the cluster's kubeconfig and then its record (last: a `--detach` parent
/// waiting for it knows the kubeconfig is written).
fn write_kubeconfig_and_record(
    server: &RunningServer,
    args: StartArgs,
    data_dir: std::path::PathBuf,
    pods: PodModes,
) -> Result<ClusterRecord, CliError> {
    let kubeconfig = std::path::absolute(args.kubeconfig.unwrap_or_else(|| data_dir.join("kubeconfig")))?;
    let mut config = server.kubeconfig(&args.context_name);
    super::context::mark(&mut config, &data_dir);
    opkit_apiserver::kubeconfig::write(&config, &kubeconfig).map_err(ServerError::from)?;
    let record = ClusterRecord {
        server: server.url(),
        kubeconfig,
        context_name: args.context_name,
        data_dir: data_dir.clone(),
        in_memory: args.in_memory,
        load_balancer_addresses: args.lb_range.map(|pool| pool.to_string()),
        pod_network: match pods.network {
            NetworkMode::Namespaces => "namespaces",
            NetworkMode::Host => "host",
        }
        .into(),
        pod_network_fallback_reason: pods.network_fallback,
        pod_isolation: match pods.isolation {
            PodIsolation::Contained => "contained",
            PodIsolation::Host => "host",
        }
        .into(),
        pod_isolation_fallback_reason: pods.isolation_fallback,
        images: data_dir.join("images"),
        cert_manager: args.cert_manager,
        pid: std::process::id(),
        started_at: jiff::Timestamp::now(),
        log_file: args.log_file.as_deref().map(std::path::absolute).transpose()?,
    };
    record.save()?;
    Ok(record)
}

/// Prints the started cluster's record (as JSON, or as text with how to stop it).
fn print_started(record: &ClusterRecord, output: OutputFormat) -> Result<(), CliError> {
    match output {
        OutputFormat::Json => {
            println!("{}", serde_json::to_string(record).map_err(std::io::Error::from)?)
        }
        OutputFormat::Text | OutputFormat::Xunit => {
            println!("{}", record.text());
            println!("Press Ctrl-C to stop (or run `opkit cluster stop --data-dir {}`).", record.data_dir.display());
        }
    }
    Ok(())
}

/// The opkit cluster listening on `port`, when it is the one of the default data
/// directory (and that is not `data_dir`): `DIR (pid N, URL)`.
fn our_cluster_on(port: u16, data_dir: &Path) -> Option<String> {
    let default = std::path::absolute(DEFAULT_DATA_DIR).ok()?;
    if default == data_dir {
        return None;
    }
    let holder = DataDir::holder(&default).ok()??;
    let url = holder.url.as_deref()?;
    url.ends_with(&format!(":{port}")).then(|| format!("{} ({})", default.display(), holder.record))
}

/// Runs the cluster controllers in this process, talking to `server` over loopback;
/// the task ends once they stopped.
async fn run_controllers(
    server: &RunningServer,
    cfg: ControllersConfig,
    stop: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, CliError> {
    let config = kube::Config::from_custom_kubeconfig(server.kubeconfig("opkit"), &KubeConfigOptions::default())
        .await
        .map_err(|e| CliError::Client(e.to_string()))?;
    let client = kube::Client::try_from(config.clone()).map_err(|e| CliError::Client(e.to_string()))?;
    Ok(opkit_controllers::spawn(
        client,
        &cfg.root_ca(server.ca_pem()).cluster_signing(server.ca_pem(), server.ca_key_pem()).with_identities(config),
        stop,
    ))
}
