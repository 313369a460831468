//! What the collector watches: discovery of every listable, watchable and deletable
//! resource (refreshed when CRDs change), a kind-to-resource mapping for owner
//! references, and one metadata-only watch per resource feeding the graph.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource};
use kube::discovery::{Discovery, Scope};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::graph::{Node, ResourceKey};
use super::meta::MetaObject;
use super::{GcError, Shared};

/// Resources the collector never watches (as kube's default ignored resources).
const IGNORED: &[(&str, &str)] = &[("", "events"), ("events.k8s.io", "events")];

/// How a kind maps to its resource.
#[derive(Debug, Clone)]
pub(super) struct Mapping {
    /// The resource (at some served version).
    pub resource: ApiResource,
    /// Whether it is namespaced.
    pub namespaced: bool,
}

/// Maps (group, version, kind) and (group, kind) to served resources.
#[derive(Debug, Default)]
pub(super) struct Mapper {
    by_gvk: HashMap<(String, String, String), Mapping>,
    by_gk: HashMap<(String, String), Mapping>,
}

impl Mapper {
    /// The resource for an owner reference's apiVersion and kind: that version if served,
    /// else the group's preferred version of the kind.
    pub(super) fn resolve(&self, api_version: &str, kind: &str) -> Option<&Mapping> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.by_gvk
            .get(&(group.to_string(), version.to_string(), kind.to_string()))
            .or_else(|| self.by_gk.get(&(group.to_string(), kind.to_string())))
    }

    fn insert(&mut self, m: Mapping, preferred: bool) {
        let r = &m.resource;
        let gk = (r.group.clone(), r.kind.clone());
        self.by_gvk.insert((r.group.clone(), r.version.clone(), r.kind.clone()), m.clone());
        if preferred || !self.by_gk.contains_key(&gk) {
            self.by_gk.insert(gk, m);
        }
    }
}

/// A running watch of one resource.
pub(super) struct Monitor {
    /// Stops it.
    pub token: CancellationToken,
    /// Set once its initial list is in the graph.
    pub synced: Arc<AtomicBool>,
    /// The version watched.
    version: String,
}

/// Runs discovery, preferring the aggregated endpoint.
pub(super) async fn discover(client: &Client) -> Result<Discovery, kube::Error> {
    match Discovery::new(client.clone()).run_aggregated().await {
        Ok(d) => Ok(d),
        Err(_) => Discovery::new(client.clone()).run().await,
    }
}

/// Refreshes discovery and starts or stops monitors to match.
pub(super) async fn sync(shared: &Arc<Shared>, shutdown: &CancellationToken) -> Result<(), GcError> {
    let disc = discover(&shared.client).await.map_err(GcError::Discovery)?;
    let mut mapper = Mapper::default();
    let mut desired: HashMap<ResourceKey, ApiResource> = HashMap::new();
    for group in disc.groups() {
        let preferred = group.preferred_version_or_latest().to_string();
        for v in group.versions() {
            for (ar, caps) in group.versioned_resources(v) {
                let namespaced = caps.scope == Scope::Namespaced;
                mapper.insert(Mapping { resource: ar, namespaced }, v == preferred);
            }
        }
        // As kube's ServerPreferredResources: each resource at the first version that
        // serves it, the preferred one first; a kind served only at another version
        // (ClusterServiceVersion at operators.coreos.com/v1alpha1 beside v1 and v2) too.
        let mut seen = HashSet::new();
        let versions = std::iter::once(preferred.as_str()).chain(group.versions().filter(|v| *v != preferred));
        for (ar, caps) in versions.flat_map(|v| group.versioned_resources(v)) {
            if !seen.insert(ar.plural.clone()) {
                continue;
            }
            if IGNORED.contains(&(ar.group.as_str(), ar.plural.as_str())) {
                continue;
            }
            if !["list", "watch", "delete"].iter().all(|v| caps.supports_operation(v)) {
                continue;
            }
            desired.insert(ResourceKey { group: ar.group.clone(), plural: ar.plural.clone() }, ar);
        }
    }
    *shared.mapper.write() = Arc::new(mapper);
    let mut stopped = Vec::new();
    {
        let mut monitors = shared.monitors.lock();
        monitors.retain(|key, m| {
            let keep = desired.get(key).is_some_and(|ar| ar.version == m.version);
            if !keep {
                m.token.cancel();
                stopped.push(key.clone());
            }
            keep
        });
        for (key, ar) in desired {
            if monitors.contains_key(&key) {
                continue;
            }
            let token = shutdown.child_token();
            let synced = Arc::new(AtomicBool::new(false));
            monitors.insert(
                key.clone(),
                Monitor { token: token.clone(), synced: synced.clone(), version: ar.version.clone() },
            );
            tokio::spawn(run_monitor(shared.clone(), key, ar, synced, token));
        }
    }
    // Objects of resources no longer served are gone: their dependents get checked.
    for key in stopped {
        let still_watched = shared.monitors.lock().contains_key(&key);
        if !still_watched {
            let mut g = shared.graph.lock();
            let work: Vec<_> = g.uids_of(&key).iter().flat_map(|uid| g.remove(uid)).collect();
            drop(g);
            shared.enqueue(work);
        }
    }
    shared.discovered.store(true, Ordering::Release);
    Ok(())
}

