// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The memcached-operator operator's entry point: parses the manager flags, builds the
//! manager with every controller of this project and runs it until SIGTERM.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};
use opkit::{Manager, ManagerArgs};

/// The Lease that replicas of this operator compete for when `--leader-elect` is set.
const LEADER_ELECTION_ID: &str = "86f835c3.example.com";

/// Flags of the operator (controller-runtime's names, so manifests carry over).
#[derive(Parser)]
#[command(name = "memcached-operator", about = "The memcached-operator operator")]
struct Args {
    #[command(flatten)]
    manager: ManagerArgs,
    /// Print this operator's CustomResourceDefinitions as JSON and exit (`opkit generate` uses it).
    #[arg(long, hide = true)]
    print_crds: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    opkit::logging::init();
    let command = Args::command().mut_arg("leader_election_id", |a| a.default_value(LEADER_ELECTION_ID));
    let args = match Args::from_arg_matches(&command.get_matches()) {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    if args.print_crds {
        return match serde_json::to_string_pretty(&memcached_operator::api::crds()) {
            Ok(json) => {
                println!("{json}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "manager exited");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut options = args.manager.options()?;
    if let Some(le) = options.leader_election.as_mut() {
        // Speeds up voluntary hand-over: on SIGTERM the manager stops the leader's work, then
        // releases the Lease before `run` returns, so another replica takes over at once.
        le.release_on_cancel = true;
    }
    let mgr = Manager::from_config(args.manager.config().await?, options)?;
    memcached_operator::controller::setup(&mgr)?;
    // +opkit:scaffold:builder
    tracing::info!("starting manager");
    mgr.run().await?;
    Ok(())
}
