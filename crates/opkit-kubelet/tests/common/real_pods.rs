//! Helpers of the real-pod suites: a TestEnv that runs real pods, test programs
//! (`#!/bin/sh` scripts) loaded into its image store, waiting for a pod's events or for a
//! line it logs, and a versioned kubectl fed a stdin.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, LogParams};
use opkit_controllers::ControllersConfig;
use opkit_kubelet::PodIsolation;
use opkit_testenv::TestEnv;

use super::{Error, WAIT};

/// A TestEnv with one simulated node running real pods, CrashLoopBackOff from 1 s, its
/// containers uncontained (these suites' programs report through files on the host; the
/// contained mode has its own suite, `real_pod_isolation.rs`).
pub(crate) async fn real_env() -> Result<TestEnv, Error> {
    real_env_with(PodIsolation::Host).await
}

/// [`real_env`] with its containers isolated as `isolation`.
pub(crate) async fn real_env_with(isolation: PodIsolation) -> Result<TestEnv, Error> {
    let cfg = ControllersConfig {
        nodes: 1,
        crash_loop_backoff: Duration::from_secs(1),
        pod_isolation: Some(isolation),
        ..Default::default()
    };
    Ok(TestEnv::builder().controllers(cfg).real_pods().start().await?)
}

/// Writes `body` as a `#!/bin/sh` program in `dir` and loads it as `image`.
pub(crate) fn load_script(env: &TestEnv, dir: &Path, image: &str, body: &str) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(image.replace([':', '/'], "_"));
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n"))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    env.load_image(image, &path)?;
    Ok(())
}

/// Waits until `path` exists and returns its contents.
pub(crate) async fn file(path: &Path) -> Result<String, Error> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(s) = std::fs::read_to_string(path)
            && !s.is_empty()
        {
            return Ok(s);
        }
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {}", path.display()).into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for an event about pod `name` with `reason` whose note starts with `note`.
pub(crate) async fn event(env: &TestEnv, name: &str, reason: &str, note: &str) -> Result<(), Error> {
    let events: Api<Event> = Api::namespaced(env.client(), "default");
    let deadline = Instant::now() + WAIT;
    loop {
        let list = events.list(&ListParams::default()).await?;
        let found = list.items.iter().any(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
                && e.note.as_deref().is_some_and(|n| n.starts_with(note))
        });
        if found {
            return Ok(());
        }
        if Instant::now() > deadline {
            let seen: Vec<_> = list.items.iter().map(|e| (e.reason.clone(), e.note.clone())).collect();
            return Err(format!("no {reason} event {note:?} for {name}: {seen:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until pod `name` has logged the line `line`.
pub(crate) async fn logged(pods: &Api<Pod>, name: &str, line: &str) -> Result<(), Error> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(log) = pods.logs(name, &LogParams::default()).await
            && log.lines().any(|l| l == line)
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("pod {name} never logged {line:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs kubectl `version` (a versioned binary) against `env` with `stdin`; stdout, stderr
/// and the exit code.
pub(crate) async fn kubectl_with(
    version: &str,
    env: &TestEnv,
    args: &[&str],
    stdin: &[u8],
) -> Result<(String, String, i32), Error> {
    use std::process::Stdio;
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(crate::kubectl::kubectl_binary(version))
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin).await?;
    }
    let out = tokio::time::timeout(WAIT, child.wait_with_output()).await??;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok((text(&out.stdout), text(&out.stderr), out.status.code().unwrap_or(-1)))
}
