//! `opkit cluster start`: the local control plane, stopped by Ctrl-C or SIGTERM.

use std::net::SocketAddr;

use opkit_apiserver::{ApiServer, ServerConfig, StorageConfig};
use serde_json::json;

use super::CliError;
use crate::cli::{OutputFormat, StartArgs};

/// Starts the control plane and serves until a signal arrives.
pub async fn start(args: StartArgs, output: OutputFormat) -> Result<(), CliError> {
    let data_dir = std::path::absolute(&args.data_dir)?;
    std::fs::create_dir_all(&data_dir)?;
    let mut cfg = ServerConfig::durable(&data_dir);
    cfg.bind = SocketAddr::from(([127, 0, 0, 1], args.port));
    if args.in_memory {
        cfg.storage = StorageConfig::InMemory;
    }
    let server = ApiServer::start(cfg).await?;
    let kubeconfig = std::path::absolute(
        args.kubeconfig
            .unwrap_or_else(|| data_dir.join("kubeconfig")),
    )?;
    server.write_kubeconfig(&kubeconfig, "opkit")?;
    match output {
        OutputFormat::Json => println!(
            "{}",
            json!({"server": server.url(), "kubeconfig": kubeconfig, "dataDir": data_dir, "inMemory": args.in_memory})
        ),
        OutputFormat::Text => {
            println!("opkit control plane listening on {}", server.url());
            println!(
                "storage: {}",
                if args.in_memory {
                    "in memory".to_string()
                } else {
                    data_dir.join("state.db").display().to_string()
                }
            );
            println!("To use it with kubectl:");
            println!("  export KUBECONFIG={}", kubeconfig.display());
            println!("Press Ctrl-C to stop.");
        }
    }
    wait_for_signal().await?;
    if output == OutputFormat::Text {
        println!("stopping");
    }
    server.shutdown().await;
    Ok(())
}

async fn wait_for_signal() -> std::io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = term.recv() => Ok(()),
    }
}
