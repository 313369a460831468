//! The bounds of watched types — [`Kind`] (anything the cache can hold, including
//! `DynamicObject` whose type is known at run time) and [`Object`] (typed kinds) — and
//! scope-aware `Api` construction.

use std::fmt::Debug;
use std::hash::Hash;

use kube::core::{ClusterResourceScope, NamespaceResourceScope};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Whether a kind is namespaced, and how to build its `Api` for a namespace or for all.
pub trait ObjectScope {
    /// True for namespaced kinds.
    const NAMESPACED: bool;
    /// An `Api` over `namespace`, or over all namespaces / the cluster when `None`.
    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>;
}

impl ObjectScope for NamespaceResourceScope {
    const NAMESPACED: bool = true;
    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>,
    {
        match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }
}

impl ObjectScope for ClusterResourceScope {
    const NAMESPACED: bool = false;
    fn api<K>(client: Client, _namespace: Option<&str>) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>,
    {
        Api::all(client)
    }
}

/// A Kubernetes object type the cache can watch and controllers can reconcile: every
/// [`Object`], and `kube::api::DynamicObject` with an `ApiResource` known at run time
/// (see [`Cache::dynamic_informer`](crate::Cache::dynamic_informer) and
/// [`Controller::new_dynamic`](crate::Controller::new_dynamic)).
pub trait Kind:
    Resource<DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> Kind for K where
    K: Resource<DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// A typed Kubernetes object type the runtime can watch, cache and reconcile: any typed
/// kube resource (k8s-openapi kinds and `#[derive(CustomResource)]` types).
pub trait Object:
    Kind
    + Resource<DynamicType = (), Scope: ObjectScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// Whether the kind is namespaced.
    fn namespaced() -> bool {
        <Self::Scope as ObjectScope>::NAMESPACED
    }
    /// An `Api` for this kind in `namespace` (`None`: all namespaces, or cluster-scoped).
    fn api(client: Client, namespace: Option<&str>) -> Api<Self> {
        <Self::Scope as ObjectScope>::api(client, namespace)
    }
}

impl<K> Object for K where
    K: Resource<DynamicType = (), Scope: ObjectScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}
