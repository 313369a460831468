//! Helpers of the real-pod suites: a TestEnv that runs real pods, test programs
//! (`#!/bin/sh` scripts) loaded into its image store, and waiting for a pod's events.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
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
