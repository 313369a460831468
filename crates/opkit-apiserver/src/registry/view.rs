//! The read-only view of the registry's store that strategies and admission plugins
//! read other objects through (kube's admission plugins read through informers' listers,
//! not the store they are admitting into): stored objects, the catalogue, and what RBAC
//! grants a user. Nothing written through it is possible; a plugin that must write
//! (ResourceQuota's usage) goes through the registry like any client.

use std::sync::Arc;

use bytes::Bytes;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::parse_stored;
use crate::auth::user::UserInfo;
use crate::authz::Authorizer;
use crate::authz::attributes::{Action, Decision};
use crate::catalog::Catalog;
use crate::error::ApiResult;
use crate::storage::{Entry, ListFilter, ListPage, ListRange, ObjectName, ResourceId, Revision, StorageError, Store};

/// Reads of the store, the catalogue and the authorizer, borrowed from a registry.
#[derive(Clone, Copy)]
pub(crate) struct StoreView<'a> {
    store: &'a Store,
    catalog: &'a Arc<Catalog>,
    authorizer: &'a Authorizer,
}

impl<'a> StoreView<'a> {
    /// A view over `store`, serving `catalog`, with `authorizer`'s RBAC index.
    pub(crate) fn new(store: &'a Store, catalog: &'a Arc<Catalog>, authorizer: &'a Authorizer) -> StoreView<'a> {
        StoreView { store, catalog, authorizer }
    }

    /// The catalogue of served resources.
    pub(crate) fn catalog(&self) -> &'a Arc<Catalog> {
        self.catalog
    }

    /// Reads one object, as of the newest durable revision.
    pub(crate) async fn get(&self, resource: &ResourceId, key: &ObjectName) -> Result<Option<Entry>, StorageError> {
        self.store.get(resource, key).await
    }

    /// Reads a page of a resource's objects, keeping those for which `keep` is true.
    pub(crate) async fn list(
        &self,
        resource: &ResourceId,
        range: &ListRange,
        keep: &mut ListFilter<'_>,
    ) -> Result<ListPage, StorageError> {
        self.store.list(resource, range, keep).await
    }

    /// One stored object, parsed; None if there is none.
    pub(crate) async fn stored(&self, resource: &ResourceId, namespace: &str, name: &str) -> ApiResult<Option<Value>> {
        let entry = self.store.get(resource, &(namespace.to_string(), name.to_string())).await?;
        entry.map(|e| parse_stored(&e.value)).transpose()
    }

    /// Every object of `resource` as written so far (durable or not), in key order.
    pub(crate) fn values(&self, resource: &ResourceId) -> Vec<(ObjectName, Bytes)> {
        self.store.values(resource)
    }

    /// One stored object decoded as `T`; None if it is missing or unreadable.
    pub(crate) async fn read_typed<T: DeserializeOwned>(&self, id: ResourceId, key: &ObjectName) -> Option<T> {
        let entry = self.store.get(&id, key).await.ok()??;
        serde_json::from_value(parse_stored(&entry.value).ok()?).ok()
    }

    /// The revision of the last write to `resource` (a cache of its objects is current
    /// while this is unchanged).
    pub(crate) fn last_write(&self, resource: &ResourceId) -> Revision {
        self.store.last_write(resource)
    }

    /// [`Self::last_write`] of several resources, read together.
    pub(crate) fn last_writes<const N: usize>(&self, resources: &[ResourceId; N]) -> [Revision; N] {
        self.store.last_writes(resources)
    }

    /// Whether `user` may perform `action`.
    pub(crate) fn authorize(&self, user: &UserInfo, action: &Action) -> Decision {
        self.authorizer.authorize(self.store, user, action)
    }

    /// The rules `user` holds in `namespace` ("" for cluster-wide ones only), and the
    /// errors met resolving them (kube's `RulesFor`).
    pub(crate) fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        self.authorizer.rules_for(self.store, user, namespace)
    }

    /// The rules of the `Role` (in `namespace`) or `ClusterRole` called `name`, if it exists.
    pub(crate) fn role_rules(&self, kind: &str, namespace: &str, name: &str) -> Option<Vec<PolicyRule>> {
        self.authorizer.role_rules(self.store, kind, namespace, name)
    }
}
