//! Deleting a Deployment with each propagation policy, as `kubectl delete` and kube-rs
//! do it: background removes its ReplicaSets and pods, foreground keeps the Deployment
//! until they are gone, orphan leaves the ReplicaSet (and its pods) without an owner.

use crate::common;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::wait::{await_condition, conditions};
use opkit_testenv::TestEnv;

use common::{Error, WAIT, kubectl, wait};

/// Creates deployment `name` with 2 replicas and waits until it is available; returns its
/// ReplicaSets and pods.
async fn running(env: &TestEnv, name: &str) -> Result<(Vec<ReplicaSet>, Vec<Pod>), Error> {
    kubectl(env, &["create", "deployment", name, "--image=nginx", "--replicas=2"]).await?;
    kubectl(env, &["rollout", "status", &format!("deployment/{name}"), "--timeout=60s"]).await?;
    let selector = ListParams::default().labels(&format!("app={name}"));
    let rss = Api::<ReplicaSet>::default_namespaced(env.client()).list(&selector).await?.items;
    let pods = Api::<Pod>::default_namespaced(env.client()).list(&selector).await?.items;
    assert_eq!((rss.len(), pods.len()), (1, 2));
    Ok((rss, pods))
}

/// Waits until every object is deleted (by uid, so a replacement does not count).
async fn all_gone<K>(api: &Api<K>, objs: &[K]) -> Result<(), Error>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    for o in objs {
        let uid = o.meta().uid.clone().unwrap_or_default();
        tokio::time::timeout(WAIT, await_condition(api.clone(), &o.name_any(), conditions::is_deleted(&uid)))
            .await
            .map_err(|_| format!("timed out waiting for {} to be deleted", o.name_any()))??;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_deletion_removes_replicasets_and_pods() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let (rss, pods) = running(&env, "web").await?;
    kubectl(&env, &["delete", "deployment", "web", "--cascade=background"]).await?;
    all_gone(&Api::<ReplicaSet>::default_namespaced(env.client()), &rss).await?;
    all_gone(&Api::<Pod>::default_namespaced(env.client()), &pods).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_deletion_keeps_the_deployment_until_its_pods_are_gone() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let (rss, pods) = running(&env, "web").await?;
    // The pods take 2 s to terminate, so the dependents surely outlive the GET below.
    kubectl(&env, &["annotate", "pods", "-l", "app=web", "opkit.dev/termination-duration=2s"]).await?;
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    let uid = deployments.get("web").await?.uid().unwrap_or_default();
    deployments.delete("web", &DeleteParams::foreground()).await?;
    // The owner stays, marked for deletion with the foregroundDeletion finalizer, while
    // its dependents exist.
    let marked = deployments.get("web").await?;
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(marked.finalizers().iter().any(|f| f == "foregroundDeletion"), "{:?}", marked.finalizers());
    let pod_api = Api::<Pod>::default_namespaced(env.client());
    let mut deployment_gone_first = false;
    let gone = tokio::time::timeout(WAIT, await_condition(deployments.clone(), "web", conditions::is_deleted(&uid)));
    gone.await.map_err(|_| "timed out waiting for the deployment")??;
    for p in &pods {
        if pod_api.get_opt(&p.name_any()).await?.is_some_and(|now| now.uid() == p.uid()) {
            deployment_gone_first = true;
        }
    }
    assert!(!deployment_gone_first, "the deployment went away while its pods still existed");
    all_gone(&Api::<ReplicaSet>::default_namespaced(env.client()), &rss).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_deletion_leaves_the_replicaset_and_pods_without_the_deployment() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let (rss, pods) = running(&env, "web").await?;
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    let uid = deployments.get("web").await?.uid().unwrap_or_default();
    kubectl(&env, &["delete", "deployment", "web", "--cascade=orphan"]).await?;
    let gone = tokio::time::timeout(WAIT, await_condition(deployments.clone(), "web", conditions::is_deleted(&uid)));
    gone.await.map_err(|_| "timed out waiting for the deployment")??;
    let rs_api = Api::<ReplicaSet>::default_namespaced(env.client());
    let rs_name = rss[0].name_any();
    let orphaned =
        wait(&rs_api, &rs_name, |rs: Option<&ReplicaSet>| rs.is_some_and(|rs| rs.owner_references().is_empty()))
            .await?;
    assert_eq!(orphaned.uid(), rss[0].uid(), "the same ReplicaSet, not a new one");
    // The pods keep their ReplicaSet owner and keep running.
    let pod_api = Api::<Pod>::default_namespaced(env.client());
    for p in &pods {
        let now = pod_api.get(&p.name_any()).await?;
        assert_eq!(now.uid(), p.uid());
        assert!(now.metadata.deletion_timestamp.is_none());
        assert_eq!(now.owner_references().first().map(|o| o.name.as_str()), Some(rs_name.as_str()));
    }
    Ok(())
}
