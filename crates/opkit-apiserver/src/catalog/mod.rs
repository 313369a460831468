//! The catalogue of served resources: the built-ins and those defined by
//! CustomResourceDefinitions, looked up by group, version and plural name.

mod builtin;
mod crd;

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::WebhookConversion;
use parking_lot::RwLock;

use crate::schema::CrdSchema;
use crate::storage::ResourceId;
use crate::table::PrinterColumn;

pub(crate) use crd::{crd_status, resource_from_crd};

/// Where the scale subresource reads and writes replicas.
#[derive(Debug, Clone)]
pub struct ScaleInfo {
    /// JSONPath of the desired replicas, e.g. `.spec.replicas`.
    pub spec_replicas_path: String,
    /// JSONPath of the observed replicas, e.g. `.status.replicas`.
    pub status_replicas_path: String,
    /// JSONPath of the label selector string, if any.
    pub label_selector_path: Option<String>,
}

/// One served version of a resource.
#[derive(Clone)]
pub struct VersionInfo {
    /// e.g. `v1`.
    pub name: String,
    /// Whether the version is served.
    pub served: bool,
    /// Whether objects are stored in this version.
    pub storage: bool,
    /// Whether the status subresource exists.
    pub status: bool,
    /// The scale subresource, if any.
    pub scale: Option<ScaleInfo>,
    /// The compiled schema of a CRD version.
    pub schema: Option<Arc<CrdSchema>>,
    /// The raw openAPIV3Schema of a CRD version.
    pub raw_schema: Option<serde_json::Value>,
    /// CRD additionalPrinterColumns.
    pub columns: Vec<PrinterColumn>,
    /// CRD selectableFields as (field path, JSONPath).
    pub selectable_fields: Vec<(String, String)>,
}

/// A served resource.
#[derive(Clone)]
pub struct ResourceInfo {
    /// Storage identity.
    pub id: ResourceId,
    /// API group ("" for core).
    pub group: String,
    /// Plural name.
    pub resource: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Kind of its lists.
    pub list_kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names, e.g. `deploy`.
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`.
    pub categories: Vec<String>,
    /// Supported verbs.
    pub verbs: Vec<&'static str>,
    /// Whether `metadata.generation` is maintained.
    pub generation: bool,
    /// Built-in (true) or CRD-defined.
    pub builtin: bool,
    /// Versions, in kube's priority order (the first served one is preferred).
    pub versions: Vec<VersionInfo>,
    /// The conversion webhook of a CRD whose `spec.conversion.strategy` is `Webhook`
    /// (None: versions differ only in `apiVersion`).
    pub conversion_webhook: Option<Arc<WebhookConversion>>,
}

impl ResourceInfo {
    /// The served version called `name`.
    pub fn version(&self, name: &str) -> Option<&VersionInfo> {
        self.versions.iter().find(|v| v.name == name && v.served)
    }
    /// The storage version.
    pub fn storage_version(&self) -> &str {
        self.versions.iter().find(|v| v.storage).or(self.versions.first()).map_or("v1", |v| v.name.as_str())
    }
    /// `group/version` as written in `apiVersion`.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() { version.to_string() } else { format!("{}/{version}", self.group) }
    }
}

/// The resources served at one moment; replaced wholesale when CRDs change.
#[derive(Clone, Default)]
pub struct CatalogSnapshot {
    by_group: BTreeMap<String, Vec<Arc<ResourceInfo>>>,
}

impl CatalogSnapshot {
    /// Finds a served resource by group, version and plural.
    pub fn lookup(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceInfo>> {
        self.by_group.get(group)?.iter().find(|r| r.resource == resource && r.version(version).is_some()).cloned()
    }
    /// Finds a resource by group and plural, whatever its version.
    pub fn by_resource(&self, group: &str, resource: &str) -> Option<Arc<ResourceInfo>> {
        self.by_group.get(group)?.iter().find(|r| r.resource == resource).cloned()
    }
    /// Finds a served resource by group, version and kind.
    pub fn by_kind(&self, group: &str, version: &str, kind: &str) -> Option<Arc<ResourceInfo>> {
        self.by_group.get(group)?.iter().find(|r| r.kind == kind && r.version(version).is_some()).cloned()
    }
    /// Every group with its served versions in priority order (core group first).
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for (g, resources) in &self.by_group {
            let mut versions: Vec<String> = Vec::new();
            for r in resources {
                for v in r.versions.iter().filter(|v| v.served) {
                    if !versions.contains(&v.name) {
                        versions.push(v.name.clone());
                    }
                }
            }
            versions.sort_by(|a, b| compare_versions(a, b));
            out.push((g.clone(), versions));
        }
        // kube lists built-in groups before CRD groups; keep core first, then by name.
        out.sort_by(|a, b| (!a.0.is_empty()).cmp(&!b.0.is_empty()).then_with(|| a.0.cmp(&b.0)));
        out
    }
    /// Whether any resource of `group` is served at `version` (without listing them).
    pub fn serves(&self, group: &str, version: &str) -> bool {
        self.by_group.get(group).is_some_and(|rs| rs.iter().any(|r| r.version(version).is_some()))
    }
    /// Resources of `group` served at `version`.
    pub fn resources(&self, group: &str, version: &str) -> Vec<Arc<ResourceInfo>> {
        self.by_group
            .get(group)
            .map(|rs| rs.iter().filter(|r| r.version(version).is_some()).cloned().collect())
            .unwrap_or_default()
    }
    /// Every resource.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceInfo>> {
        self.by_group.values().flatten()
    }
}

/// The plural resource name and scope (namespaced: true) of the built-in `kind` served at
/// `group`/`version` (`""` is the core group), if the server serves it; what `opkit create
/// api --resource=false` scaffolds a controller for.
pub fn builtin_kind(group: &str, version: &str, kind: &str) -> Option<(String, bool)> {
    builtin::builtin_resources()
        .into_iter()
        .find(|r| r.group == group && r.kind == kind && r.version(version).is_some())
        .map(|r| (r.resource, r.namespaced))
}

/// The live catalogue shared by the server.
pub struct Catalog {
    builtin: Vec<Arc<ResourceInfo>>,
    crds: RwLock<BTreeMap<String, Arc<ResourceInfo>>>,
    snapshot: RwLock<Arc<CatalogSnapshot>>,
}

impl Catalog {
    /// A catalogue of the built-in resources.
    pub fn new() -> Catalog {
        let builtin: Vec<Arc<ResourceInfo>> = builtin::builtin_resources().into_iter().map(Arc::new).collect();
        let c = Catalog { builtin, crds: RwLock::new(BTreeMap::new()), snapshot: RwLock::new(Arc::default()) };
        c.rebuild();
        c
    }

