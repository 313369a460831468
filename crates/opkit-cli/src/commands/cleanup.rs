//! `opkit cleanup PACKAGE`: operator-sdk's `cleanup`, removing an operator OLM installed
//! (`opkit_olm::run_bundle::cleanup`): its Subscription, CSVs, owned CRDs, InstallPlans,
//! CatalogSource and catalog ConfigMap, and `operator-sdk-og` when nothing else uses it
//! (`--delete-crds` and `--delete-operator-groups` with `--delete-all=false` keep them).

use opkit_olm::run_bundle::{CleanupOptions, cleanup_with};
use serde_json::json;

use super::{CliError, kubeconfig};
use crate::cli::CleanupArgs;
use crate::output::Output;

/// Removes the package's operator and waits until everything is gone.
pub(super) async fn cleanup(args: CleanupArgs, out: &mut Output) -> Result<(), CliError> {
    let client = kubeconfig::client(&args.cluster).await?;
    super::run_bundle::ensure_olm(&client, out).await?;
    let timeout = args.cluster.timeout.get();
    // As operator-sdk: --delete-all (the default) turns every other --delete flag on.
    let options = CleanupOptions {
        delete_crds: args.delete_all || args.delete_crds,
        delete_operator_groups: args.delete_all || args.delete_operator_groups,
    };
    let progress = |line: &str| out.step(line);
    let removed = cleanup_with(&client, &args.package, &args.namespace, timeout, &options, &progress).await?;
    out.result("", json!({"package": args.package, "namespace": args.namespace, "deleted": removed.deleted}));
    Ok(())
}
