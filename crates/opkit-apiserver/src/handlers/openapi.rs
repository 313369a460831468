//! OpenAPI endpoints: `/openapi/v2` (JSON and gnostic protobuf) and `/openapi/v3`, built
//! from the catalogue and cached until the set of resources changes.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Response};
use parking_lot::Mutex;

use super::codec::{self, Body};
use super::discovery::KUBE_MINOR;
use crate::catalog::{CatalogSnapshot, ResourceInfo};
use crate::error::{ApiError, ApiResult};
use crate::openapi::{self, ResourceDoc, SchemaSource};

#[derive(Default)]
struct Cached {
    snapshot: Option<Arc<CatalogSnapshot>>,
    v2_json: Option<Bytes>,
    v2_proto: Option<Bytes>,
    v3: HashMap<String, Bytes>,
}

/// Documents cached per catalogue snapshot.
#[derive(Default)]
pub(crate) struct OpenApiCache {
    inner: Mutex<Cached>,
}

fn docs(resources: &[Arc<ResourceInfo>]) -> Vec<ResourceDoc> {
    let mut out = Vec::new();
    for r in resources {
        for v in r.versions.iter().filter(|v| v.served) {
            out.push(ResourceDoc {
                group: r.group.clone(),
                version: v.name.clone(),
                kind: r.kind.clone(),
                plural: r.resource.clone(),
                namespaced: r.namespaced,
                verbs: r.verbs.iter().map(|s| s.to_string()).collect(),
                subresources: [v.status.then_some("status"), v.scale.as_ref().map(|_| "scale")]
                    .into_iter()
                    .flatten()
                    .map(String::from)
                    .collect(),
                schema: match &v.raw_schema {
                    Some(s) if !r.builtin => SchemaSource::Crd(s.clone()),
                    _ => SchemaSource::Builtin,
                },
            });
        }
    }
    out
}

fn server_version() -> String {
    format!("v1.{KUBE_MINOR}.0")
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

fn hash(bytes: &[u8]) -> String {
    // A stable cache-busting tag, not a security hash.
    format!("{:016X}", opkit_apimachinery::fnv::fnv64a(bytes))
}

impl OpenApiCache {
    fn with<T>(&self, cat: &Arc<CatalogSnapshot>, f: impl FnOnce(&mut Cached) -> T) -> T {
        let mut c = self.inner.lock();
        if !c.snapshot.as_ref().is_some_and(|s| Arc::ptr_eq(s, cat)) {
            *c = Cached { snapshot: Some(cat.clone()), ..Default::default() };
        }
        f(&mut c)
    }

    /// `/openapi/v2`, as protobuf when asked for.
    pub(crate) fn v2(&self, cat: &Arc<CatalogSnapshot>, headers: &HeaderMap) -> Response<Body> {
        let proto = codec::wants_openapi_protobuf(headers);
        let all: Vec<Arc<ResourceInfo>> = cat.all().cloned().collect();
        self.with(cat, |c| {
            if c.v2_json.is_none() {
                let doc = openapi::v2_document(&docs(&all), &server_version());
                c.v2_proto = Some(Bytes::from(openapi::v2_protobuf(&doc)));
                c.v2_json = Some(Bytes::from(crate::json::to_vec(&doc)));
            }
            if proto {
                codec::respond_bytes(
                    c.v2_proto.clone().unwrap_or_default(),
                    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
                )
            } else {
                codec::respond_bytes(c.v2_json.clone().unwrap_or_default(), "application/json")
            }
        })
    }

    fn v3_bytes(&self, cat: &Arc<CatalogSnapshot>, path: &str) -> Option<Bytes> {
        let (group, version) = match path.split('/').collect::<Vec<_>>().as_slice() {
            ["api", v] => (String::new(), v.to_string()),
            ["apis", g, v] => (g.to_string(), v.to_string()),
            _ => return None,
        };
        let resources = cat.resources(&group, &version);
        if resources.is_empty() {
            return None;
        }
        self.with(cat, |c| {
            if let Some(b) = c.v3.get(path) {
                return Some(b.clone());
            }
            let gv = if group.is_empty() { version.clone() } else { format!("{group}/{version}") };
            let mut ds = docs(&resources);
            ds.retain(|d| d.version == version);
            let doc = openapi::v3_document(&gv, &ds, &server_version());
            let b = Bytes::from(crate::json::to_vec(&doc));
            c.v3.insert(path.to_string(), b.clone());
            Some(b)
        })
    }

    /// `/openapi/v3`: the index of group-version documents.
    pub(crate) fn v3_index(&self, cat: &Arc<CatalogSnapshot>) -> Response<Body> {
        let mut paths = Vec::new();
        for (g, versions) in cat.groups() {
            for v in versions {
                paths.push(gv_path(&g, &v));
            }
        }
        let hashes: HashMap<String, String> =
            paths.iter().map(|p| (p.clone(), self.v3_bytes(cat, p).map(|b| hash(&b)).unwrap_or_default())).collect();
        let index = openapi::v3_index(&paths, &|p: &str| hashes.get(p).cloned().unwrap_or_default());
        codec::respond(200, &index, codec::Output::Json, &[])
    }

    /// `/openapi/v3/{api/v1 | apis/g/v}`.
    pub(crate) fn v3(&self, cat: &Arc<CatalogSnapshot>, path: &str) -> ApiResult<Response<Body>> {
        let b = self.v3_bytes(cat, path).ok_or_else(ApiError::no_route)?;
        Ok(codec::respond_bytes(b, "application/json"))
    }
}
