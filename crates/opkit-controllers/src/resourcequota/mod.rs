//! The resource quota controller (kube-controller-manager's `resourcequota`): keeps every
//! ResourceQuota's `status.hard` equal to its `spec.hard` and `status.used` equal to what
//! the objects in its namespace use (counted with `opkit_apimachinery::quota`, as the API
//! server's quota admission charges them). The kinds quotas usually name are watched, so
//! a delete recounts at once (creates are charged by the API server's admission); other
//! `count/<resource>.<group>` names are listed through discovery. Every quota is
//! recounted in full every [`RESYNC`].

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, Pod, ReplicationController, ResourceQuota, ResourceQuotaStatus, Secret, Service,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::{Client, ResourceExt};
use opkit::predicate::Event;
use opkit::{Action, Cache, Context, Controller, Manager, Object, ReconcileResult, Reconciler, Request};
use opkit_apimachinery::quantity::parse_milli;
use opkit_apimachinery::quota::{self, Usage, count_name, format_amount};
use serde_json::Value;

use crate::ControllersConfig;

/// How often a quota is recounted in full (kube's `--resource-quota-sync-period`), and
/// a quota naming kinds that are not watched more often ([`UNWATCHED_RESYNC`]).
const RESYNC: Duration = Duration::from_secs(300);
/// How often a quota naming kinds that are not watched is recounted.
const UNWATCHED_RESYNC: Duration = Duration::from_secs(30);

/// Registers the quota controller with `mgr`.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("resourcequota") {
        return Ok(());
    }
    let c = Controller::new(mgr, reconcile)
        .client(crate::identity::client_for(mgr, cfg, "resourcequota"))
        .named("resourcequota")
        .with_event_filter(not_a_status_write);
    let cache = mgr.cache();
    let c = watch::<Pod, _>(c, cache);
    let c = watch::<ConfigMap, _>(c, cache);
    let c = watch::<Secret, _>(c, cache);
    let c = watch::<Service, _>(c, cache);
    let c = watch::<PersistentVolumeClaim, _>(c, cache);
    let c = watch::<ReplicationController, _>(c, cache);
    let c = watch::<Deployment, _>(c, cache);
    let c = watch::<ReplicaSet, _>(c, cache);
    let c = watch::<StatefulSet, _>(c, cache);
    let c = watch::<DaemonSet, _>(c, cache);
    let c = watch::<Job, _>(c, cache);
    watch::<CronJob, _>(c, cache).build()
}

/// Lets through creates, deletes, graceful deletions and writes to an object itself, not
/// to its status: the API server's quota admission charges `status.used` before the
/// object it admits is stored, and a recount then would miss it (kube's controller, too,
/// recounts on spec changes and deletions, not on status writes or creates).
fn not_a_status_write(event: &Event<'_>) -> bool {
    let Event::Update { old, new } = event else { return true };
    let main = |m: &ObjectMeta| -> Vec<ManagedFieldsEntry> {
        let entries = m.managed_fields.iter().flatten();
        entries.filter(|e| e.subresource.as_deref().is_none_or(str::is_empty)).cloned().collect()
    };
    (old.deletion_timestamp.is_none() && new.deletion_timestamp.is_some()) || main(old) != main(new)
}

/// Recounts the quotas of a `K`'s namespace when one goes away (a create is charged by
/// the API server's admission).
fn watch<K: Object, R: Reconciler<ResourceQuota, ()>>(
    c: Controller<ResourceQuota, R>,
    cache: &Cache,
) -> Controller<ResourceQuota, R> {
    let cache = cache.clone();
    c.watches_with::<K>(
        move |obj| {
            let Some(ns) = obj.meta().namespace.as_deref() else { return Vec::new() };
            cache.list_in::<ResourceQuota>(ns).iter().map(|q| Request::from_object(&**q)).collect()
        },
        |event: &Event<'_>| !matches!(event, Event::Create(_)),
    )
}

/// Adds what the cached `K`s of `ns` in the quota's scope use to `used`.
fn tally<K: Object>(cache: &Cache, ns: &str, quota_obj: &Value, used: &mut Usage) {
    let group = K::group(&()).to_string();
    let resource = K::plural(&()).to_string();
    for obj in cache.list_in::<K>(ns) {
        let Ok(value) = serde_json::to_value(&*obj) else { continue };
        if obj.meta().deletion_timestamp.is_some() && resource != "pods" {
            continue;
        }
        if !quota::in_scope(quota_obj, &group, &resource, &value) {
            continue;
        }
        for (name, amount) in quota::usage(&group, &resource, &value) {
            *used.entry(name).or_default() += amount;
        }
    }
}

