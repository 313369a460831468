//! What the server does with its registry before it serves: re-serve the CRDs found in
//! storage, then create the objects every cluster starts with (kube-apiserver's
//! post-start hooks). It sits above the registry, which knows no kind: each kind's
//! module says what it creates.

use crate::error::ApiResult;
use crate::kinds;
use crate::registry::Registry;

/// Re-serves every CRD found in storage (after a restart).
pub(crate) async fn restore_crds(registry: &Registry) -> ApiResult<()> {
    kinds::crds::restore(registry).await
}

/// Creates the namespaces every cluster starts with, the system PriorityClasses, the
/// component statuses, the local APIServices of the built-in group/versions, kube's
/// API Priority and Fairness configuration and its bootstrap RBAC policy.
pub(crate) async fn create_initial_objects(registry: &Registry) -> ApiResult<()> {
    kinds::namespaces::bootstrap(registry).await?;
    kinds::bootstrap_priority_classes(registry).await?;
    kinds::bootstrap_component_statuses(registry).await?;
    kinds::bootstrap_apiservices(registry).await?;
    kinds::bootstrap_flowcontrol(registry).await?;
    crate::authz::policy::bootstrap(registry).await
}
