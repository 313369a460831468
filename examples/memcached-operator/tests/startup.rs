// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The operator binary as a user starts it: it watches the cluster `--kubeconfig` and
//! `--context` choose (`$KUBECONFIG` with several files still works), and when it cannot
//! work it exits at once with a message on stderr that says why and what to do (its CRD
//! is not installed: `make install`; no API server answers: is the cluster running?),
//! without colour codes when stderr is not a terminal.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};
use memcached_operator::api::cache_v1alpha1::{Memcached, MemcachedSpec};
use opkit_testenv::{TestEnv, wait_for};
use tokio::process::Command;

/// How long the operator may take to start, fail or reconcile.
const TIMEOUT: Duration = Duration::from_secs(60);

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The operator with `args`, no fixed ports, and `KUBECONFIG` set to `kubeconfig_env`
/// (or unset); killed when dropped.
fn operator(args: &[OsString], kubeconfig_env: Option<OsString>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memcached-operator"));
    cmd.args(["--metrics-bind-address", "0", "--health-probe-bind-address", "0"])
        .args(args)
        .env("RUST_LOG", "info")
        .env_remove("WATCH_NAMESPACE")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    if let Some(value) = kubeconfig_env {
        cmd.env("KUBECONFIG", value);
    }
    cmd
}

/// Runs the operator until it exits (it must, within [`TIMEOUT`]); returns its stderr.
async fn exits_with_error(mut cmd: Command) -> Result<String, Box<dyn std::error::Error>> {
    let out = tokio::time::timeout(TIMEOUT, cmd.output()).await.map_err(|_| "the operator did not exit")??;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        return Err(format!("the operator exited successfully:\n{stderr}").into());
    }
    Ok(stderr)
}

fn kubeconfig_flag(path: &Path) -> Vec<OsString> {
    vec!["--kubeconfig".into(), path.into()]
}

fn assert_mentions(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} missing from stderr:\n{text}");
    }
    assert!(!text.contains('\u{1b}'), "colour codes on a stderr that is not a terminal:\n{text}");
}

#[tokio::test]
async fn without_its_crd_the_operator_exits_naming_it_and_make_install() -> TestResult {
    let env = TestEnv::builder().without_controllers().start().await?;
    let stderr = exits_with_error(operator(&kubeconfig_flag(env.kubeconfig_path()), None)).await?;
    let url = env.server().url();
    assert_mentions(
        &stderr,
        &["ERROR", "Memcached", "cache.example.com/v1alpha1", "memcacheds", url.trim_end_matches('/'), "make install"],
    );
    Ok(())
}

#[tokio::test]
async fn without_an_api_server_the_operator_names_its_url() -> TestResult {
    let env = TestEnv::builder().without_controllers().start().await?;
    // The environment's kubeconfig, pointing at a loopback port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let url = format!("https://{closed}");
    let text = std::fs::read_to_string(env.kubeconfig_path())?.replace(env.server().url().trim_end_matches('/'), &url);
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, text)?;
    let stderr = exits_with_error(operator(&kubeconfig_flag(&kubeconfig), None)).await?;
    assert_mentions(&stderr, &["ERROR", &url, "is the cluster running?", "opkit cluster start"]);
    Ok(())
}

#[tokio::test]
async fn the_context_flag_chooses_the_cluster_among_kubeconfig_files() -> TestResult {
    let (a, b) = (TestEnv::builder().without_controllers().start().await?, TestEnv::start().await?);
    b.install_crds(memcached_operator::api::crds()).await?;
    let dir = tempfile::tempdir()?;
    let (path_a, path_b) = (dir.path().join("a"), dir.path().join("b"));
    a.server().write_kubeconfig(&path_a, "a")?;
    b.server().write_kubeconfig(&path_b, "b")?;
    // $KUBECONFIG lists both files; the first one's current context (`a`) is the default.
    let both = std::env::join_paths([&path_a, &path_b])?;

    // By default the operator watches `a`, which lacks the CRD.
    let stderr = exits_with_error(operator(&[], Some(both.clone()))).await?;
    assert_mentions(&stderr, &["Memcached", a.server().url().trim_end_matches('/'), "make install"]);

    // With --context b it reconciles in `b`.
    let mut running = operator(&["--context".into(), "b".into()], Some(both)).stderr(Stdio::null()).spawn()?;
    let memcacheds: Api<Memcached> = Api::namespaced(b.client(), "default");
    memcacheds.create(&PostParams::default(), &Memcached::new("cache", MemcachedSpec { size: 1 })).await?;
    let deployments: Api<Deployment> = Api::namespaced(b.client(), "default");
    wait_for(&deployments, "cache", "to be created by the operator", |d: Option<&Deployment>| d.is_some(), TIMEOUT)
        .await?;
    running.kill().await?;
    Ok(())
}
