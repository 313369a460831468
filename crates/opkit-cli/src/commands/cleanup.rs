//! `opkit cleanup PACKAGE`: operator-sdk's `cleanup`, removing an operator OLM installed
//! (`opkit_olm::run_bundle::cleanup`): its Subscription, CSVs, owned CRDs, InstallPlans,
//! CatalogSource and catalog ConfigMap, and `operator-sdk-og` when nothing else uses it.

use serde_json::json;

use super::{CliError, kubeconfig};
use crate::cli::CleanupArgs;
use crate::output::Output;

/// Removes the package's operator and waits until everything is gone.
pub async fn cleanup(args: CleanupArgs, out: &mut Output) -> Result<(), CliError> {
    let client = kubeconfig::client(&args.cluster).await?;
    super::run_bundle::ensure_olm(&client, out).await?;
    let timeout = args.cluster.timeout.get();
    let removed =
        opkit_olm::run_bundle::cleanup(&client, &args.package, &args.namespace, timeout, &|line| out.step(line))
            .await?;
    out.result("", json!({"package": args.package, "namespace": args.namespace, "deleted": removed.deleted}));
    Ok(())
}
