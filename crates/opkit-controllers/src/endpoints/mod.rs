//! The endpoints and endpointslice controllers (kube-controller-manager's
//! `endpoint-controller` and `endpointslice-controller`): for every Service with a
//! selector, an `Endpoints` object of the same name and `discovery.k8s.io/v1`
//! EndpointSlices (labelled `kubernetes.io/service-name` and
//! `endpointslice.kubernetes.io/managed-by`, owned by the Service) listing its pods.

pub(crate) mod desired;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use opkit::{Action, Cache, Context, Controller, Manager, ReconcileResult, Request};

use crate::ControllersConfig;
use crate::common::WorkloadError;

/// The `endpointslice.kubernetes.io/managed-by` value of the slices this controller owns.
pub(crate) const MANAGED_BY: &str = "endpointslice-controller.k8s.io";
/// The label naming a slice's Service.
pub(crate) const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming a slice's manager.
pub(crate) const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";

/// Registers the endpoints controller with `mgr`.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("endpoints") {
        return Ok(());
    }
    let cache = mgr.cache().clone();
    Controller::new(mgr, reconcile)
        .client(crate::identity::client_for(mgr, cfg, "endpoints"))
        .named("endpoints")
        .owns::<EndpointSlice>()
        .watches::<Pod>(move |p| services_selecting(&cache, p))
        .watches::<Endpoints>(|e| vec![Request::from_object(e)])
        .max_concurrent_reconciles(4)
        .build()
}

/// The Services whose selector matches a pod.
fn services_selecting(cache: &Cache, pod: &Pod) -> Vec<Request> {
    let labels = pod.labels();
    cache
        .list::<Service>()
        .iter()
        .filter(|s| s.metadata.namespace == pod.metadata.namespace)
        .filter(|s| selector(s).is_some_and(|sel| sel.iter().all(|(k, v)| labels.get(k) == Some(v))))
        .map(|s| Request::from_object(&**s))
        .collect()
}

fn selector(svc: &Service) -> Option<&BTreeMap<String, String>> {
    svc.spec.as_ref()?.selector.as_ref().filter(|s| !s.is_empty())
}

async fn reconcile(ctx: Context<Service>) -> ReconcileResult {
    let ep_api: Api<Endpoints> = ctx.api_for();
    let Some(svc) = ctx.object.clone() else {
        match ep_api.delete(&ctx.request.name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        return Ok(Action::done());
    };
    let Some(sel) = selector(&svc) else { return Ok(Action::done()) };
    if svc.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let ns = svc.namespace().unwrap_or_default();
    let pods: Vec<Arc<Pod>> = ctx
        .cache
        .list::<Pod>()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
        .filter(|p| sel.iter().all(|(k, v)| p.labels().get(k) == Some(v)))
        .collect();
    let refs: Vec<&Pod> = pods.iter().map(|p| &**p).collect();
    let groups = desired::pod_endpoints(&svc, &refs);
    let headless = svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None");
    let mut labels = svc.labels().clone();
    if headless {
        labels.insert("service.kubernetes.io/headless".into(), String::new());
    }
    let publish_not_ready = svc.spec.as_ref().and_then(|s| s.publish_not_ready_addresses).unwrap_or(false);
    sync_endpoints(&ctx, &ep_api, &svc, labels.clone(), desired::subsets(&groups, publish_not_ready)).await?;
    sync_slices(&ctx, &svc, labels, &groups).await?;
    Ok(Action::done())
}

async fn sync_endpoints(
    ctx: &Context<Service>,
    api: &Api<Endpoints>,
    svc: &Service,
    labels: BTreeMap<String, String>,
    subsets: Option<Vec<k8s_openapi::api::core::v1::EndpointSubset>>,
) -> Result<(), WorkloadError> {
    let name = svc.name_any();
    let existing = ctx.cache.get::<Endpoints>(&name, svc.namespace().as_deref());
    let mut ep = Endpoints {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: svc.namespace(),
            labels: Some(labels),
            ..Default::default()
        },
        subsets,
    };
    match existing {
        Some(cur) if cur.subsets == ep.subsets && cur.metadata.labels == ep.metadata.labels => Ok(()),
        Some(cur) => {
            ep.metadata.resource_version = cur.resource_version();
            ep.metadata.annotations = cur.metadata.annotations.clone();
            api.replace(&name, &PostParams::default(), &ep).await?;
            Ok(())
        }
        None => match api.create(&PostParams::default(), &ep).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.is_already_exists() => {
                let mut cur = api.get(&name).await?;
                cur.subsets = ep.subsets;
                cur.metadata.labels = ep.metadata.labels;
                api.replace(&name, &PostParams::default(), &cur).await?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        },
    }
}

