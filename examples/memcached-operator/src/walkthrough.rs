// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The Memcached walkthrough against any cluster: installs the CRD, runs the operator in
//! this process, creates a Memcached of size 3 and shows the Deployment, the pods and
//! `status.nodes`, scales it to 5, deletes it and shows the garbage collection. The
//! `walkthrough` example runs it on an embedded control plane; the tests run it headless.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{Condition, await_condition, conditions};
use kube::{Client, ResourceExt};
use opkit::{Manager, ManagerOptions};
use tokio_util::sync::CancellationToken;

use crate::api::cache_v1alpha1::{Memcached, MemcachedSpec};

/// A step of the walkthrough that failed.
#[derive(Debug, thiserror::Error)]
pub enum WalkthroughError {
    /// An API call failed.
    #[error("{step}: {source}")]
    Api {
        /// What the walkthrough was doing.
        step: &'static str,
        /// The error.
        source: kube::Error,
    },
    /// Something did not happen in time.
    #[error("{0}: timed out")]
    Timeout(&'static str),
    /// The operator's manager failed.
    #[error("operator: {0}")]
    Manager(String),
}

/// What the walkthrough saw.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Summary {
    /// `status.nodes` at size 3.
    pub nodes_at_3: Vec<String>,
    /// `status.nodes` at size 5.
    pub nodes_at_5: Vec<String>,
    /// Seconds from creating the Memcached until 3 nodes were reported.
    pub secs_to_3: f64,
    /// Seconds from scaling until 5 nodes were reported.
    pub secs_to_5: f64,
    /// Seconds from deleting the Memcached until its Deployment and pods were gone.
    pub secs_to_collected: f64,
    /// Seconds for the whole walkthrough.
    pub total_secs: f64,
}

const TIMEOUT: Duration = Duration::from_secs(120);
const NAME: &str = "memcached-sample";

fn api(step: &'static str) -> impl FnOnce(kube::Error) -> WalkthroughError {
    move |source| WalkthroughError::Api { step, source }
}

async fn wait<K, C>(step: &'static str, api_: Api<K>, name: &str, cond: C) -> Result<Option<K>, WalkthroughError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    C: Condition<K>,
{
    match tokio::time::timeout(TIMEOUT, await_condition(api_, name, cond)).await {
        Ok(Ok(obj)) => Ok(obj),
        Ok(Err(e)) => Err(WalkthroughError::Manager(format!("{step}: {e}"))),
        Err(_) => Err(WalkthroughError::Timeout(step)),
    }
}

fn ready_with(size: usize) -> impl Condition<Memcached> {
    move |m: Option<&Memcached>| {
        m.and_then(|m| m.status.as_ref().map(|s| (m, s))).is_some_and(|(m, s)| {
            s.nodes.len() == size
                && s.conditions.iter().any(|c| {
                    c.type_ == "Available" && c.status == "True" && c.observed_generation == m.metadata.generation
                })
        })
    }
}

/// Runs the walkthrough in `namespace` on the cluster behind `client`, reporting each
/// step to `say`. The operator runs in this process until the walkthrough ends.
pub async fn run(client: Client, namespace: &str, say: &(dyn Fn(&str) + Sync)) -> Result<Summary, WalkthroughError> {
    let started = Instant::now();
    let mut summary = Summary::default();

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crate::api::crds() {
        let name = crd.name_any();
        let pp = PatchParams::apply("memcached-walkthrough").force();
        crds.patch(&name, &pp, &Patch::Apply(&crd)).await.map_err(api("install the CRD"))?;
        wait("wait for the CRD", crds.clone(), &name, conditions::is_crd_established()).await?;
        say(&format!("installed CRD {name}"));
    }

    let mgr = Manager::new(client.clone(), ManagerOptions::default());
    crate::controller::setup(&mgr).map_err(|e| WalkthroughError::Manager(e.to_string()))?;
    let stop = CancellationToken::new();
    let operator = tokio::spawn(mgr.run_until(stop.clone()));
    say("operator running (controller memcached: For Memcached, Owns Deployment, Watches Pod)");

    let result = steps(&client, namespace, say, &mut summary).await;
    stop.cancel();
    match operator.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(WalkthroughError::Manager(e.to_string())),
        Err(e) => return Err(WalkthroughError::Manager(e.to_string())),
    }
    result?;
    summary.total_secs = started.elapsed().as_secs_f64();
    Ok(summary)
}

async fn steps(
    client: &Client,
    namespace: &str,
    say: &(dyn Fn(&str) + Sync),
    summary: &mut Summary,
) -> Result<(), WalkthroughError> {
    let memcacheds: Api<Memcached> = Api::namespaced(client.clone(), namespace);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = ListParams::default().labels(&format!("app=memcached,memcached_cr={NAME}"));

    let t = Instant::now();
    memcacheds
        .create(&PostParams::default(), &Memcached::new(NAME, MemcachedSpec { size: 3 }))
        .await
        .map_err(api("create the Memcached"))?;
    say(&format!("created memcached/{NAME} with size 3"));
    let m = wait("wait for 3 nodes", memcacheds.clone(), NAME, ready_with(3)).await?;
    summary.secs_to_3 = t.elapsed().as_secs_f64();
    summary.nodes_at_3 = m.and_then(|m| m.status).map(|s| s.nodes).unwrap_or_default();
    let dep = deployments.get(NAME).await.map_err(api("get the Deployment"))?;
    let ready = dep.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
    let image = dep
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    say(&format!("deployment/{NAME}: {ready}/3 ready, image {image}, owned by memcached/{NAME}"));
    for pod in pods.list(&selector).await.map_err(api("list the pods"))?.items {
        let status = pod.status.as_ref();
        say(&format!(
            "  pod/{} {} on {}",
            pod.name_any(),
            status.and_then(|s| s.phase.clone()).unwrap_or_default(),
            pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default()
        ));
    }
    say(&format!("status.nodes = {:?} ({:.1}s)", summary.nodes_at_3, summary.secs_to_3));

    let t = Instant::now();
    let patch = serde_json::json!({"spec": {"size": 5}});
    memcacheds.patch(NAME, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(api("scale to 5"))?;
    say("scaled to size 5");
    let m = wait("wait for 5 nodes", memcacheds.clone(), NAME, ready_with(5)).await?;
    summary.secs_to_5 = t.elapsed().as_secs_f64();
    summary.nodes_at_5 = m.and_then(|m| m.status).map(|s| s.nodes).unwrap_or_default();
    say(&format!("status.nodes = {:?} ({:.1}s)", summary.nodes_at_5, summary.secs_to_5));

    let t = Instant::now();
    let dep_uid = deployments.get(NAME).await.map_err(api("get the Deployment"))?.metadata.uid.unwrap_or_default();
    let left = pods.list(&selector).await.map_err(api("list the pods"))?.items;
    memcacheds.delete(NAME, &DeleteParams::default()).await.map_err(api("delete the Memcached"))?;
    say(&format!("deleted memcached/{NAME}"));
    wait("wait for the Deployment to be collected", deployments, NAME, conditions::is_deleted(&dep_uid)).await?;
    say(&format!("deployment/{NAME} garbage-collected"));
    for pod in left {
        let (name, uid) = (pod.name_any(), pod.metadata.uid.clone().unwrap_or_default());
        wait("wait for the pods to be collected", pods.clone(), &name, conditions::is_deleted(&uid)).await?;
    }
    summary.secs_to_collected = t.elapsed().as_secs_f64();
    say(&format!("all {} pods garbage-collected ({:.1}s)", summary.nodes_at_5.len(), summary.secs_to_collected));
    Ok(())
}
