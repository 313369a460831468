//! One pass of deleting a terminating namespace's content, as kube's namespaced
//! resources deleter does: discover every namespaced resource that can be deleted
//! (custom resources included), delete its objects in the namespace (deletecollection,
//! or one by one), then list what remains and count it by resource and finalizer.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams};
use kube::discovery::{ApiCapabilities, Discovery, Scope};

use super::conditions::DeletionReport;

/// How many resources are cleaned at once.
const PARALLEL: usize = 8;

/// What cleaning one resource found.
#[derive(Debug, Default)]
struct ResourceOutcome {
    remaining: usize,
    finalizers: Vec<String>,
    estimate: i64,
    error: Option<String>,
}

fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The namespaced, deletable resources at their preferred versions.
fn deletable(disc: &Discovery) -> Vec<(ApiResource, ApiCapabilities)> {
    disc.groups()
        .flat_map(|g| g.recommended_resources())
        .filter(|(_, caps)| caps.scope == Scope::Namespaced && caps.supports_operation("delete"))
        .collect()
}

/// Runs one deletion pass over namespace `ns`, deleted at `deleted_at`.
pub(crate) async fn delete_all_content(client: &Client, ns: &str, deleted_at: Option<&Time>) -> DeletionReport {
    let mut report = DeletionReport::default();
    let disc = match Discovery::new(client.clone()).run_aggregated().await {
        Ok(d) => Ok(d),
        Err(_) => Discovery::new(client.clone()).run().await,
    };
    let disc = match disc {
        Ok(d) => d,
        Err(e) => {
            report.discovery_error = Some(e.to_string());
            return report;
        }
    };
    let resources = deletable(&disc);
    for (ar, _) in &resources {
        if ar.version.is_empty() {
            report.group_version_error = Some(format!("unexpected GroupVersion string: {}", ar.api_version));
        }
    }
    let outcomes: Vec<(ApiResource, ResourceOutcome)> = futures::stream::iter(resources)
        .map(|(ar, caps)| async move {
            let out = clean_resource(client, ns, &ar, &caps, deleted_at).await;
            (ar, out)
        })
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    for (ar, out) in outcomes {
        report.estimate = report.estimate.max(out.estimate);
        if let Some(e) = out.error {
            report.content_errors.push(e);
        }
        if out.remaining > 0 {
            report.remaining.insert((ar.group.clone(), ar.plural.clone()), out.remaining);
            for f in out.finalizers {
                *report.finalizers.entry(f).or_default() += 1;
            }
        }
    }
    report
}

/// Seconds until running pods should have terminated (kube's graceful estimate).
async fn pods_estimate(client: &Client, ns: &str, deleted_at: Option<&Time>) -> Result<i64, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut estimate = 0;
    for p in pods.list(&ListParams::default()).await? {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            continue;
        }
        if let Some(g) = p.spec.as_ref().and_then(|s| s.termination_grace_period_seconds) {
            estimate = estimate.max(g);
        }
    }
    if let Some(at) = deleted_at {
        let elapsed = Timestamp::now().as_second() - at.0.as_second();
        if elapsed >= estimate {
            estimate = 0;
        }
    }
    Ok(estimate)
}

async fn clean_resource(
    client: &Client,
    ns: &str,
    ar: &ApiResource,
    caps: &ApiCapabilities,
    deleted_at: Option<&Time>,
) -> ResourceOutcome {
    let mut out = ResourceOutcome::default();
    let gvr = format!("{}/{}, Resource={}", ar.group, ar.version, ar.plural);
    if ar.group.is_empty() && ar.plural == "pods" {
        out.estimate = pods_estimate(client, ns, deleted_at).await.unwrap_or(5);
    }
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
    let can_list = caps.supports_operation("list");
    let dp = DeleteParams::background();
    let mut collected = false;
    if caps.supports_operation("deletecollection") {
        match api.delete_collection(&dp, &ListParams::default()).await {
            Ok(_) => collected = true,
            Err(e) if matches!(code(&e), Some(404 | 405)) => {}
            Err(e) => {
                out.error = Some(e.to_string());
                return out;
            }
        }
    }
    if !can_list {
        return out;
    }
    if !collected {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                for obj in list {
                    let name = obj.metadata.name.clone().unwrap_or_default();
                    match api.delete(&name, &dp).await {
                        Ok(_) => {}
                        Err(e) if matches!(code(&e), Some(404 | 409)) => {}
                        Err(e) => {
                            out.error = Some(e.to_string());
                            return out;
                        }
                    }
                }
            }
            Err(e) if matches!(code(&e), Some(404 | 405)) => return out,
            Err(e) => {
                out.error = Some(e.to_string());
                return out;
            }
        }
    }
    let left = match api.list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) if matches!(code(&e), Some(404 | 405)) => return out,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    if left.is_empty() {
        out.estimate = 0;
        return out;
    }
    out.remaining = left.len();
    out.finalizers = left.iter().flat_map(|o| o.metadata.finalizers.clone().unwrap_or_default()).collect();
    if out.estimate == 0 {
        if out.finalizers.is_empty() {
            out.estimate = 1;
            out.error = Some(format!("unexpected items still remain in namespace: {ns} for gvr: {gvr}"));
        } else {
            out.estimate = FINALIZER_ESTIMATE;
        }
    }
    out
}

/// kube's default estimate for finalizers to complete.
const FINALIZER_ESTIMATE: i64 = 15;
