// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! Leader election through the operator's own `main`: two replicas of the real
//! `memcached-operator` binary with `--leader-elect` compete for the scaffold's Lease
//! (`<fnv32a(repo)>.<domain>`); SIGTERM to the leader makes it release the Lease on its
//! way out (`release_on_cancel`, set by the scaffolded main) and the other replica takes
//! over within the 2 s retry period instead of waiting for the 15 s lease to expire.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use opkit_testenv::TestEnv;

/// Where the leader-election Lease lives (passed as `--leader-election-namespace`).
const NAMESPACE: &str = "default";
/// How long a replica may take to start, lead, or stop.
const STARTUP: Duration = Duration::from_secs(60);
/// controller-runtime's default retry period, which the scaffold keeps.
const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// controller-runtime's default lease duration, which the scaffold keeps.
const LEASE_DURATION: Duration = Duration::from_secs(15);

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// One running `memcached-operator` process; killed and reaped when dropped.
struct Replica {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Replica {
    /// Starts the operator binary with leader election against `env`. Its identity is
    /// `<name>_<uuid>` (the runtime uses `$HOSTNAME` as the prefix).
    fn start(env: &TestEnv, name: &'static str, logs: &Path) -> std::io::Result<Replica> {
        let log = logs.join(format!("{name}.log"));
        // The scaffolded main logs to stderr; keep stdout too.
        let stdout = std::fs::File::create(&log)?;
        let stderr = stdout.try_clone()?;
        let child = Command::new(env!("CARGO_BIN_EXE_memcached-operator"))
            .args(["--leader-elect", "--leader-election-namespace", NAMESPACE])
            // Both replicas run on this host: no fixed ports.
            .args(["--metrics-bind-address", "0", "--health-probe-bind-address", "0"])
            .arg("--kubeconfig")
            .arg(env.kubeconfig_path())
            .env("HOSTNAME", name)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("LEADER_ELECTION_ID")
            .env_remove("WATCH_NAMESPACE")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()?;
        Ok(Replica { name, child, log })
    }

    /// Whether `identity` (a Lease holder) is this replica's.
    fn owns(&self, identity: &str) -> bool {
        identity.strip_prefix(self.name).is_some_and(|rest| rest.starts_with('_'))
    }

    /// What the replica logged so far.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_else(|e| format!("<cannot read {}: {e}>", self.log.display()))
    }

    /// Sends SIGTERM, as the kubelet does when it stops a pod.
    fn terminate(&self) -> TestResult {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status()?;
        if !status.success() {
            return Err(format!("kill -TERM {} failed: {status}", self.child.id()).into());
        }
        Ok(())
    }

    /// Waits for the process to exit.
    async fn exited(&mut self, within: Duration) -> Result<ExitStatus, Box<dyn std::error::Error>> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                return Err(format!("{} still running after {within:?}:\n{}", self.name, self.log()).into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the replica logged `line` (how a follower says it is contending).
    async fn logged(&self, line: &str, within: Duration) -> TestResult {
        let deadline = Instant::now() + within;
        while !self.log().contains(line) {
            if Instant::now() > deadline {
                return Err(format!("{} did not log {line:?} within {within:?}:\n{}", self.name, self.log()).into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The scaffold's leader election ID: `<fnv32a(repo)>.<domain>` from the PROJECT file.
fn lease_name() -> Result<String, Box<dyn std::error::Error>> {
    let project = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("PROJECT"))?;
    let field = |key: &str| {
        project
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(": ").map(str::trim))
            .ok_or_else(|| format!("PROJECT has no top-level {key}"))
    };
    let (repo, domain) = (field("repo")?, field("domain")?);
    let mut hash: u32 = 0x811c_9dc5;
    for b in repo.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    Ok(format!("{hash:08x}.{domain}"))
}

/// The Lease's holder as a watch sees it change (`""` when released).
type Holders = std::pin::Pin<Box<dyn futures::Stream<Item = (String, Instant)> + Send>>;

fn holders(env: &TestEnv, lease: &str) -> Holders {
    let api: Api<Lease> = Api::namespaced(env.client(), NAMESPACE);
    let config = watcher::Config::default().fields(&format!("metadata.name={lease}"));
    watcher(api, config)
        .applied_objects()
        .filter_map(|lease| async move {
            let lease = lease.ok()?;
            Some((lease.spec.and_then(|s| s.holder_identity).unwrap_or_default(), Instant::now()))
        })
        .boxed()
}

/// Waits for the next holder that satisfies `wanted`; returns it and when it was seen.
async fn next_holder(
    stream: &mut Holders,
    wanted: impl Fn(&str) -> bool,
    within: Duration,
) -> Result<(String, Instant), String> {
    let wait = async {
        while let Some((holder, at)) = stream.next().await {
            if wanted(&holder) {
                return Ok((holder, at));
            }
        }
        Err("the lease watch ended".to_string())
    };
    tokio::time::timeout(within, wait).await.map_err(|_| format!("no such lease holder within {within:?}"))?
}

#[tokio::test]
async fn sigterm_releases_the_lease_and_the_other_replica_takes_over() -> TestResult {
    let env = TestEnv::start().await?;
    env.install_crds(memcached_operator::api::crds()).await?;
    let lease = lease_name()?;
    assert_eq!(lease, "86f835c3.example.com", "the lease name the scaffolded main.rs uses");
    let logs = tempfile_dir()?;
    let mut leases = holders(&env, &lease);

    let first = Replica::start(&env, "replica-a", &logs)?;
    let (holder, _) = next_holder(&mut leases, |h| !h.is_empty(), STARTUP)
        .await
        .map_err(|e| format!("{e}; replica-a:\n{}", first.log()))?;
    assert!(first.owns(&holder), "the only replica leads: {holder}");
    let mut second = Replica::start(&env, "replica-b", &logs)?;
    // The follower contends only once it has started: wait for that, not for the clock.
    second.logged("attempting to acquire leader lease", STARTUP).await?;
    let (mut leader, follower) = (first, &mut second);

    let terminated = Instant::now();
    leader.terminate()?;
    let (_, released) = next_holder(&mut leases, str::is_empty, LEASE_DURATION)
        .await
        .map_err(|e| format!("leader did not release the lease: {e}\nleader:\n{}", leader.log()))?;
    let (holder, taken) = next_holder(&mut leases, |h| !h.is_empty(), LEASE_DURATION)
        .await
        .map_err(|e| format!("{e}\nleader:\n{}\nfollower:\n{}", leader.log(), follower.log()))?;
    let (released_after, takeover) = (released - terminated, taken - terminated);
    println!("lease released {released_after:?} and taken over {takeover:?} after SIGTERM");
    assert!(follower.owns(&holder), "the other replica took over: {holder}");
    assert!(
        takeover < RETRY_PERIOD,
        "takeover after SIGTERM took {takeover:?} (release after {released_after:?}); retry period {RETRY_PERIOD:?}"
    );

    let status = leader.exited(STARTUP).await?;
    assert!(status.success(), "the old leader exits cleanly after SIGTERM: {status}\n{}", leader.log());
    assert!(leader.log().contains("released leader lease"), "{}", leader.log());
    // The new leader still holds the lease: nobody else is left to take it.
    let api: Api<Lease> = Api::namespaced(env.client(), NAMESPACE);
    let now = api.get(&lease).await?.spec.and_then(|s| s.holder_identity).unwrap_or_default();
    assert!(follower.owns(&now), "still led by the other replica: {now}");
    Ok(())
}

/// A fresh directory for the replicas' logs under Cargo's per-target temporary directory.
fn tempfile_dir() -> std::io::Result<PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("leader-election-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
