//! The load-balancer controller, as kind's cloud provider and k3s's ServiceLB give a local
//! cluster one: every Service of type LoadBalancer without a `spec.loadBalancerClass` gets
//! `status.loadBalancer.ingress`. With a pool (`--lb-range`), each Service gets its own
//! address from it (its `spec.loadBalancerIP` when that is free and in the pool), kept
//! across updates and released when the Service goes or changes type; without one, the
//! InternalIPs of the Ready nodes, as ServiceLB publishes them. A Service that cannot get
//! an address stays pending with a `SyncLoadBalancerFailed` Warning, as kube's service
//! controller reports it; one whose type changes away from LoadBalancer loses its ingress.

mod pool;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use opkit::events::EventType;
use opkit::{Action, Cache, Context, Controller, Manager, ReconcileResult, Request};
use parking_lot::Mutex;
use serde_json::json;

pub use pool::{LoadBalancerPool, PoolError};

use crate::ControllersConfig;
use crate::common::events::publish;

/// How soon a Service the pool could not serve is tried again (besides whenever another
/// Service changes).
const RETRY_PENDING: std::time::Duration = std::time::Duration::from_secs(30);

/// What the controller keeps between reconciles: the pool, and which Service (as
/// `namespace/name`) holds which of its addresses.
struct LoadBalancers {
    pool: Option<LoadBalancerPool>,
    held: Mutex<BTreeMap<Ipv4Addr, String>>,
}

/// Registers the load-balancer controller with `mgr`.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("service-lb") {
        return Ok(());
    }
    let state = std::sync::Arc::new(LoadBalancers { pool: cfg.load_balancer_pool, held: Mutex::new(BTreeMap::new()) });
    let (nodes_cache, services_cache) = (mgr.cache().clone(), mgr.cache().clone());
    Controller::new(mgr, reconcile)
        .client(crate::identity::client_for(mgr, cfg, "service-lb"))
        .named("service-lb")
        .with_state(state)
        .watches::<Node>(move |_| load_balancer_services(&nodes_cache, |_| true))
        .watches::<Service>(move |_| load_balancer_services(&services_cache, |s| ingress_ips(s).is_empty()))
        .build()
}

/// The Services of type LoadBalancer that `which` picks: all of them follow the nodes
/// when there is no pool, and the pending ones retry whenever another Service changes
/// (it may have given an address back).
fn load_balancer_services(cache: &Cache, which: impl Fn(&Service) -> bool) -> Vec<Request> {
    cache.list::<Service>().iter().filter(|s| is_ours(s) && which(s)).map(|s| Request::from_object(&**s)).collect()
}

fn service_type(svc: &Service) -> &str {
    svc.spec.as_ref().and_then(|s| s.type_.as_deref()).unwrap_or("ClusterIP")
}

/// A LoadBalancer Service this controller implements: one with a `loadBalancerClass`
/// belongs to another implementation.
fn is_ours(svc: &Service) -> bool {
    service_type(svc) == "LoadBalancer" && svc.spec.as_ref().is_none_or(|s| s.load_balancer_class.is_none())
}

/// The IPs the Service's status shows.
fn ingress_ips(svc: &Service) -> Vec<String> {
    let ingress = svc.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|lb| lb.ingress.as_ref());
    ingress.into_iter().flatten().filter_map(|i| i.ip.clone()).collect()
}

