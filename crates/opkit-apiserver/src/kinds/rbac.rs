//! RBAC objects (Role, ClusterRole, RoleBinding, ClusterRoleBinding): their names only
//! have to be URL path segments, as kube's `ValidateRBACName` says, so names such as
//! `system:controller:job` or `cert-manager:leaderelection` are valid; and writing them
//! is subject to kube's escalation prevention (`crate::authz::escalation`).

use serde_json::Value;

use super::Strategy;
use crate::auth::user::UserInfo;
use crate::authz::escalation;
use crate::error::ApiResult;
use crate::registry::meta::validate_path_segment;
use crate::registry::view::StoreView;
use crate::schema::FieldError;
use crate::table::Printer;

/// The strategy of one of the four RBAC kinds.
pub(super) struct RbacObjects {
    resource: &'static str,
    binding: bool,
    printer: Option<fn() -> Printer>,
}

impl RbacObjects {
    /// Roles or ClusterRoles (`resource`).
    pub(super) const fn role(resource: &'static str) -> RbacObjects {
        RbacObjects { resource, binding: false, printer: None }
    }

    /// RoleBindings or ClusterRoleBindings (`resource`), with their Table printer.
    pub(super) const fn binding(resource: &'static str, printer: fn() -> Printer) -> RbacObjects {
        RbacObjects { resource, binding: true, printer: Some(printer) }
    }
}

impl Strategy for RbacObjects {
    fn validate_name(&self, name: &str) -> Option<FieldError> {
        validate_path_segment("metadata.name", name)
    }

    fn admit(&self, view: &StoreView<'_>, obj: &mut Value, old: Option<&Value>, user: &UserInfo) -> ApiResult<()> {
        if self.binding {
            escalation::check_binding(view, user, self.resource, obj)
        } else {
            escalation::check_role(view, user, self.resource, obj, old)
        }
    }

    fn table(&self) -> Option<Printer> {
        self.printer.map(|printer| printer())
    }
}