/// The watched kinds as (group, resource).
fn watched() -> Vec<(String, String)> {
    fn gr<K: Object>() -> (String, String) {
        (K::group(&()).to_string(), K::plural(&()).to_string())
    }
    vec![
        gr::<Pod>(),
        gr::<ConfigMap>(),
        gr::<Secret>(),
        gr::<Service>(),
        gr::<PersistentVolumeClaim>(),
        gr::<ReplicationController>(),
        gr::<ResourceQuota>(),
        gr::<Deployment>(),
        gr::<ReplicaSet>(),
        gr::<StatefulSet>(),
        gr::<DaemonSet>(),
        gr::<Job>(),
        gr::<CronJob>(),
    ]
}

async fn reconcile(ctx: Context<ResourceQuota>) -> ReconcileResult {
    let Some(q) = ctx.object.clone() else { return Ok(Action::done()) };
    if q.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let ns = q.namespace().unwrap_or_default();
    let hard = q.spec.as_ref().and_then(|s| s.hard.clone()).unwrap_or_default();
    let quota_obj = serde_json::to_value(&*q)?;
    let cache = &ctx.cache;
    let mut counted = Usage::new();
    tally::<Pod>(cache, &ns, &quota_obj, &mut counted);
    tally::<ConfigMap>(cache, &ns, &quota_obj, &mut counted);
    tally::<Secret>(cache, &ns, &quota_obj, &mut counted);
    tally::<Service>(cache, &ns, &quota_obj, &mut counted);
    tally::<PersistentVolumeClaim>(cache, &ns, &quota_obj, &mut counted);
    tally::<ReplicationController>(cache, &ns, &quota_obj, &mut counted);
    tally::<ResourceQuota>(cache, &ns, &quota_obj, &mut counted);
    tally::<Deployment>(cache, &ns, &quota_obj, &mut counted);
    tally::<ReplicaSet>(cache, &ns, &quota_obj, &mut counted);
    tally::<StatefulSet>(cache, &ns, &quota_obj, &mut counted);
    tally::<DaemonSet>(cache, &ns, &quota_obj, &mut counted);
    tally::<Job>(cache, &ns, &quota_obj, &mut counted);
    tally::<CronJob>(cache, &ns, &quota_obj, &mut counted);
    let watched = watched();
    let mut resync = false;
    let mut used: BTreeMap<String, Quantity> = BTreeMap::new();
    for name in hard.keys() {
        let amount = match counted.get(name) {
            Some(a) => *a,
            None => match unwatched_count_target(name, &watched) {
                Some((group, resource)) => {
                    resync = true;
                    count_listed(&ctx.client, &ns, &group, &resource).await? * 1000
                }
                None => 0,
            },
        };
        used.insert(name.clone(), Quantity(format_amount(name, amount)));
    }
    let current = q.status.clone().unwrap_or_default();
    let same = |a: &Option<BTreeMap<String, Quantity>>, b: &BTreeMap<String, Quantity>| {
        let a = a.clone().unwrap_or_default();
        a.len() == b.len()
            && a.iter().all(|(k, v)| {
                b.get(k).is_some_and(|w| parse_milli(&v.0).is_some() && parse_milli(&v.0) == parse_milli(&w.0))
            })
    };
    if !same(&current.hard, &hard) || !same(&current.used, &used) {
        let mut updated = (*q).clone();
        updated.status = Some(ResourceQuotaStatus { hard: Some(hard), used: Some(used) });
        let api: Api<ResourceQuota> = ctx.api_for();
        // A replace guarded by the resourceVersion: the API server's admission charges
        // the same status, and a conflict recounts.
        api.replace_status(&q.name_any(), &PostParams::default(), &updated).await?;
    }
    Ok(Action::requeue_after(if resync { UNWATCHED_RESYNC } else { RESYNC }))
}

/// The (group, resource) a `count/<resource>[.<group>]` name counts, when its kind is
/// not watched.
fn unwatched_count_target(name: &str, watched: &[(String, String)]) -> Option<(String, String)> {
    let rest = name.strip_prefix("count/")?;
    let (resource, group) = rest.split_once('.').unwrap_or((rest, ""));
    let target = (group.to_string(), resource.to_string());
    (!watched.contains(&target) && count_name(group, resource) == name).then_some(target)
}

/// How many objects of `group`/`resource` exist in `ns`, found through discovery.
async fn count_listed(client: &Client, ns: &str, group: &str, resource: &str) -> Result<i128, kube::Error> {
    let Ok(api_group) = kube::discovery::group(client, group).await else { return Ok(0) };
    let Some((ar, _)) = api_group.recommended_resources().into_iter().find(|(ar, _)| ar.plural == resource) else {
        return Ok(0);
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let list = api.list(&ListParams::default()).await?;
    Ok(i128::try_from(list.items.len()).unwrap_or(i128::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_names_of_unwatched_kinds_are_listed() {
        let watched = watched();
        assert_eq!(
            unwatched_count_target("count/widgets.example.com", &watched),
            Some(("example.com".into(), "widgets".into()))
        );
        assert_eq!(unwatched_count_target("count/deployments.apps", &watched), None);
        assert_eq!(unwatched_count_target("count/pods", &watched), None);
        assert_eq!(unwatched_count_target("requests.cpu", &watched), None);
    }
}
