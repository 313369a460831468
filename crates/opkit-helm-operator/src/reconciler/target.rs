//! The release an action works on: the custom resource it stands for, the cluster its
//! objects are written to and the secrets its revisions are stored in.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};

use super::cluster::Cluster;

/// One release and where its parts live.
#[derive(Clone, Copy)]
pub(super) struct Target<'a> {
    /// The release's name (the custom resource's).
    pub name: &'a str,
    /// The custom resource, owner of the release's namespaced objects.
    pub owner: &'a DynamicObject,
    /// Where the release's objects are written.
    pub cluster: Cluster<'a>,
    /// The secrets the release's revisions are stored in (Helm's storage).
    pub secrets: &'a Api<Secret>,
}
