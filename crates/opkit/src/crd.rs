//! CustomResourceDefinitions from several Rust types: kube's derive makes one CRD per
//! version of a kind (`Kind::crd()`); [`merge_versions`] joins those sharing a name into
//! one CRD with every version, as `controller-gen` does for a multi-version kind.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// Joins CRDs with the same `metadata.name` into one (the first one's metadata, names and
/// scope; every version in order). Mark all versions but the stored one with
/// `#[kube(storage = false)]`; the API server rejects a CRD without exactly one storage
/// version, with a message saying so.
///
/// ```
/// use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
///     CustomResourceDefinition, CustomResourceDefinitionVersion,
/// };
/// fn crd(version: &str, storage: bool) -> CustomResourceDefinition {
///     let mut crd = CustomResourceDefinition::default();
///     crd.metadata.name = Some("frigates.ship.example.com".into());
///     crd.spec.versions = vec![CustomResourceDefinitionVersion {
///         name: version.into(),
///         served: true,
///         storage,
///         ..Default::default()
///     }];
///     crd
/// }
/// let merged = opkit::crd::merge_versions(vec![crd("v1", true), crd("v1beta1", false)]);
/// assert_eq!(merged.len(), 1);
/// assert_eq!(merged[0].spec.versions.len(), 2);
/// ```
pub fn merge_versions(crds: impl IntoIterator<Item = CustomResourceDefinition>) -> Vec<CustomResourceDefinition> {
    let mut merged: Vec<CustomResourceDefinition> = Vec::new();
    for crd in crds {
        match merged.iter_mut().find(|m| m.metadata.name == crd.metadata.name) {
            Some(first) => {
                for v in crd.spec.versions {
                    if !first.spec.versions.iter().any(|x| x.name == v.name) {
                        first.spec.versions.push(v);
                    }
                }
            }
            None => merged.push(crd),
        }
    }
    merged
}
