//! What the cache watches and keeps (controller-runtime's `cache.Options`): namespaces
//! and a label selector for every kind, and per kind ([`ByKind`], its `ByObject`) other
//! namespaces, label and field selectors, a transform and a budget of objects. By default
//! every cached object has its managedFields removed (controller-runtime's
//! `TransformStripManagedFields`), the bulk of most objects and rarely read by
//! controllers.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use kube::api::ApiResource;

use crate::object::Kind;

/// A transform of one kind's objects before they are cached.
pub(super) type TransformFn<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// Which objects the cache watches and how it keeps them.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use opkit::cache::{ByKind, CacheScope};
/// let scope = CacheScope::default()
///     .by_kind::<Pod>(ByKind::default().label_selector("app=web").field_selector("spec.nodeName=node-1").max_objects(10_000))
///     .transform::<Pod>(|pod| pod.metadata.annotations = None);
/// # let _ = scope;
/// ```
#[derive(Clone, Default)]
pub struct CacheScope {
    /// Namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
    /// A label selector applied to every watch.
    pub label_selector: Option<String>,
    /// Keeps managedFields in cached objects (they are removed by default).
    pub keep_managed_fields: bool,
    /// Settings of single kinds, by API group and resource (plural).
    by_kind: HashMap<(String, String), ByKind>,
}

impl std::fmt::Debug for CacheScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheScope")
            .field("namespaces", &self.namespaces)
            .field("label_selector", &self.label_selector)
            .field("keep_managed_fields", &self.keep_managed_fields)
            .field("by_kind", &self.by_kind)
            .finish()
    }
}

impl CacheScope {
    /// A scope over `namespaces` (empty: all).
    #[must_use]
    pub fn namespaces(namespaces: Vec<String>) -> CacheScope {
        CacheScope { namespaces, ..CacheScope::default() }
    }

    /// Keeps managedFields in cached objects (see [`CacheScope::keep_managed_fields`]).
    #[must_use]
    pub fn keeping_managed_fields(mut self) -> CacheScope {
        self.keep_managed_fields = true;
        self
    }

    /// How kind `K` is cached, instead of the scope's namespaces and label selector.
    #[must_use]
    pub fn by_kind<K: kube::Resource<DynamicType = ()>>(self, settings: ByKind) -> CacheScope {
        self.by_resource(&ApiResource::erase::<K>(&()), settings)
    }

    /// As [`CacheScope::by_kind`], for a resource known at run time (cached as
    /// `DynamicObject`s, or by a typed informer of the same resource).
    #[must_use]
    pub fn by_resource(mut self, resource: &ApiResource, settings: ByKind) -> CacheScope {
        let key = (resource.group.clone(), resource.plural.clone());
        let transform = self.by_kind.remove(&key).and_then(|s| s.transform);
        self.by_kind.insert(key, ByKind { transform: settings.transform.or(transform), ..settings });
        self
    }

    /// Transforms every cached `K` (after managedFields are removed, unless kept):
    /// controller-runtime's per-object `Transform`, to drop what the operator never reads.
    #[must_use]
    pub fn transform<K: Kind + kube::Resource<DynamicType = ()>>(
        mut self,
        f: impl Fn(&mut K) + Send + Sync + 'static,
    ) -> CacheScope {
        let resource = ApiResource::erase::<K>(&());
        let transform: TransformFn<K> = Arc::new(f);
        let entry = self.by_kind.entry((resource.group, resource.plural)).or_default();
        entry.transform = Some(Arc::new(transform));
        self
    }

    /// The settings of the resource `group`/`plural`: its own, else the scope's.
    /// Adds `requirement` (e.g. `shard.opkit.dev/ring=shard-1`) to the label selector of
    /// `resource`'s informers, on top of its own or the scope's selector.
    pub(crate) fn requiring_label(mut self, resource: &ApiResource, requirement: &str) -> CacheScope {
        let global = self.label_selector.clone();
        let entry = self.by_kind.entry((resource.group.clone(), resource.plural.clone())).or_default();
        entry.label_selector = Some(match entry.label_selector.clone().or(global) {
            Some(base) if !base.trim().is_empty() => format!("{base},{requirement}"),
            _ => requirement.to_string(),
        });
        self
    }

    pub(super) fn settings_of(&self, group: &str, plural: &str) -> Effective {
        let own = self.by_kind.get(&(group.to_string(), plural.to_string()));
        Effective {
            namespaces: own.and_then(|o| o.namespaces.clone()).unwrap_or_else(|| self.namespaces.clone()),
            label_selector: own.and_then(|o| o.label_selector.clone()).or_else(|| self.label_selector.clone()),
            field_selector: own.and_then(|o| o.field_selector.clone()),
            max_objects: own.and_then(|o| o.max_objects),
            transform: own.and_then(|o| o.transform.clone()),
            keep_managed_fields: self.keep_managed_fields,
        }
    }
}

/// How one kind is cached (controller-runtime's `cache.ByObject`).
#[derive(Clone, Default)]
pub struct ByKind {
    namespaces: Option<Vec<String>>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    max_objects: Option<usize>,
    /// A `TransformFn<K>`, erased (the scope holds settings of every kind).
    transform: Option<Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for ByKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByKind")
            .field("namespaces", &self.namespaces)
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("max_objects", &self.max_objects)
            .field("transform", &self.transform.is_some())
            .finish()
    }
}

impl ByKind {
    /// Watches these namespaces for this kind (empty: all), instead of the scope's.
    #[must_use]
    pub fn namespaces(mut self, namespaces: Vec<String>) -> ByKind {
        self.namespaces = Some(namespaces);
        self
    }

    /// Watches only objects whose labels match `selector` (kube's syntax), instead of the
    /// scope's label selector.
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> ByKind {
        self.label_selector = Some(selector.into());
        self
    }

    /// Watches only objects whose fields match `selector` (kube's syntax, e.g.
    /// `spec.nodeName=node-1`; the fields the API server supports for the kind).
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> ByKind {
        self.field_selector = Some(selector.into());
        self
    }

    /// The most objects of this kind the cache may hold. Past it, the controllers that
    /// use the kind fail with an error naming the kind and the budget (the operator is
    /// watching more than it was sized for), instead of the process running out of memory.
    #[must_use]
    pub fn max_objects(mut self, n: usize) -> ByKind {
        self.max_objects = Some(n);
        self
    }
}

/// One resource's settings, with the scope's defaults filled in.
pub(super) struct Effective {
    pub(super) namespaces: Vec<String>,
    pub(super) label_selector: Option<String>,
    pub(super) field_selector: Option<String>,
    pub(super) max_objects: Option<usize>,
    transform: Option<Arc<dyn Any + Send + Sync>>,
    keep_managed_fields: bool,
}

impl Effective {
    /// What to do to each `K` before it is cached: remove managedFields (unless kept), then
    /// the kind's own transform, if it was given for `K`.
    pub(super) fn transform_for<K: Kind>(&self) -> TransformFn<K> {
        let own = self.transform.clone().and_then(|t| t.downcast::<TransformFn<K>>().ok()).map(|t| (*t).clone());
        let strip = !self.keep_managed_fields;
        Arc::new(move |obj: &mut K| {
            if strip {
                obj.meta_mut().managed_fields = None;
            }
            if let Some(own) = &own {
                own(obj);
            }
        })
    }
}
