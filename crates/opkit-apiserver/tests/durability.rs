//! Durability of `opkit cluster start`: the real binary is SIGKILLed while several clients
//! stream creates; after a restart on the same data dir every acknowledged create is there
//! with its resourceVersion, and new writes get strictly larger, never repeated, versions.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use common::{TIMEOUT, client_from_kubeconfig_yaml, config_map, rv_num, within};

const WRITERS: usize = 8;
const ACKED_BEFORE_KILL: usize = 200;

/// The `opkit` binary in this build's target directory, (re)built first so that it
/// contains the server code under test (cargo does not build other packages' binaries
/// for integration tests).
fn opkit_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/durability-HASH -> target/<profile>/opkit
    let profile_dir = exe.parent().and_then(|d| d.parent()).expect("target profile dir").to_path_buf();
    let bin = profile_dir.join("opkit");
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut build = std::process::Command::new(env!("CARGO"));
    // With the whole workspace selected, as the test build was: `-p opkit-cli` would ask
    // other features of shared crates, rebuild them and relink the `opkit` that other
    // tests running beside this one are executing.
    build.args(["build", "--quiet", "--workspace", "--bin", "opkit"]).current_dir(&workspace);
    // Without the variables cargo set for this test's crate: the build would record them
    // for build scripts that rerun when they change (ring's reads `CARGO_PKG_NAME`), and
    // rebuild everything above those, here and in the next build of the workspace.
    // The same rule as opkit-cli's test support (`without_test_crate_env`).
    const NAMES: [&str; 8] = [
        "CARGO_CRATE_NAME",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_BIN_NAME",
        "OUT_DIR",
    ];
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if NAMES.contains(&name) || name.starts_with("CARGO_PKG_") || name.starts_with("CARGO_BIN_EXE_") {
            build.env_remove(name);
        }
    }
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    let status = build.status().expect("running cargo build --bin opkit");
    assert!(status.success(), "cargo build --workspace --bin opkit failed");
    assert!(bin.exists(), "opkit binary not found at {}", bin.display());
    bin
}

/// A running `opkit cluster start` process and a client for it.
struct Cluster {
    child: Child,
    client: kube::Client,
}

impl Cluster {
    async fn start(bin: &PathBuf, data_dir: &std::path::Path) -> Cluster {
        let mut child = Command::new(bin)
            .args(["cluster", "start", "--data-dir"])
            .arg(data_dir)
            .args(["--port", "0", "-o", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn opkit");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = within("opkit to print its JSON line", lines.next_line())
            .await
            .expect("read stdout")
            .expect("opkit exited before printing its address");
        let info: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad JSON line {line:?}: {e}"));
        assert!(info["server"].as_str().is_some_and(|s| s.starts_with("https://127.0.0.1:")), "{info}");
        let kubeconfig = info["kubeconfig"].as_str().expect("kubeconfig path");
        let yaml = std::fs::read_to_string(kubeconfig).expect("read kubeconfig");
        let client = client_from_kubeconfig_yaml(&yaml).await;
        Cluster { child, client }
    }

    fn pid(&self) -> String {
        self.child.id().expect("process running").to_string()
    }

    async fn sigkill(&mut self) {
        let status = std::process::Command::new("kill").args(["-9", &self.pid()]).status().expect("run kill");
        assert!(status.success(), "kill -9 failed");
        let exit = within("opkit to die", self.child.wait()).await.expect("wait");
        assert!(!exit.success(), "SIGKILLed process reports failure");
    }

    async fn stop(mut self) {
        let _ = std::process::Command::new("kill").args(["-TERM", &self.pid()]).status();
        let _ = tokio::time::timeout(TIMEOUT, self.child.wait()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_sigkill_and_versions_never_repeat() {
    let bin = opkit_binary();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cluster = Cluster::start(&bin, dir.path()).await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");

    let acked: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let killed = Arc::new(AtomicBool::new(false));
    let (enough_tx, mut enough_rx) = tokio::sync::watch::channel(0usize);
    let enough_tx = Arc::new(enough_tx);
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..WRITERS {
        let (api, acked, killed, enough_tx) = (api.clone(), acked.clone(), killed.clone(), enough_tx.clone());
        writers.spawn(async move {
            for i in 0..100_000 {
                let name = format!("w{w}-{i:06}");
                match api.create(&PostParams::default(), &config_map(&name, &[("writer", "x")])).await {
                    Ok(cm) => {
                        let rv = cm.metadata.resource_version.clone().expect("rv");
                        let n = {
                            let mut a = acked.lock();
                            a.push((name, rv));
                            a.len()
                        };
                        enough_tx.send_replace(n);
                    }
                    Err(e) => {
                        assert!(killed.load(Ordering::SeqCst), "create {name} failed before the kill: {e}");
                        return;
                    }
                }
            }
        });
    }
    let reached = tokio::time::timeout(TIMEOUT, async {
        tokio::select! {
            r = enough_rx.wait_for(|n| *n >= ACKED_BEFORE_KILL) => { r.expect("writers alive"); }
            Some(r) = writers.join_next() => {
                r.expect("a writer failed before the kill");
                panic!("a writer stopped before the kill");
            }
        }
    })
    .await;
    assert!(reached.is_ok(), "only {} creates acknowledged within {TIMEOUT:?}", *enough_rx.borrow());
    killed.store(true, Ordering::SeqCst);
    cluster.sigkill().await;
    within("writers to notice the kill", async {
        while let Some(r) = writers.join_next().await {
            r.expect("writer task");
        }
    })
    .await;
    let acked = acked.lock().clone();
    assert!(acked.len() >= ACKED_BEFORE_KILL);

    let cluster = Cluster::start(&bin, dir.path()).await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let listed = api.list(&ListParams::default()).await.expect("list after restart");
    let stored: BTreeMap<String, String> = listed
        .items
        .iter()
        .map(|c| (c.metadata.name.clone().expect("name"), c.metadata.resource_version.clone().expect("rv")))
        .collect();
    let mut lost = Vec::new();
    for (name, rv) in &acked {
        match stored.get(name) {
            Some(got) if got == rv => {}
            Some(got) => lost.push(format!("{name}: acknowledged rv {rv}, stored rv {got}")),
            None => lost.push(format!("{name}: acknowledged rv {rv}, missing")),
        }
    }
    assert!(lost.is_empty(), "{} of {} acknowledged creates lost:\n{}", lost.len(), acked.len(), lost.join("\n"));

    let mut seen: HashSet<u64> = acked.iter().map(|(_, rv)| rv.parse().expect("numeric rv")).collect();
    seen.extend(stored.values().map(|rv| rv.parse::<u64>().expect("numeric rv")));
    let list_rv: u64 = listed.metadata.resource_version.as_deref().expect("list rv").parse().expect("numeric");
    let max_seen = seen.iter().copied().max().expect("some versions").max(list_rv);
    let mut previous = max_seen;
    for i in 0..20 {
        let cm = api
            .create(&PostParams::default(), &config_map(&format!("after-{i:02}"), &[]))
            .await
            .expect("create after restart");
        let rv = rv_num(&cm.metadata);
        assert!(rv > previous, "new write got rv {rv}, not above {previous} (max before restart {max_seen})");
        assert!(seen.insert(rv), "resourceVersion {rv} repeated");
        previous = rv;
    }
    cluster.stop().await;
}
