//! NamespaceLifecycle, the first plugin of kube's chain: no new content in a namespace
//! that does not exist or is being terminated. The registry asks it before it builds a
//! new object (so a generated name is still empty), through
//! [`crate::registry::admission::Admission::admit_create`].

use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::view::StoreView;
use crate::registry::{Target, parse_stored};
use crate::storage::ResourceId;

/// Refuses to create objects of a namespaced `target` in a namespace that does not
/// exist or is being terminated (kube's NamespaceLifecycle admission: a 403 naming the
/// object `name`, empty for a generated name, with the `NamespaceTerminating` cause
/// controllers look for).
pub(crate) async fn check_open(view: StoreView<'_>, target: &Target, name: &str) -> ApiResult<()> {
    if !target.info.namespaced {
        return Ok(());
    }
    let ns = target.namespace.clone().unwrap_or_default();
    let id = ResourceId::new("", "namespaces");
    let Some(entry) = view.get(&id, &(String::new(), ns.clone())).await? else {
        return Err(ApiError::not_found("", "namespaces", &ns));
    };
    if parse_stored(&entry.value)?["metadata"]["deletionTimestamp"].is_string() {
        let why = format!("unable to create new content in namespace {ns} because it is being terminated");
        let mut refused = ApiError::forbidden_object(&target.info.group, &target.info.resource, name, &why);
        refused.details.causes.push(Cause {
            reason: "NamespaceTerminating".into(),
            message: format!("namespace {ns} is being terminated"),
            field: "metadata.namespace".into(),
        });
        return Err(refused);
    }
    Ok(())
}
