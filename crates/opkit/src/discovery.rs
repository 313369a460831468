//! The kind ↔ resource map of a cluster, learnt lazily from discovery: controller-runtime's
//! dynamic RESTMapper (`pkg/client/apiutil/restmapper.go`) on kube's discovery.
//!
//! A [`RestMapper`] asks the API server for one group/version's resources
//! ([`kube::discovery::pinned_group`]) the first time a kind or resource of it is looked
//! up, and keeps the answer. A lookup that misses in a group/version it already knows
//! fetches that group/version again before it gives up, so kinds whose CRDs were created
//! after the first lookup are found; a group/version the server does not serve is not
//! remembered, so it is asked again next time. Clones share one map, so one mapper serves
//! every task of an operator.

use std::collections::HashMap;
use std::sync::Arc;

use kube::Client;
use kube::core::gvk::{GroupVersion, GroupVersionKind, GroupVersionResource};
use kube::discovery::{ApiCapabilities, ApiResource};
use parking_lot::RwLock;

/// The resources of one group/version, as discovery listed them (subresources inside their
/// resource's capabilities).
type VersionResources = Arc<[(ApiResource, ApiCapabilities)]>;

/// Why a kind or resource has no mapping.
#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    /// The server serves no such kind at that group/version (apimachinery's
    /// `NoKindMatchError`).
    #[error("no matches for kind {kind:?} in version {api_version:?}")]
    NoKindMatch {
        /// The group/version asked, as an `apiVersion`.
        api_version: String,
        /// The kind asked.
        kind: String,
    },
    /// The server serves no such resource at that group/version (apimachinery's
    /// `NoResourceMatchError`).
    #[error("the server doesn't have a resource type {resource:?} in version {api_version:?}")]
    NoResourceMatch {
        /// The group/version asked, as an `apiVersion`.
        api_version: String,
        /// The resource (plural) asked.
        resource: String,
    },
    /// Discovery itself failed (the server unreachable, an error other than not found).
    #[error("discovery of {api_version}: {source}")]
    Discovery {
        /// The group/version whose discovery failed, as an `apiVersion`.
        api_version: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

/// A lazy, shared map from kinds to resources and back, with each resource's scope and
/// verbs.
///
/// # Example
/// ```
/// use kube::core::gvk::{GroupVersionKind, GroupVersionResource};
/// use kube::discovery::Scope;
/// use opkit::discovery::{MappingError, RestMapper};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let env = opkit_testenv::TestEnv::builder().without_controllers().start().await?;
/// let mapper = RestMapper::new(env.client());
///
/// let (resource, caps) = mapper.rest_mapping(&GroupVersionKind::gvk("apps", "v1", "Deployment")).await?;
/// assert_eq!(resource.plural, "deployments");
/// assert_eq!(caps.scope, Scope::Namespaced);
///
/// let (namespace, _) = mapper.kind_for(&GroupVersionResource::gvr("", "v1", "namespaces")).await?;
/// assert_eq!(namespace.kind, "Namespace");
///
/// let missing = mapper.rest_mapping(&GroupVersionKind::gvk("apps", "v1", "Gadget")).await;
/// assert!(matches!(missing, Err(MappingError::NoKindMatch { .. })));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RestMapper {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    versions: RwLock<HashMap<GroupVersion, VersionResources>>,
}

impl RestMapper {
    /// A mapper asking discovery through `client`. It fetches nothing until the first lookup.
    pub fn new(client: Client) -> RestMapper {
        RestMapper { inner: Arc::new(Inner { client, versions: RwLock::new(HashMap::new()) }) }
    }

    /// The resource serving `gvk`, with its scope and verbs (controller-runtime's
    /// `RESTMapping`).
    pub async fn rest_mapping(&self, gvk: &GroupVersionKind) -> Result<(ApiResource, ApiCapabilities), MappingError> {
        let gv = GroupVersion::gv(&gvk.group, &gvk.version);
        let found = self.find(&gv, |resource| resource.kind == gvk.kind).await?;
        found.ok_or_else(|| MappingError::NoKindMatch { api_version: gv.api_version(), kind: gvk.kind.clone() })
    }

    /// The resource named by `gvr` (its plural), with its kind, scope and verbs
    /// (controller-runtime's `KindFor`).
    pub async fn kind_for(&self, gvr: &GroupVersionResource) -> Result<(ApiResource, ApiCapabilities), MappingError> {
        let gv = GroupVersion::gv(&gvr.group, &gvr.version);
        let found = self.find(&gv, |resource| resource.plural == gvr.resource).await?;
        found.ok_or_else(|| MappingError::NoResourceMatch {
            api_version: gv.api_version(),
            resource: gvr.resource.clone(),
        })
    }

    /// The first resource of `gv` that `matches`, from the map, else from a fresh discovery
    /// of `gv`; `None` when `gv` is not served or has no such resource.
    async fn find(
        &self,
        gv: &GroupVersion,
        matches: impl Fn(&ApiResource) -> bool,
    ) -> Result<Option<(ApiResource, ApiCapabilities)>, MappingError> {
        let pick = |resources: &VersionResources| resources.iter().find(|(resource, _)| matches(resource)).cloned();
        let known = self.inner.versions.read().get(gv).cloned();
        if let Some(found) = known.as_ref().and_then(pick) {
            return Ok(Some(found));
        }
        Ok(self.fetch(gv).await?.as_ref().and_then(pick))
    }

    /// Asks discovery for `gv`'s resources and keeps them; `None` (and `gv` forgotten) when
    /// the server does not serve `gv`.
    async fn fetch(&self, gv: &GroupVersion) -> Result<Option<VersionResources>, MappingError> {
        if gv.version.is_empty() {
            return Ok(None);
        }
        match kube::discovery::pinned_group(&self.inner.client, gv).await {
            Ok(group) => {
                let resources: VersionResources = group.versioned_resources(&gv.version).into();
                self.inner.versions.write().insert(gv.clone(), resources.clone());
                Ok(Some(resources))
            }
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                self.inner.versions.write().remove(gv);
                Ok(None)
            }
            Err(source) => Err(MappingError::Discovery { api_version: gv.api_version(), source }),
        }
    }
}