fn observe(shared: &Shared, key: &ResourceKey, ar: &ApiResource, obj: &MetaObject) -> Option<String> {
    let node = Node::from_meta(key.clone(), &ar.api_version, &ar.kind, &obj.metadata)?;
    let uid = node.uid.clone();
    let work = shared.graph.lock().upsert(node);
    shared.enqueue(work);
    Some(uid)
}

/// Watches one resource into the graph until cancelled.
async fn run_monitor(
    shared: Arc<Shared>,
    key: ResourceKey,
    ar: ApiResource,
    synced: Arc<AtomicBool>,
    token: CancellationToken,
) {
    // Metadata only: the rest of every object is skipped while decoding.
    let api: Api<MetaObject> = Api::all_with(shared.client.clone(), &ar);
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut listed: Option<HashSet<String>> = None;
    loop {
        let ev = tokio::select! {
            _ = token.cancelled() => return,
            ev = stream.next() => ev,
        };
        match ev {
            None => return,
            Some(Err(e)) => tracing::debug!(resource = %ar.plural, error = %e, "garbage collector watch failed"),
            Some(Ok(Event::Init)) => listed = Some(HashSet::new()),
            Some(Ok(Event::InitApply(obj))) => {
                if let (Some(uid), Some(seen)) = (observe(&shared, &key, &ar, &obj), listed.as_mut()) {
                    seen.insert(uid);
                }
            }
            Some(Ok(Event::InitDone)) => {
                // Objects that vanished while the watch was down.
                if let Some(seen) = listed.take() {
                    let mut g = shared.graph.lock();
                    let gone: Vec<String> = g.uids_of(&key).into_iter().filter(|u| !seen.contains(u)).collect();
                    let work: Vec<_> = gone.iter().flat_map(|uid| g.remove(uid)).collect();
                    drop(g);
                    shared.enqueue(work);
                }
                synced.store(true, Ordering::Release);
            }
            Some(Ok(Event::Apply(obj))) => {
                observe(&shared, &key, &ar, &obj);
            }
            Some(Ok(Event::Delete(obj))) => {
                if let Some(uid) = obj.metadata.uid.as_deref() {
                    let work = shared.graph.lock().remove(uid);
                    shared.enqueue(work);
                }
            }
        }
    }
}

/// Signals `changed` whenever a CRD is added, changed or removed.
pub(super) async fn watch_crds(client: Client, changed: Arc<Notify>, shutdown: CancellationToken) {
    let api: Api<CustomResourceDefinition> = Api::all(client);
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    loop {
        let ev = tokio::select! {
            _ = shutdown.cancelled() => return,
            ev = stream.next() => ev,
        };
        match ev {
            None => return,
            Some(Ok(Event::Apply(_) | Event::Delete(_) | Event::InitDone)) => changed.notify_one(),
            Some(Ok(_)) => {}
            Some(Err(e)) => tracing::debug!(error = %e, "garbage collector CRD watch failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
        let api_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version,
            kind: kind.into(),
            plural: plural.into(),
        }
    }

    #[test]
    fn mapper_prefers_exact_version_then_preferred() {
        let mut m = Mapper::default();
        m.insert(Mapping { resource: ar("example.com", "v1", "Widget", "widgets"), namespaced: true }, true);
        m.insert(Mapping { resource: ar("example.com", "v2", "Widget", "widgets"), namespaced: true }, false);
        m.insert(Mapping { resource: ar("", "v1", "ConfigMap", "configmaps"), namespaced: true }, true);
        assert_eq!(m.resolve("example.com/v2", "Widget").map(|x| x.resource.version.as_str()), Some("v2"));
        assert_eq!(m.resolve("example.com/v9", "Widget").map(|x| x.resource.version.as_str()), Some("v1"));
        assert_eq!(m.resolve("v1", "ConfigMap").map(|x| x.resource.plural.as_str()), Some("configmaps"));
        assert!(m.resolve("v1", "Nope").is_none());
    }
}
