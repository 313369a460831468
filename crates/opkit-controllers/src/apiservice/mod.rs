//! The APIService availability controller (kube-aggregator's `available_controller`): an
//! APIService served by a Service is `Available` only when that Service exists, listens on
//! the APIService's port, has endpoints with an address for that port, and answers the
//! discovery GET of the group/version over TLS (verified against `spec.caBundle` for the
//! name `<service>.<namespace>.svc`, unless `insecureSkipTLSVerify`). Each failure is a
//! condition with kube's reason: `ServiceNotFound`, `ServicePortError`, `MissingEndpoints`,
//! `FailedDiscoveryCheck`; success is `Passed`. Checks repeat every 30 s. Local APIServices
//! (no `spec.service`) are the API server's own and always available. Only endpoints on
//! loopback are contacted: a simulated pod's address is reported unreachable, with no
//! traffic sent.

mod discovery;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{APIService, ServiceReference};
use kube::api::{Api, Patch, PatchParams};
use opkit::{Action, Cache, Context, Controller, Manager, ReconcileResult, Request};
use serde_json::json;

use crate::ControllersConfig;
use opkit_apimachinery::aggregation;

/// How often a service-backed APIService is checked again.
const RECHECK: Duration = Duration::from_secs(30);

/// Registers the availability controller with `mgr`.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("apiservice") {
        return Ok(());
    }
    let (services, endpoints) = (mgr.cache().clone(), mgr.cache().clone());
    Controller::new(mgr, reconcile)
        .client(crate::identity::client_for(mgr, cfg, "apiservice"))
        .named("apiservice")
        .watches::<Service>(move |s| backed_by(&services, s.metadata.namespace.as_deref(), s.metadata.name.as_deref()))
        .watches::<Endpoints>(move |e| {
            backed_by(&endpoints, e.metadata.namespace.as_deref(), e.metadata.name.as_deref())
        })
        .max_concurrent_reconciles(2)
        .build()
}

/// The APIServices served by the Service `namespace/name`.
fn backed_by(cache: &Cache, namespace: Option<&str>, name: Option<&str>) -> Vec<Request> {
    cache
        .list::<APIService>()
        .iter()
        .filter(|a| {
            let service = a.spec.as_ref().and_then(|s| s.service.as_ref());
            service.is_some_and(|s| s.namespace.as_deref() == namespace && s.name.as_deref() == name)
        })
        .map(|a| Request::from_object(&**a))
        .collect()
}

/// An `Available` condition: status, reason, message.
#[derive(Debug, PartialEq, Eq)]
struct Availability {
    status: &'static str,
    reason: &'static str,
    message: String,
}

impl Availability {
    fn unavailable(reason: &'static str, message: String) -> Availability {
        Availability { status: "False", reason, message }
    }
}

async fn reconcile(ctx: Context<APIService>) -> ReconcileResult {
    let Some(apiservice) = ctx.object.clone() else { return Ok(Action::done()) };
    let Some(service) = apiservice.spec.as_ref().and_then(|s| s.service.clone()) else { return Ok(Action::done()) };
    let now = check(&ctx.cache, &apiservice, &service).await;
    let current = apiservice
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Available"));
    let unchanged = current.is_some_and(|c| {
        c.status == now.status
            && c.reason.as_deref() == Some(now.reason)
            && c.message.as_deref() == Some(now.message.as_str())
    });
    if !unchanged {
        let since = match current {
            Some(c) if c.status == now.status => {
                c.last_transition_time.clone().map(|t| json!(t)).unwrap_or(json!(null))
            }
            _ => json!(crate::common::now()),
        };
        let condition = json!({"type": "Available", "status": now.status, "lastTransitionTime": since,
            "reason": now.reason, "message": now.message});
        let api: Api<APIService> = Api::all(ctx.client.clone());
        let patch = json!({"status": {"conditions": [condition]}});
        api.patch_status(&ctx.request.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    Ok(Action::requeue_after(RECHECK))
}

/// The availability of a service-backed APIService, as kube-aggregator checks it.
async fn check(cache: &Cache, apiservice: &APIService, service: &ServiceReference) -> Availability {
    let (ns, name) = (service.namespace.clone().unwrap_or_default(), service.name.clone().unwrap_or_default());
    let svc = cache.get::<Service>(&name, Some(&ns));
    let endpoints = cache.get::<Endpoints>(&name, Some(&ns));
    let backend = match aggregation::resolve(apiservice, svc.as_deref(), endpoints.as_deref()) {
        Ok(backend) => backend,
        Err(why) => return Availability::unavailable(why.reason, why.message),
    };
    let spec = apiservice.spec.clone().unwrap_or_default();
    let path = format!("/apis/{}/{}", spec.group.clone().unwrap_or_default(), spec.version.clone().unwrap_or_default());
    match discovery::get(&backend, &path).await {
        Ok(()) => Availability { status: "True", reason: "Passed", message: "all checks passed".into() },
        Err(e) => Availability::unavailable(
            "FailedDiscoveryCheck",
            format!("failing or missing response from https://{}{path}: {e}", backend.address),
        ),
    }
}
