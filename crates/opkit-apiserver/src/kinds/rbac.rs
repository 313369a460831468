//! RBAC objects (Role, ClusterRole, RoleBinding, ClusterRoleBinding): their names only
//! have to be URL path segments, as kube's `ValidateRBACName` says, so names such as
//! `system:controller:job` or `cert-manager:leaderelection` are valid.

use super::Strategy;
use crate::registry::meta::validate_path_segment;
use crate::schema::FieldError;
use crate::table::Printer;

/// The strategy of the four RBAC kinds, with the kind's Table printer if it has one.
pub(super) struct RbacObjects(pub(super) Option<fn() -> Printer>);

impl Strategy for RbacObjects {
    fn validate_name(&self, name: &str) -> Option<FieldError> {
        validate_path_segment("metadata.name", name)
    }

    fn table(&self) -> Option<Printer> {
        self.0.map(|printer| printer())
    }
}
