//! `opkit run bundle DIR` and `opkit run bundle-upgrade DIR`: operator-sdk's commands,
//! from bundle directories instead of images (`opkit_olm::run_bundle`). OLM must be
//! installed (`opkit olm install`); progress is printed as operator-sdk logs it.

use opkit_olm::OlmError;
use opkit_olm::run_bundle::{self, Installed, RunOptions};
use opkit_olm_bundle::Bundle;
use serde_json::json;

use super::{CliError, kubeconfig};
use crate::cli::{RunBundleArgs, RunBundleUpgradeArgs};
use crate::output::Output;

/// Installs the bundle's operator and waits for its CSV to succeed.
pub(super) async fn bundle(args: RunBundleArgs, out: &mut Output) -> Result<(), CliError> {
    let bundle = Bundle::load(&args.dir)?;
    let client = kubeconfig::client(&args.cluster).await?;
    ensure_olm(&client, out).await?;
    let options =
        RunOptions { namespace: args.namespace, install_mode: args.install_mode, timeout: args.cluster.timeout.get() };
    let installed = run_bundle::run_bundle(&client, &bundle, &options, &|line| out.step(line)).await;
    let installed = explain(&client, &bundle, &options.namespace, installed).await?;
    out.result("", json!(installed));
    Ok(())
}

/// Upgrades the operator `run bundle` installed to the bundle's version.
pub(super) async fn bundle_upgrade(args: RunBundleUpgradeArgs, out: &mut Output) -> Result<(), CliError> {
    let bundle = Bundle::load(&args.dir)?;
    let client = kubeconfig::client(&args.cluster).await?;
    ensure_olm(&client, out).await?;
    let options = RunOptions { namespace: args.namespace, install_mode: None, timeout: args.cluster.timeout.get() };
    let installed = run_bundle::run_bundle_upgrade(&client, &bundle, &options, &|line| out.step(line)).await;
    let installed = explain(&client, &bundle, &options.namespace, installed).await?;
    out.result("", json!(installed));
    Ok(())
}

/// `result`, a timeout naming the last Warning event of the pods of the bundle's
/// Deployments (a pod that cannot mount a volume or keeps crashing says why here).
async fn explain(
    client: &kube::Client,
    bundle: &Bundle,
    ns: &str,
    result: Result<Installed, OlmError>,
) -> Result<Installed, CliError> {
    match result {
        Err(e @ OlmError::Timeout(_)) => {
            let selectors: Vec<_> = bundle
                .csv
                .spec
                .install
                .spec
                .deployments
                .iter()
                .map(|d| d.spec.selector.match_labels.clone().unwrap_or_default())
                .collect();
            Err(super::pod_warnings::explain_timeout(client, ns, &selectors, e.into()).await)
        }
        other => other.map_err(CliError::from),
    }
}

/// Fails when OLM's CRDs are not installed, and warns when its controllers do not run.
pub(super) async fn ensure_olm(client: &kube::Client, out: &Output) -> Result<(), CliError> {
    let status = opkit_olm::install::status(client).await?;
    if !status.installed() {
        return Err(CliError::Usage("OLM is not installed on this cluster; run `opkit olm install` first".into()));
    }
    if status.running.is_none() {
        out.warn(
            "OLM's controllers do not seem to run (no fresh olm/olm-operator Lease); `opkit olm install` starts them",
        );
    }
    Ok(())
}