    /// The current set of resources.
    pub fn snapshot(&self) -> Arc<CatalogSnapshot> {
        self.snapshot.read().clone()
    }

    /// Serves (or re-serves) the resource of a CRD, keyed by the CRD's name.
    pub fn put_crd(&self, crd_name: &str, info: ResourceInfo) {
        self.crds.write().insert(crd_name.to_string(), Arc::new(info));
        self.rebuild();
    }

    /// Stops serving a CRD's resource.
    pub fn remove_crd(&self, crd_name: &str) {
        if self.crds.write().remove(crd_name).is_some() {
            self.rebuild();
        }
    }

    fn rebuild(&self) {
        let mut by_group: BTreeMap<String, Vec<Arc<ResourceInfo>>> = BTreeMap::new();
        for r in self.builtin.iter().chain(self.crds.read().values()) {
            by_group.entry(r.group.clone()).or_default().push(r.clone());
        }
        *self.snapshot.write() = Arc::new(CatalogSnapshot { by_group });
    }
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog::new()
    }
}

/// Orders versions as kube-apiserver does: GA before beta before alpha, higher major and
/// minor first, then versions not in Kubernetes form alphabetically.
pub(crate) fn compare_versions(a: &str, b: &str) -> Ordering {
    fn parse(v: &str) -> Option<(u32, u8, u32)> {
        let rest = v.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let major: u32 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((major, 2, 0));
        }
        let (level, num) = if let Some(n) = tail.strip_prefix("beta") {
            (1, n)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (0, n)
        } else {
            return None;
        };
        Some((major, level, num.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => y.1.cmp(&x.1).then(y.0.cmp(&x.0)).then(y.2.cmp(&x.2)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_priority_matches_kube() {
        let mut v =
            vec!["v1alpha1", "v11alpha2", "foo1", "v10beta3", "v2", "v1beta1", "v1", "v10", "foo10", "v12alpha1"];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            v,
            ["v10", "v2", "v1", "v10beta3", "v1beta1", "v12alpha1", "v11alpha2", "v1alpha1", "foo1", "foo10"]
        );
    }

    #[test]
    fn builtins_are_served() {
        let c = Catalog::new();
        let s = c.snapshot();
        let d = s.lookup("apps", "v1", "deployments").expect("deployments");
        assert_eq!(d.kind, "Deployment");
        assert!(d.version("v1").is_some_and(|v| v.scale.is_some()));
        assert!(s.lookup("apps", "v2", "deployments").is_none());
        assert_eq!(s.groups()[0].0, "");
    }
}