async fn reconcile(ctx: Context<Service, LoadBalancers>) -> ReconcileResult {
    let key = format!("{}/{}", ctx.request.namespace.as_deref().unwrap_or_default(), ctx.request.name);
    let wanted = ctx.object.as_deref().filter(|s| is_ours(s) && s.metadata.deletion_timestamp.is_none());
    let Some(svc) = wanted else {
        ctx.state.release(&key);
        if let Some(svc) = ctx.object.as_deref()
            && service_type(svc) != "LoadBalancer"
            && !ingress_ips(svc).is_empty()
        {
            write_ingress(&ctx, &[]).await?;
        }
        return Ok(Action::done());
    };
    let addresses = match ctx.state.pool {
        Some(pool) => match ctx.state.allocate(pool, &key, svc, &ctx.cache) {
            Ok(ip) => vec![ip.to_string()],
            Err(why) => {
                let note = format!("Error syncing load balancer: failed to ensure load balancer: {why}");
                publish(&ctx.recorder, svc, EventType::Warning, "SyncLoadBalancerFailed", "EnsureLoadBalancer", &note)
                    .await;
                return Ok(Action::requeue_after(RETRY_PENDING));
            }
        },
        None => ready_node_ips(&ctx.cache),
    };
    if addresses.is_empty() || addresses == ingress_ips(svc) {
        return Ok(Action::done());
    }
    write_ingress(&ctx, &addresses).await?;
    publish(
        &ctx.recorder,
        svc,
        EventType::Normal,
        "EnsuredLoadBalancer",
        "EnsureLoadBalancer",
        "Ensured load balancer",
    )
    .await;
    Ok(Action::done())
}

/// Sets (or, with no addresses, removes) `status.loadBalancer.ingress`.
async fn write_ingress(ctx: &Context<Service, LoadBalancers>, addresses: &[String]) -> Result<(), kube::Error> {
    let ingress = if addresses.is_empty() {
        serde_json::Value::Null
    } else {
        json!(addresses.iter().map(|ip| json!({"ip": ip, "ipMode": "VIP"})).collect::<Vec<_>>())
    };
    let api: Api<Service> = ctx.api_for();
    let patch = json!({"status": {"loadBalancer": {"ingress": ingress}}});
    api.patch_status(&ctx.request.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// The InternalIPs of the Ready nodes, in name order (ServiceLB's default ingress).
fn ready_node_ips(cache: &Cache) -> Vec<String> {
    let mut nodes = cache.list::<Node>();
    nodes.sort_by_key(|n| n.name_any());
    nodes
        .iter()
        .filter_map(|n| n.status.as_ref())
        .filter(|s| s.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True"))
        .filter_map(|s| s.addresses.iter().flatten().find(|a| a.type_ == "InternalIP").map(|a| a.address.clone()))
        .collect()
}

impl LoadBalancers {
    fn release(&self, key: &str) {
        self.held.lock().retain(|_, holder| holder != key);
    }

    /// The pool address of the Service `key`: the one it holds, else the one its status
    /// shows (assigned before a restart), else its `spec.loadBalancerIP`, else the first
    /// free one. An address is free when no other Service holds it or shows it.
    fn allocate(&self, pool: LoadBalancerPool, key: &str, svc: &Service, cache: &Cache) -> Result<Ipv4Addr, String> {
        let mut held = self.held.lock();
        if let Some((ip, _)) = held.iter().find(|(_, holder)| *holder == key) {
            return Ok(*ip);
        }
        let shown: BTreeSet<Ipv4Addr> = cache
            .list::<Service>()
            .iter()
            .filter(|s| {
                s.meta().namespace.as_deref() != svc.meta().namespace.as_deref() || s.name_any() != svc.name_any()
            })
            .flat_map(|s| ingress_ips(s))
            .filter_map(|ip| ip.parse().ok())
            .collect();
        let free = |ip: &Ipv4Addr| pool.contains(*ip) && !held.contains_key(ip) && !shown.contains(ip);
        let requested = svc.spec.as_ref().and_then(|s| s.load_balancer_ip.as_deref()).filter(|ip| !ip.is_empty());
        let ip = if let Some(requested) = requested {
            requested.parse().ok().filter(free).ok_or_else(|| {
                format!("requested loadBalancerIP {requested} is not a free address of the pool {pool}")
            })?
        } else {
            let current = ingress_ips(svc).iter().filter_map(|ip| ip.parse().ok()).find(free);
            current
                .or_else(|| pool.addresses().find(free))
                .ok_or_else(|| format!("no free address in the pool {pool}"))?
        };
        held.insert(ip, key.to_string());
        Ok(ip)
    }
}