/// Makes the Service's EndpointSlices match `groups`: slices are reused by address type
/// and ports where possible, created for what is missing, and the rest deleted.
async fn sync_slices(
    ctx: &Context<Service>,
    svc: &Service,
    mut labels: BTreeMap<String, String>,
    groups: &BTreeMap<Vec<desired::Port>, Vec<desired::PodEndpoint>>,
) -> Result<(), WorkloadError> {
    let name = svc.name_any();
    let ns = svc.namespace().unwrap_or_default();
    let api: Api<EndpointSlice> = ctx.api_for();
    labels.insert(SERVICE_NAME_LABEL.into(), name.clone());
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    let owner =
        opkit::owner::controller_reference(svc).ok_or_else(|| WorkloadError::Invalid("Service has no uid".into()))?;
    let zones: BTreeMap<String, String> = ctx
        .cache
        .list::<Node>()
        .iter()
        .filter_map(|n| n.labels().get("topology.kubernetes.io/zone").map(|z| (n.name_any(), z.clone())))
        .collect();
    let mut existing = managed_slices(ctx, &ns, &name);
    for mut want in wanted_slices(groups, &zones) {
        let pos = existing
            .iter()
            .position(|s| s.address_type == want.address_type && s.ports == want.ports)
            .or_else(|| existing.iter().position(|s| s.address_type == want.address_type));
        match pos.map(|i| existing.remove(i)) {
            Some(cur) => {
                if cur.endpoints == want.endpoints
                    && cur.ports == want.ports
                    && cur.metadata.labels.as_ref() == Some(&labels)
                {
                    continue;
                }
                let mut next = (*cur).clone();
                next.endpoints = want.endpoints;
                next.ports = want.ports;
                next.metadata.labels = Some(labels.clone());
                api.replace(&cur.name_any(), &PostParams::default(), &next).await?;
            }
            None => {
                want.metadata = ObjectMeta {
                    generate_name: Some(format!("{name}-")),
                    namespace: Some(ns.clone()),
                    labels: Some(labels.clone()),
                    owner_references: Some(vec![owner.clone()]),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &want).await?;
            }
        }
    }
    for stale in existing {
        match api.delete(&stale.name_any(), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The EndpointSlices this controller manages for Service `name`, oldest first.
fn managed_slices(ctx: &Context<Service>, ns: &str, name: &str) -> Vec<Arc<EndpointSlice>> {
    let mut existing: Vec<Arc<EndpointSlice>> = ctx
        .cache
        .list::<EndpointSlice>()
        .into_iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(ns))
        .filter(|s| {
            s.labels().get(SERVICE_NAME_LABEL).map(String::as_str) == Some(name)
                && s.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
        })
        .collect();
    existing.sort_by_key(|s| s.metadata.creation_timestamp.as_ref().map(|t| t.0));
    existing
}

/// The slices wanted (metadata still empty): one per (address type, port list), or an
/// empty IPv4 placeholder when there are no endpoints.
fn wanted_slices(
    groups: &BTreeMap<Vec<desired::Port>, Vec<desired::PodEndpoint>>,
    zones: &BTreeMap<String, String>,
) -> Vec<EndpointSlice> {
    let mut wanted: Vec<EndpointSlice> = Vec::new();
    for (ports, eps) in groups {
        for family in ["IPv4", "IPv6"] {
            let members: Vec<desired::PodEndpoint> =
                eps.iter().filter(|e| e.ip.contains(':') == (family == "IPv6")).cloned().collect();
            if members.is_empty() {
                continue;
            }
            wanted.push(EndpointSlice {
                metadata: ObjectMeta::default(),
                address_type: family.into(),
                endpoints: desired::slice_endpoints(&members, zones),
                ports: Some(desired::slice_ports(ports)),
            });
        }
    }
    if wanted.is_empty() {
        wanted.push(EndpointSlice {
            metadata: ObjectMeta::default(),
            address_type: "IPv4".into(),
            endpoints: Vec::new(),
            ports: None,
        });
    }
    wanted
}
