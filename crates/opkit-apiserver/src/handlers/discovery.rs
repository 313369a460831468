//! Discovery documents: `/api`, `/apis`, group and group-version resource lists, and
//! aggregated discovery (apidiscovery.k8s.io v2 and v2beta1), plus `/version`.

use serde_json::{Value, json};

use crate::catalog::{CatalogSnapshot, ResourceInfo};
use crate::registry::strategy::Strategies;

/// The Kubernetes version this server reports (kubectl's dispatcher picks its client by it).
pub(super) const KUBE_MINOR: &str = "33";

/// `/version`.
pub(super) fn version() -> Value {
    json!({
        "major": "1",
        "minor": KUBE_MINOR,
        "emulationMajor": "1",
        "emulationMinor": KUBE_MINOR,
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": format!("v1.{KUBE_MINOR}.0+opkit-{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub(super) fn legacy_versions(address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    })
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> =
        versions.iter().map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v})).collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// `/apis`.
pub(super) fn group_list(cat: &CatalogSnapshot) -> Value {
    let groups: Vec<Value> =
        cat.groups().into_iter().filter(|(g, _)| !g.is_empty()).map(|(g, vs)| group_json(&g, &vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, if served.
pub(super) fn group(cat: &CatalogSnapshot, name: &str) -> Option<Value> {
    let (g, vs) = cat.groups().into_iter().find(|(g, _)| g == name && !g.is_empty())?;
    let mut v = group_json(&g, &vs);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Some(v)
}

fn scope(r: &ResourceInfo) -> &'static str {
    if r.namespaced { "Namespaced" } else { "Cluster" }
}

/// `/api/v1` or `/apis/{group}/{version}`, if served.
pub(super) fn resource_list(
    cat: &CatalogSnapshot,
    strategies: &Strategies,
    group: &str,
    version: &str,
) -> Option<Value> {
    let resources = cat.resources(group, version);
    if resources.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for r in &resources {
        let mut e = json!({
            "name": r.resource, "singularName": r.singular, "namespaced": r.namespaced,
            "kind": r.kind, "verbs": r.verbs,
        });
        if !r.short_names.is_empty() {
            e["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            e["categories"] = json!(r.categories);
        }
        out.push(e);
        let v = r.version(version)?;
        if v.status {
            out.push(json!({"name": format!("{}/status", r.resource), "singularName": "", "namespaced": r.namespaced, "kind": r.kind, "verbs": ["get", "patch", "update"]}));
        }
        if v.scale.is_some() {
            out.push(json!({"name": format!("{}/scale", r.resource), "singularName": "", "namespaced": r.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
        }
        if strategies.for_resource(r).has_eviction() {
            out.push(json!({"name": format!("{}/eviction", r.resource), "singularName": "", "namespaced": r.namespaced, "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]}));
        }
        for sub in strategies.for_resource(r).update_subresources() {
            out.push(json!({"name": format!("{}/{sub}", r.resource), "singularName": "", "namespaced": r.namespaced, "kind": r.kind, "verbs": ["get", "patch", "update"]}));
        }
        for sub in strategies.for_resource(r).kubelet_subresources() {
            out.push(json!({"name": format!("{}/{}", r.resource, sub.name), "singularName": "", "namespaced": r.namespaced, "kind": sub.kind, "verbs": sub.verbs}));
        }
        if strategies.for_resource(r).has_finalize() {
            out.push(json!({"name": format!("{}/finalize", r.resource), "singularName": "", "namespaced": r.namespaced, "kind": r.kind, "verbs": ["update"]}));
        }
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": out}))
}

/// Aggregated discovery for `/api` (core only) or `/apis` (every other group).
pub(super) fn aggregated(cat: &CatalogSnapshot, strategies: &Strategies, core: bool, api_version: &str) -> Value {
    let mut items = Vec::new();
    for (g, versions) in cat.groups() {
        if g.is_empty() != core {
            continue;
        }
        let mut vs = Vec::new();
        for v in &versions {
            let mut resources = Vec::new();
            for r in cat.resources(&g, v) {
                let Some(vi) = r.version(v) else { continue };
                let kind = json!({"group": g, "version": v, "kind": r.kind});
                let mut subs = Vec::new();
                if vi.scale.is_some() {
                    subs.push(json!({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]}));
                }
                if strategies.for_resource(&r).has_eviction() {
                    subs.push(json!({"subresource": "eviction", "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"}, "verbs": ["create"]}));
                }
                for sub in strategies.for_resource(&r).update_subresources() {
                    subs.push(json!({"subresource": sub, "responseKind": kind, "verbs": ["get", "patch", "update"]}));
                }
                for sub in strategies.for_resource(&r).kubelet_subresources() {
                    let response_kind = json!({"group": g, "version": v, "kind": sub.kind});
                    subs.push(json!({"subresource": sub.name, "responseKind": response_kind, "verbs": sub.verbs}));
                }
                if vi.status {
                    subs.push(
                        json!({"subresource": "status", "responseKind": kind, "verbs": ["get", "patch", "update"]}),
                    );
                }
                let mut e = json!({
                    "resource": r.resource, "responseKind": kind, "scope": scope(&r),
                    "singularResource": r.singular, "verbs": r.verbs,
                });
                if !r.short_names.is_empty() {
                    e["shortNames"] = json!(r.short_names);
                }
                if !r.categories.is_empty() {
                    e["categories"] = json!(r.categories);
                }
                if !subs.is_empty() {
                    e["subresources"] = json!(subs);
                }
                resources.push(e);
            }
            vs.push(json!({"version": v, "resources": resources, "freshness": "Current"}));
        }
        items.push(json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": vs}));
    }
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{api_version}"), "metadata": {}, "items": items})
}

/// `/`: the served paths.
pub(super) fn root_paths(cat: &CatalogSnapshot) -> Value {
    let mut paths = vec!["/api".to_string(), "/api/v1".to_string(), "/apis".to_string()];
    for (g, vs) in cat.groups() {
        if g.is_empty() {
            continue;
        }
        paths.push(format!("/apis/{g}"));
        for v in vs {
            paths.push(format!("/apis/{g}/{v}"));
        }
    }
    paths.extend(["/healthz", "/livez", "/openapi/v2", "/openapi/v3", "/readyz", "/version"].map(String::from));
    json!({"paths": paths})
}
