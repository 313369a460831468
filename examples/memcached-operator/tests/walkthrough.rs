// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The README's main job (`--example walkthrough`), headless: its library entry point on
//! an embedded control plane must complete and report what it saw.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walkthrough_completes() -> Result<(), Box<dyn std::error::Error>> {
    let env = opkit_testenv::TestEnv::start().await?;
    let lines = std::sync::Mutex::new(Vec::new());
    let say = |m: &str| lines.lock().expect("lock").push(m.to_string());
    let summary = memcached_operator::walkthrough::run(env.client(), "default", &say).await?;
    assert_eq!(summary.nodes_at_3.len(), 3);
    assert_eq!(summary.nodes_at_5.len(), 5);
    assert!(summary.nodes_at_3.iter().all(|n| summary.nodes_at_5.contains(n)), "{summary:?}");
    let lines = lines.into_inner()?;
    assert!(lines.iter().any(|l| l.contains("garbage-collected")), "{lines:?}");
    assert!(lines.iter().filter(|l| l.starts_with("  pod/") && l.contains("Running")).count() == 3, "{lines:?}");
    Ok(())
}
