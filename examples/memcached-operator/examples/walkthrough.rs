// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The README's main job: the Memcached operator end to end on an embedded control plane.
//!
//! ```sh
//! cargo run --release -p memcached-operator --example walkthrough
//! ```
//! Starts an in-process Kubernetes-compatible API server with the cluster controllers
//! (simulated nodes and pods), then runs `memcached_operator::walkthrough`. Prints each
//! step and a summary; `-o json` prints the summary as JSON. Exits non-zero on failure.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.windows(2).any(|w| w[0] == "-o" && w[1] == "json");
    let say = |msg: &str| {
        if !json {
            eprintln!("• {msg}");
        }
    };
    say("starting the embedded control plane (API server, controllers, 3 simulated nodes)");
    let env = match opkit_testenv::TestEnv::start().await {
        Ok(env) => env,
        Err(e) => {
            eprintln!("error: starting the control plane: {e}");
            return ExitCode::FAILURE;
        }
    };
    match memcached_operator::walkthrough::run(env.client(), "default", &say).await {
        Ok(summary) => {
            if json {
                println!("{}", serde_json::to_string_pretty(&summary).expect("the summary has only string keys"));
            } else {
                println!(
                    "Memcached walkthrough passed in {:.1}s: 3 nodes after {:.1}s, 5 after {:.1}s, \
                     Deployment and pods collected {:.1}s after the delete.",
                    summary.total_secs, summary.secs_to_3, summary.secs_to_5, summary.secs_to_collected
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
