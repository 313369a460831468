//! core/v1 ComponentStatuses (deprecated since kube 1.19, still served): read-only
//! objects for the scheduler, the controller manager and the store (`etcd-0`), as
//! `kubectl get componentstatuses` shows them. The server writes them at start-up;
//! clients may only get and list them.

use serde_json::json;

use super::Strategy;
use crate::error::ApiResult;
use crate::registry::{Registry, WriteOptions};
use crate::table::{self, Printer};

/// The strategy of core/v1 componentstatuses.
pub(super) struct ComponentStatuses;

impl Strategy for ComponentStatuses {
    fn table(&self) -> Option<Printer> {
        Some(table::core::componentstatuses())
    }
}

/// Writes the component statuses kube reports: each component healthy.
pub(crate) async fn bootstrap(registry: &Registry) -> ApiResult<()> {
    let Some(info) = registry.catalog().snapshot().lookup("", "v1", "componentstatuses") else { return Ok(()) };
    let target = registry.target(info, "v1".into(), None);
    let opts = WriteOptions { field_manager: "kube-apiserver".into(), ..Default::default() };
    for name in ["scheduler", "controller-manager", "etcd-0"] {
        let body = json!({"apiVersion": "v1", "kind": "ComponentStatus", "metadata": {"name": name},
            "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]});
        registry.create_if_missing(&target, body, &opts).await?;
    }
    Ok(())
}
