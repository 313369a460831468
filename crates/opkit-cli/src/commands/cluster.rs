//! `opkit cluster start`: the local control plane, stopped by Ctrl-C or SIGTERM.

use std::net::SocketAddr;

use kube::config::KubeConfigOptions;
use opkit_apiserver::{ApiServer, RunningServer, ServerConfig, StorageConfig};
use opkit_controllers::{ControllersConfig, NetworkMode};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::CliError;
use crate::cli::{OutputFormat, PodNetworkFlag, StartArgs};

/// Starts the control plane and serves until a signal arrives.
pub async fn start(args: StartArgs, output: OutputFormat) -> Result<(), CliError> {
    let mut controllers =
        ControllersConfig { nodes: args.nodes, load_balancer_pool: args.lb_range, ..ControllersConfig::default() };
    let load_balancers = args.lb_range.map_or_else(|| "the nodes' addresses".to_string(), |pool| pool.to_string());
    for name in &args.disable_controllers {
        if name != "*" && !opkit_controllers::ALL.contains(&name.as_str()) {
            return Err(CliError::Usage(format!(
                "unknown controller {name:?} in --disable-controllers; known: {}",
                opkit_controllers::ALL.join(", ")
            )));
        }
        controllers = controllers.disable(name);
    }
    let data_dir = std::path::absolute(&args.data_dir)?;
    std::fs::create_dir_all(&data_dir)?;
    controllers.volume_root = Some(data_dir.join("volumes"));
    controllers.images = Some(data_dir.join("images"));
    controllers.pod_root = Some(data_dir.join("pods"));
    let requested = match args.pod_network {
        PodNetworkFlag::Auto => None,
        PodNetworkFlag::Namespaces => Some(NetworkMode::Namespaces),
        PodNetworkFlag::Host => Some(NetworkMode::Host),
    };
    let (pod_network, fallback) = opkit_controllers::pod_network_mode(requested);
    controllers.pod_network = Some(pod_network);
    controllers.cert_manager = args.cert_manager;
    let mut cfg = ServerConfig::durable(&data_dir);
    cfg.bind = SocketAddr::from(([127, 0, 0, 1], args.port));
    if args.in_memory {
        cfg.storage = StorageConfig::InMemory;
    }
    cfg.audit_log = args.audit_log.as_deref().map(std::path::absolute).transpose()?;
    cfg.encryption_provider_config = args.encryption_provider_config;
    let server = ApiServer::start(cfg).await?;
    let stop_controllers = CancellationToken::new();
    let controllers_task = run_controllers(&server, controllers, stop_controllers.clone()).await?;
    let kubeconfig = std::path::absolute(args.kubeconfig.unwrap_or_else(|| data_dir.join("kubeconfig")))?;
    server.write_kubeconfig(&kubeconfig, "opkit")?;
    match output {
        OutputFormat::Json => println!(
            "{}",
            json!({"server": server.url(), "kubeconfig": kubeconfig, "dataDir": data_dir, "inMemory": args.in_memory,
                "loadBalancerAddresses": args.lb_range.map(|pool| pool.to_string()),
                "podNetwork": match pod_network { NetworkMode::Namespaces => "namespaces", NetworkMode::Host => "host" },
                "podNetworkFallbackReason": fallback, "images": data_dir.join("images"),
                "certManager": args.cert_manager})
        ),
        OutputFormat::Text => {
            println!("opkit control plane listening on {}", server.url());
            println!(
                "storage: {}",
                if args.in_memory { "in memory".to_string() } else { data_dir.join("state.db").display().to_string() }
            );
            println!("LoadBalancer Services get: {load_balancers}");
            println!("Pods whose images are loaded (`opkit cluster load`) run as processes on: {pod_network}");
            if let Some(reason) = &fallback {
                println!("  (network namespaces are not available: {reason})");
            }
            println!("Other pods are simulated.");
            if args.cert_manager {
                println!(
                    "cert-manager.io Issuers and Certificates are served by opkit (--cert-manager=false to install your own)."
                );
            }
            println!("To use it with kubectl:");
            println!("  export KUBECONFIG={}", kubeconfig.display());
            println!("Press Ctrl-C to stop.");
        }
    }
    opkit::signal::shutdown_requested().await?;
    if output == OutputFormat::Text {
        println!("stopping");
    }
    stop_controllers.cancel();
    // The kubelet stops real pods' processes (SIGTERM, then SIGKILL after their grace).
    let _ = controllers_task.await;
    server.shutdown().await;
    Ok(())
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
