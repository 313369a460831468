//! What the cluster test suites share (`#[path]`-included by opkit-controllers' and
//! opkit-kubelet's `tests/common`): their error type, waiting on an object's condition
//! with a timeout, and running kubectl against a TestEnv.

use std::time::Duration;

use kube::Resource;
use kube::api::Api;
use kube::runtime::wait::{Condition, await_condition};
use opkit_testenv::TestEnv;

/// The error type of the suites.
pub(crate) type Error = Box<dyn std::error::Error + Send + Sync>;

/// How long a test waits for a condition (generous: the machine is shared).
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// Waits until `cond` holds for the object `name`, or fails after [`WAIT`].
pub(crate) async fn wait<K>(api: &Api<K>, name: &str, cond: impl Condition<K>) -> Result<K, Error>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let got = tokio::time::timeout(WAIT, await_condition(api.clone(), name, cond))
        .await
        .map_err(|_| format!("timed out waiting on {name}"))??;
    Ok(got.ok_or_else(|| format!("{name} is gone"))?)
}

/// Runs kubectl (without blocking the test's runtime) and returns stdout, or an error
/// with its output.
pub(crate) async fn kubectl(env: &TestEnv, args: &[&str]) -> Result<String, Error> {
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(args)
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        return Err(format!("kubectl {args:?} failed: {stdout}{}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(stdout)
}
