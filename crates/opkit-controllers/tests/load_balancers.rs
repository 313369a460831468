//! The load-balancer controller against a real opkit API server: LoadBalancer Services get
//! ingress addresses (the nodes' by default, or unique ones from a pool), keep them, give
//! them back, and leave Services of another load-balancer class alone.

use crate::common;

use k8s_openapi::api::core::v1::{Event, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use opkit_controllers::ControllersConfig;
use opkit_testenv::TestEnv;
use serde_json::json;

use common::{Error, WAIT, kubectl, wait};

fn service(name: &str, extra_spec: serde_json::Value) -> Service {
    let mut spec = json!({"type": "LoadBalancer", "selector": {"app": name}, "ports": [{"port": 80}]});
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        s.extend(extra.clone());
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("a Service")
}

fn ingress(s: &Service) -> Vec<String> {
    let lb = s.status.as_ref().and_then(|st| st.load_balancer.as_ref()).and_then(|lb| lb.ingress.clone());
    lb.into_iter().flatten().filter_map(|i| i.ip).collect()
}

fn has_ingress(s: Option<&Service>) -> bool {
    s.is_some_and(|s| !ingress(s).is_empty())
}

async fn env_with_pool(pool: &str) -> Result<TestEnv, Error> {
    let cfg = ControllersConfig { load_balancer_pool: Some(pool.parse()?), ..ControllersConfig::default() };
    Ok(TestEnv::builder().controllers(cfg).start().await?)
}

#[tokio::test]
async fn without_a_pool_load_balancers_get_the_ready_nodes_addresses() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let api: Api<Service> = Api::default_namespaced(env.client());
    api.create(&PostParams::default(), &service("web", json!({}))).await?;
    let web = wait(&api, "web", |s: Option<&Service>| s.is_some_and(|s| ingress(s).len() == 3)).await?;
    assert_eq!(ingress(&web), ["10.0.0.2", "10.0.0.3", "10.0.0.4"]);
    let first =
        &web.status.as_ref().and_then(|s| s.load_balancer.clone()).and_then(|lb| lb.ingress).unwrap_or_default()[0];
    assert_eq!(first.ip_mode.as_deref(), Some("VIP"));
    let table = kubectl(&env, &["get", "svc", "web", "--no-headers"]).await?;
    assert!(table.contains("10.0.0.2,10.0.0.3,10.0.0.4"), "EXTERNAL-IP column: {table}");
    Ok(())
}

#[tokio::test]
async fn a_pool_gives_each_service_its_own_address_and_takes_it_back() -> Result<(), Error> {
    let env = env_with_pool("172.18.255.200-172.18.255.202").await?;
    let api: Api<Service> = Api::default_namespaced(env.client());
    let pp = PostParams::default();
    api.create(&pp, &service("pinned", json!({"loadBalancerIP": "172.18.255.202"}))).await?;
    api.create(&pp, &service("a", json!({}))).await?;
    api.create(&pp, &service("b", json!({}))).await?;
    api.create(&pp, &service("foreign", json!({"loadBalancerClass": "example.com/other"}))).await?;
    let pinned = wait(&api, "pinned", has_ingress).await?;
    assert_eq!(ingress(&pinned), ["172.18.255.202"]);
    let a = ingress(&wait(&api, "a", has_ingress).await?);
    let b = ingress(&wait(&api, "b", has_ingress).await?);
    let mut all = [a[0].clone(), b[0].clone()];
    all.sort();
    assert_eq!(all, ["172.18.255.200", "172.18.255.201"], "distinct pool addresses");

    // The pool is exhausted: a fourth Service stays pending, with kube's Warning.
    api.create(&pp, &service("late", json!({}))).await?;
    let events: Api<Event> = Api::default_namespaced(env.client());
    tokio::time::timeout(WAIT, async {
        loop {
            let list = events.list(&ListParams::default().fields("reason=SyncLoadBalancerFailed")).await?;
            if list.items.iter().any(|e| e.involved_object.name.as_deref() == Some("late")) {
                return Ok::<_, Error>(());
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .map_err(|_| "no SyncLoadBalancerFailed event for the Service the pool could not serve")??;
    assert!(ingress(&api.get("late").await?).is_empty());

    // Changing type gives the address back; the pending Service then gets it.
    let freed = ingress(&api.get("a").await?)[0].clone();
    api.patch("a", &PatchParams::default(), &Patch::Merge(json!({"spec": {"type": "ClusterIP"}}))).await?;
    wait(&api, "a", |s: Option<&Service>| s.is_some_and(|s| ingress(s).is_empty())).await?;
    let late = wait(&api, "late", has_ingress).await?;
    assert_eq!(ingress(&late), [freed]);

    // Deleting a Service frees its address for the next one.
    let b_ip = ingress(&api.get("b").await?)[0].clone();
    api.delete("b", &DeleteParams::default()).await?;
    api.create(&pp, &service("c", json!({}))).await?;
    assert_eq!(ingress(&wait(&api, "c", has_ingress).await?), [b_ip]);

    // Another implementation's Service is left alone.
    assert!(ingress(&api.get("foreign").await?).is_empty());
    Ok(())
}
