//! The per-kind strategy the generic registry is configured with, as kube-apiserver's
//! `genericregistry.Store` is configured per resource with a `RESTCreateStrategy`,
//! `RESTUpdateStrategy` and `RESTDeleteStrategy`.
//!
//! The registry knows Kubernetes' object semantics (metadata, optimistic concurrency,
//! generation, finalizers, field management) but never the name of a kind. Everything
//! that differs from kind to kind is a method of the [`Strategy`] trait, whose defaults
//! are the generic behaviour: create-time preparation (server-set status), update
//! preparation (status-subresource rules), defaulting, name and object validation, the
//! kind's own admission and allocation (reading other objects through a [`StoreView`]),
//! hooks before and after a commit and after removal, deletion rules (graceful pod
//! deletion, staged namespace deletion), conversion between a served and a stored form,
//! extra subresources, the field labels selectors may use and the Table printer.
//!
//! The strategies themselves live above the registry (the crate-private `kinds` module,
//! one module per kind); the server hands their table in as [`Strategies`] when it builds
//! the [`Registry`], so this module imports none of them.

use serde_json::Value;

use super::Registry;
use super::meta::validate_subdomain;
use super::view::StoreView;
use crate::auth::user::UserInfo;
use crate::catalog::ResourceInfo;
use crate::error::ApiResult;
use crate::schema::FieldError;
use crate::selector::FieldLabels;
use crate::table::Printer;

/// Work a strategy asks the registry to do once a write is committed, given the object
/// as stored.
pub(crate) type AfterCommit = Box<dyn FnOnce(&Registry, &Value) + Send>;

/// A subresource a kubelet serves: its name, the kind discovery lists for it, its verbs.
pub(crate) struct KubeletSubresource {
    /// The subresource, e.g. `exec`.
    pub name: &'static str,
    /// The kind discovery names, e.g. `PodExecOptions`.
    pub kind: &'static str,
    /// The verbs discovery lists.
    pub verbs: &'static [&'static str],
}

/// The behaviour of one kind. Every method has the generic behaviour as its default.
pub(crate) trait Strategy: Sync {
    /// Sets server-owned fields of a new object (kube's `PrepareForCreate`). By default
    /// a client cannot set the status of a resource that has a status subresource.
    fn prepare_for_create(&self, obj: &mut Value, has_status: bool) {
        if has_status && let Some(o) = obj.as_object_mut() {
            o.remove("status");
        }
    }

    /// Keeps what an update of the main resource may not change (kube's
    /// `PrepareForUpdate`): with a status subresource, the stored status.
    fn prepare_for_update(&self, new: &mut Value, old: &Value, has_status: bool) {
        if has_status {
            keep_stored_status(new, old);
        }
    }

    /// Builds the object an update of the status subresource stores (kube's
    /// `PrepareForUpdate` of the status strategy): the stored object with the new status
    /// and the managed fields the client sent.
    fn prepare_for_status_update(&self, body: &Value, old: &Value) -> Value {
        stored_with_new_status(body, old)
    }

    /// Validates an update of the status subresource of a built-in kind (kube's
    /// `ValidateUpdate` of the kind's status strategy); `new` is what would be stored.
    fn validate_status_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Fills defaults in place (kube's `SetDefaults_*`); `creating` enables create-only
    /// defaults such as generated selectors and allocated addresses.
    fn default(&self, _obj: &mut Value, _creating: bool) {}

    /// Validates `metadata.name` (a DNS subdomain by default).
    fn validate_name(&self, name: &str) -> Option<FieldError> {
        validate_subdomain("metadata.name", name)
    }

    /// Validates the object (kube's `Validate` / `ValidateUpdate`).
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// kube's admission plugins of this kind that read other objects (such as Priority):
    /// run after defaulting and before validation; may change the object (`old` is None
    /// on create) or refuse it, typically with a Forbidden, reading other objects through
    /// `view`. `user` is who is writing.
    fn admit(&self, _view: &StoreView<'_>, _obj: &mut Value, _old: Option<&Value>, _user: &UserInfo) -> ApiResult<()> {
        Ok(())
    }

    /// Takes what a valid object needs from pools shared across the cluster (kube's
    /// allocators, such as Service node ports), reading other objects through `view`;
    /// `old` is None on create. Returns the fields whose values cannot be had.
    fn allocate(&self, _view: &StoreView<'_>, _obj: &mut Value, _old: Option<&Value>) -> Vec<FieldError> {
        Vec::new()
    }

    /// Whether [`Strategy::allocate`] takes anything: writes of such kinds hold the
    /// registry's allocation lock from admission to commit.
    fn allocates(&self) -> bool {
        false
    }

    /// Computes server-set state just before a write (`old` is None on create) and what
    /// to do once it is committed.
    fn before_commit(&self, _obj: &mut Value, _old: Option<&Value>, _now: &str) -> ApiResult<Option<AfterCommit>> {
        Ok(None)
    }

    /// Runs after an object is finally removed from storage.
    fn after_remove(&self, _registry: &Registry, _stored: &Value) {}

    /// The grace period of a graceful deletion, or None to delete at once (kube's
    /// `CheckGracefulDelete`).
    fn grace_period(&self, _obj: &Value, _options: &Value) -> Option<i64> {
        None
    }

    /// Whether a deletion always first marks the object terminating, leaving its removal
    /// to a controller, even with no finalizers.
    fn staged_deletion(&self) -> bool {
        false
    }

    /// Changes an object gets when it is marked for deletion without being removed.
    fn mark_terminating(&self, _obj: &mut Value) {}

    /// Whether something other than `metadata.finalizers` still holds a terminating
    /// object in storage.
    fn holds_removal(&self, _obj: &Value) -> bool {
        false
    }

    /// Whether objects served at `version` are stored in another form (another
    /// resource's, or another version's; see [`Strategy::convert_to_storage`]).
    fn converts_storage(&self, _version: &str) -> bool {
        false
    }

    /// Turns an object in the form served at `version` into the stored form.
    fn convert_to_storage(&self, _obj: &mut Value, _version: &str) {}

    /// Turns a stored object into the form served at `version` (apiVersion is set by
    /// the caller).
    fn convert_from_storage(&self, _obj: &mut Value, _version: &str) {}

    /// Whether an immediate DELETE answers with the deleted object (kube's
    /// `ReturnDeletedObject`); otherwise it answers a `Status` of `Success` naming it.
    fn returns_deleted_object(&self) -> bool {
        false
    }

    /// Whether the resource has an `eviction` subresource (pods).
    fn has_eviction(&self) -> bool {
        false
    }

    /// The subresources a kubelet serves for the kind (kube's connect subresources:
    /// `pods/log`, `pods/exec`, ...), each with the kind discovery names for it and its
    /// verbs; the handlers proxy them, discovery lists them.
    fn kubelet_subresources(&self) -> &'static [KubeletSubresource] {
        &[]
    }

    /// The kind's own subresources that are read (as the whole object) and written
    /// (update, patch) like `status`, e.g. `pods/ephemeralcontainers`.
    fn update_subresources(&self) -> &'static [&'static str] {
        &[]
    }

    /// Builds the object an update of the subresource `sub` (one of
    /// [`Strategy::update_subresources`]) stores from the request's `body` and the stored
    /// `old` (kube's `PrepareForUpdate` of that subresource's strategy).
    fn prepare_for_subresource_update(&self, _sub: &str, _body: &Value, old: &Value) -> Value {
        old.clone()
    }

    /// Validates an update of the subresource `sub` (kube's `ValidateUpdate` of that
    /// subresource's strategy).
    fn validate_subresource_update(&self, _sub: &str, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Whether the resource has a `finalize` subresource.
    fn has_finalize(&self) -> bool {
        false
    }

    /// The field labels lists and watches of the kind may select on, and the values the
    /// kind exposes for them (kube's field-label conversion and `ToSelectableFields`); by
    /// default only `metadata.name` and `metadata.namespace`.
    fn field_labels(&self) -> FieldLabels {
        FieldLabels::NONE
    }

    /// The built-in Table printer, or None for kube's default table.
    fn table(&self) -> Option<Printer> {
        None
    }
}

/// The generic update rule of a resource with a status subresource: `new` gets the
/// stored status of `old`.
pub(crate) fn keep_stored_status(new: &mut Value, old: &Value) {
    match old.get("status") {
        Some(s) => new["status"] = s.clone(),
        None => {
            if let Some(o) = new.as_object_mut() {
                o.remove("status");
            }
        }
    }
}

/// The generic status-subresource update: the stored object `old` with the status and
/// the managed fields of the request's `body`.
pub(crate) fn stored_with_new_status(body: &Value, old: &Value) -> Value {
    let mut n = old.clone();
    n["status"] = body["status"].clone();
    if let (Some(mf), Some(m)) = (body["metadata"]["managedFields"].as_array(), n["metadata"].as_object_mut()) {
        m.insert("managedFields".into(), Value::Array(mf.clone()));
    }
    n
}

/// The strategy of built-in resources without special behaviour.
pub(crate) struct Generic;

impl Strategy for Generic {}

/// The strategy of custom resources: generic, but a DELETE answers with the deleted
/// object, as apiextensions-apiserver's custom resource store does.
pub(crate) struct CustomResources;

impl Strategy for CustomResources {
    fn returns_deleted_object(&self) -> bool {
        true
    }
}

/// One built-in resource with its own strategy: (group, resource, strategy).
pub(crate) type BuiltinStrategy = (&'static str, &'static str, &'static dyn Strategy);

/// Which strategy each served resource has: the built-in resources' own (handed in by
/// the server), the generic strategy for the other built-ins and [`CustomResources`] for
/// resources a CRD defines.
#[derive(Clone, Copy)]
pub(crate) struct Strategies {
    builtin: &'static [BuiltinStrategy],
}

impl Strategies {
    /// The strategies of `builtin` resources; every other resource gets a generic one.
    pub(crate) const fn new(builtin: &'static [BuiltinStrategy]) -> Strategies {
        Strategies { builtin }
    }

    /// The strategy of a built-in resource that has one.
    pub(crate) fn builtin(&self, group: &str, resource: &str) -> Option<&'static dyn Strategy> {
        self.builtin.iter().find(|(g, r, _)| *g == group && *r == resource).map(|(_, _, s)| *s)
    }

    /// The strategy of a served resource: its own for built-ins that have one, the
    /// generic strategy otherwise (custom resources get [`CustomResources`]).
    pub(crate) fn for_resource(&self, info: &ResourceInfo) -> &'static dyn Strategy {
        if !info.builtin {
            return &CustomResources;
        }
        self.builtin(&info.group, &info.resource).unwrap_or(&Generic)
    }
}
