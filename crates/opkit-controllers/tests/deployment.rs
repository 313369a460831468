//! The deployment and replicaset controllers against a real opkit API server, driven with
//! kubectl and kube-rs: rollouts (RollingUpdate within maxUnavailable, Recreate), rollout
//! history and undo, scaling, ReplicaSet adoption and release, and never over-creating.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{Condition, await_condition};
use kube::runtime::watcher;
use opkit_testenv::TestEnv;
use parking_lot::Mutex;
use serde_json::json;

use common::{Error, WAIT, kubectl, wait};

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What a watch on pods saw over time.
#[derive(Debug, Default)]
struct Seen {
    pods: HashMap<String, Pod>,
    names: BTreeSet<String>,
    max_active: usize,
    /// The fewest Ready, non-terminating pods seen once armed.
    min_available: Option<usize>,
    armed: bool,
    /// The most pod-template-hash values seen among existing pods at one time.
    max_hashes: usize,
}

impl Seen {
    fn record(&mut self) {
        let active = self.pods.values().filter(|p| p.metadata.deletion_timestamp.is_none()).count();
        self.max_active = self.max_active.max(active);
        if self.armed {
            let available =
                self.pods.values().filter(|p| p.metadata.deletion_timestamp.is_none() && is_ready(p)).count();
            self.min_available = Some(self.min_available.map_or(available, |m| m.min(available)));
        }
        let hashes: BTreeSet<&str> =
            self.pods.values().filter_map(|p| p.labels().get("pod-template-hash").map(String::as_str)).collect();
        self.max_hashes = self.max_hashes.max(hashes.len());
    }
}

/// Waits until the watch shows `n` pods that are not being deleted, or fails after
/// [`WAIT`]. (A ReplicaSet's status comes from its controller's cache, which may still
/// count pods whose deletion it has not observed, so the pods themselves are waited on.)
async fn until_active(seen: &Arc<Mutex<Seen>>, n: usize) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let active = seen.lock().pods.values().filter(|p| p.metadata.deletion_timestamp.is_none()).count();
        if active == n {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("{active} active pods, not {n}, after {WAIT:?}").into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Watches pods matching `labels` in the background.
async fn track(api: Api<Pod>, labels: &str) -> Arc<Mutex<Seen>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let out = seen.clone();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let cfg = watcher::Config::default().labels(labels);
    tokio::spawn(async move {
        let mut ready_tx = Some(ready_tx);
        let mut stream = watcher(api, cfg).boxed();
        while let Some(ev) = stream.next().await {
            let mut s = out.lock();
            match ev {
                Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p)) => {
                    s.names.insert(p.name_any());
                    s.pods.insert(p.name_any(), p);
                }
                Ok(watcher::Event::Delete(p)) => {
                    s.pods.remove(&p.name_any());
                }
                Ok(watcher::Event::Init) => s.pods.clear(),
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = ready_tx.take() {
                        let _ = tx.send(());
                    }
                }
                Err(_) => continue,
            }
            s.record();
        }
    });
    let _ = tokio::time::timeout(WAIT, ready_rx).await;
    seen
}

fn complete(replicas: i32) -> impl Condition<Deployment> {
    move |d: Option<&Deployment>| {
        d.is_some_and(|d| {
            let s = d.status.clone().unwrap_or_default();
            s.observed_generation >= d.metadata.generation
                && s.updated_replicas == Some(replicas)
                && s.replicas == Some(replicas)
                && s.available_replicas == Some(replicas)
                && s.ready_replicas == Some(replicas)
        })
    }
}

fn owned_rs(rss: &[ReplicaSet], d: &Deployment) -> Vec<ReplicaSet> {
    rss.iter()
        .filter(|rs| {
            rs.owner_references().iter().any(|o| Some(&o.uid) == d.metadata.uid.as_ref() && o.controller == Some(true))
        })
        .cloned()
        .collect()
}

fn revision(rs: &ReplicaSet) -> String {
    rs.annotations().get("deployment.kubernetes.io/revision").cloned().unwrap_or_default()
}

#[tokio::test]
async fn kubectl_create_rollout_status_and_scale() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    kubectl(&env, &["create", "deployment", "web", "--image=nginx", "--replicas=3"]).await?;
    kubectl(&env, &["rollout", "status", "deployment/web", "--timeout=60s"]).await?;
    let out = kubectl(&env, &["get", "pods", "-o", "wide", "--no-headers"]).await?;
    let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 3, "{out}");
    for l in &lines {
        let cols: Vec<&str> = l.split_whitespace().collect();
        assert!(cols[0].starts_with("web-"), "{l}");
        assert_eq!(cols[1], "1/1", "{l}");
        assert_eq!(cols[2], "Running", "{l}");
        assert_ne!(cols[6], "<none>", "no node: {l}");
    }
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    let d = deployments.get("web").await?;
    let s = d.status.clone().unwrap_or_default();
    let conds: BTreeMap<String, (String, String)> = s
        .conditions
        .iter()
        .flatten()
        .map(|c| (c.type_.clone(), (c.status.clone(), c.reason.clone().unwrap_or_default())))
        .collect();
    assert_eq!(conds["Available"], ("True".into(), "MinimumReplicasAvailable".into()));
    assert_eq!(conds["Progressing"], ("True".into(), "NewReplicaSetAvailable".into()));
    assert_eq!(d.annotations().get("deployment.kubernetes.io/revision").map(String::as_str), Some("1"));
    // kube writes the counts `omitempty`: with every replica available there is no
    // `unavailableReplicas: 0`.
    let raw: serde_json::Value =
        serde_json::from_str(&kubectl(&env, &["get", "deployment", "web", "-o", "json"]).await?).expect("JSON");
    assert!(raw["status"].get("unavailableReplicas").is_none(), "{}", raw["status"]);
    assert_eq!(raw["status"]["availableReplicas"], 3, "{}", raw["status"]);
    let rss: Api<ReplicaSet> = Api::default_namespaced(env.client());
    let list = owned_rs(&rss.list(&ListParams::default()).await?.items, &d);
    assert_eq!(list.len(), 1);
    let rs = &list[0];
    let hash = rs.labels().get("pod-template-hash").cloned().unwrap_or_default();
    assert_eq!(rs.name_any(), format!("web-{hash}"));
    assert_eq!(revision(rs), "1");
    assert_eq!(rs.annotations().get("deployment.kubernetes.io/desired-replicas").map(String::as_str), Some("3"));
    assert_eq!(rs.annotations().get("deployment.kubernetes.io/max-replicas").map(String::as_str), Some("4"));
    let events = kubectl(
        &env,
        &["get", "events", "--field-selector", "reason=ScalingReplicaSet", "-o", "custom-columns=MSG:.message"],
    )
    .await?;
    assert!(events.contains(&format!("Scaled up replica set web-{hash} to 3")), "{events}");

    kubectl(&env, &["scale", "deployment", "web", "--replicas=10"]).await?;
    wait(&deployments, "web", complete(10)).await?;
    kubectl(&env, &["rollout", "status", "deployment/web", "--timeout=60s"]).await?;
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    let list = pods.list(&ListParams::default().labels("app=web")).await?.items;
    assert_eq!(list.iter().filter(|p| is_ready(p) && p.metadata.deletion_timestamp.is_none()).count(), 10);
    Ok(())
}

#[tokio::test]
async fn rolling_update_keeps_availability_and_undo_reuses_old_replicaset() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    let rss: Api<ReplicaSet> = Api::default_namespaced(env.client());
    kubectl(&env, &["create", "deployment", "web", "--image=nginx", "--replicas=4"]).await?;
    kubectl(&env, &["rollout", "status", "deployment/web", "--timeout=60s"]).await?;
    let d1 = deployments.get("web").await?;
    let first = owned_rs(&rss.list(&ListParams::default()).await?.items, &d1);
    assert_eq!(first.len(), 1);
    let first_name = first[0].name_any();

    let seen = track(Api::default_namespaced(env.client()), "app=web").await;
    seen.lock().armed = true;
    kubectl(&env, &["set", "image", "deployment/web", "nginx=nginx:1.27"]).await?;
    kubectl(&env, &["rollout", "status", "deployment/web", "--timeout=60s"]).await?;
    let d2 = wait(&deployments, "web", complete(4)).await?;
    let all = owned_rs(&rss.list(&ListParams::default()).await?.items, &d2);
    assert_eq!(all.len(), 2);
    let new = all.iter().find(|rs| rs.name_any() != first_name).ok_or("no new ReplicaSet")?;
    let old = all.iter().find(|rs| rs.name_any() == first_name).ok_or("old ReplicaSet gone")?;
    assert_eq!(new.spec.as_ref().and_then(|s| s.replicas), Some(4));
    assert_eq!(old.spec.as_ref().and_then(|s| s.replicas), Some(0));
    assert_eq!(revision(new), "2");
    {
        let s = seen.lock();
        // 4 replicas, maxUnavailable 25% (rounded down: 1), maxSurge 25% (rounded up: 1).
        let min = s.min_available.ok_or("watch saw nothing")?;
        assert!(min >= 3, "available pods dropped to {min}");
        assert!(s.max_active <= 5, "more than replicas + maxSurge pods: {}", s.max_active);
    }

    let history = kubectl(&env, &["rollout", "history", "deployment/web"]).await?;
    let revisions: Vec<&str> =
        history.lines().filter_map(|l| l.split_whitespace().next()).filter(|w| w.parse::<u32>().is_ok()).collect();
    assert_eq!(revisions, ["1", "2"], "{history}");

    kubectl(&env, &["rollout", "undo", "deployment/web"]).await?;
    kubectl(&env, &["rollout", "status", "deployment/web", "--timeout=60s"]).await?;
    let d3 = wait(&deployments, "web", complete(4)).await?;
    let image = d3.spec.as_ref().and_then(|s| s.template.spec.as_ref()).map(|s| s.containers[0].image.clone());
    assert_eq!(image, Some(Some("nginx".to_string())));
    let all = owned_rs(&rss.list(&ListParams::default()).await?.items, &d3);
    if all.len() != 2 {
        for rs in &all {
            eprintln!(
                "RS {} {} {:?}",
                rs.name_any(),
                serde_json::to_string(&rs.spec.as_ref().map(|s| &s.template))?,
                rs.metadata.annotations
            );
        }
        eprintln!("D {}", serde_json::to_string(&d3.metadata)?);
    }
    assert_eq!(all.len(), 2, "undo must reuse the old ReplicaSet");
    let back = all.iter().find(|rs| rs.name_any() == first_name).ok_or("old ReplicaSet gone")?;
    assert_eq!(back.spec.as_ref().and_then(|s| s.replicas), Some(4));
    assert_eq!(revision(back), "3");
    assert_eq!(d3.annotations().get("deployment.kubernetes.io/revision").map(String::as_str), Some("3"));
    let history = kubectl(&env, &["rollout", "history", "deployment/web"]).await?;
    let revisions: Vec<&str> =
        history.lines().filter_map(|l| l.split_whitespace().next()).filter(|w| w.parse::<u32>().is_ok()).collect();
    assert_eq!(revisions, ["2", "3"], "{history}");
    Ok(())
}

fn deployment(name: &str, replicas: i32, strategy: serde_json::Value) -> Result<Deployment, Error> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "strategy": strategy,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx"}]}
            }
        }
    }))?)
}

#[tokio::test]
async fn recreate_strategy_stops_old_pods_first() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    deployments.create(&PostParams::default(), &deployment("db", 3, json!({"type": "Recreate"}))?).await?;
    wait(&deployments, "db", complete(3)).await?;
    let seen = track(Api::default_namespaced(env.client()), "app=db").await;
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}}}});
    deployments.patch("db", &PatchParams::default(), &Patch::Strategic(&patch)).await?;
    let d = wait(&deployments, "db", complete(3)).await?;
    let (max_hashes, names) = {
        let s = seen.lock();
        (s.max_hashes, s.names.len())
    };
    assert_eq!(max_hashes, 1, "old and new pods existed at the same time");
    assert_eq!(names, 6);
    let rss: Api<ReplicaSet> = Api::default_namespaced(env.client());
    let all = owned_rs(&rss.list(&ListParams::default()).await?.items, &d);
    let sizes: BTreeSet<i32> = all.iter().filter_map(|rs| rs.spec.as_ref().and_then(|s| s.replicas)).collect();
    assert_eq!(sizes, [0, 3].into());
    Ok(())
}

fn replicaset(name: &str, replicas: i32) -> Result<ReplicaSet, Error> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "tier": "x"}},
                "spec": {"containers": [{"name": "main", "image": "nginx"}]}
            }
        }
    }))?)
}

fn controlled_by(p: &Pod, rs: &ReplicaSet) -> bool {
    p.owner_references().iter().any(|o| o.controller == Some(true) && Some(&o.uid) == rs.metadata.uid.as_ref())
}

#[tokio::test]
async fn replicaset_creates_exactly_its_replicas() -> Result<(), Error> {
    // Without a kubelet pods stay Pending: this is about counting only.
    let env = TestEnv::builder().disable_controller("kubelet").start().await?;
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    let seen = track(pods.clone(), "app=many").await;
    let rss: Api<ReplicaSet> = Api::default_namespaced(env.client());
    let rs = rss.create(&PostParams::default(), &replicaset("many", 10)?).await?;
    wait(&rss, "many", |r: Option<&ReplicaSet>| r.is_some_and(|r| r.status.as_ref().is_some_and(|s| s.replicas == 10)))
        .await?;
    // Resize a few times to churn the cache, then settle.
    rss.patch("many", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"replicas": 4}}))).await?;
    rss.patch("many", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"replicas": 10}}))).await?;
    wait(&rss, "many", |r: Option<&ReplicaSet>| {
        r.is_some_and(|r| {
            r.status.as_ref().is_some_and(|s| s.replicas == 10 && s.observed_generation == r.metadata.generation)
        })
    })
    .await?;
    until_active(&seen, 10).await?;
    let list = pods.list(&ListParams::default().labels("app=many")).await?.items;
    let active: Vec<&Pod> = list.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
    assert_eq!(active.len(), 10);
    for p in &active {
        assert!(controlled_by(p, &rs));
        assert!(p.name_any().starts_with("many-"));
        assert_eq!(p.labels().get("tier").map(String::as_str), Some("x"));
        let owner = p.owner_references().first().cloned().unwrap_or_default();
        assert_eq!(owner.block_owner_deletion, Some(true));
    }
    let (max_active, names) = {
        let s = seen.lock();
        (s.max_active, s.names.len())
    };
    assert!(max_active <= 10, "saw {max_active} active pods at once");
    // 10 created, 6 deleted by the scale-down to 4, 6 created by the scale-up to 10.
    assert!(names <= 16, "{names} pods were created");
    let status = rss.get("many").await?.status.unwrap_or_default();
    assert_eq!(status.fully_labeled_replicas, Some(10));
    assert_eq!(status.ready_replicas, None, "a zero count is omitted, as kube's omitempty does");
    let events = kubectl(&env, &["get", "events", "--field-selector", "reason=SuccessfulCreate", "-o", "name"]).await?;
    assert!(!events.trim().is_empty());
    Ok(())
}

#[tokio::test]
async fn replicaset_adopts_orphans_and_releases_mismatches() -> Result<(), Error> {
    let env = TestEnv::builder().disable_controller("kubelet").start().await?;
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    let orphan: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "orphan", "labels": {"app": "adopt"}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]}
    }))?;
    pods.create(&PostParams::default(), &orphan).await?;
    let rss: Api<ReplicaSet> = Api::default_namespaced(env.client());
    let rs = rss.create(&PostParams::default(), &replicaset("adopt", 2)?).await?;
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let adopted = wait(&pods, "orphan", |p: Option<&Pod>| {
        p.is_some_and(|p| p.owner_references().iter().any(|o| o.uid == uid && o.controller == Some(true)))
    })
    .await?;
    assert_eq!(adopted.owner_references()[0].kind, "ReplicaSet");
    wait(&rss, "adopt", |r: Option<&ReplicaSet>| r.is_some_and(|r| r.status.as_ref().is_some_and(|s| s.replicas == 2)))
        .await?;
    let list = pods.list(&ListParams::default().labels("app=adopt")).await?.items;
    assert_eq!(list.len(), 2, "one adopted pod and one created");
    // Relabel the adopted pod: it is released and replaced.
    pods.patch("orphan", &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"labels": {"app": "other"}}})))
        .await?;
    wait(&pods, "orphan", |p: Option<&Pod>| p.is_some_and(|p| p.owner_references().is_empty())).await?;
    wait(&rss, "adopt", |r: Option<&ReplicaSet>| {
        r.is_some_and(|r| r.status.as_ref().is_some_and(|s| s.replicas == 2 && s.fully_labeled_replicas == Some(2)))
    })
    .await?;
    let list = pods.list(&ListParams::default().labels("app=adopt")).await?.items;
    assert_eq!(list.iter().filter(|p| controlled_by(p, &rs)).count(), 2);
    // Scale down: two pods go, none are created.
    rss.patch("adopt", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"replicas": 0}}))).await?;
    wait(&rss, "adopt", |r: Option<&ReplicaSet>| r.is_some_and(|r| r.status.as_ref().is_some_and(|s| s.replicas == 0)))
        .await?;
    Ok(())
}

fn set_image(image: &str) -> serde_json::Value {
    json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}}})
}

#[tokio::test]
async fn paused_deployments_scale_but_do_not_roll_out_and_history_is_limited() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    let rss: Api<ReplicaSet> = Api::default_namespaced(env.client());
    let mut d =
        deployment("app", 2, json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}))?;
    if let Some(spec) = d.spec.as_mut() {
        spec.revision_history_limit = Some(1);
    }
    deployments.create(&PostParams::default(), &d).await?;
    let d = wait(&deployments, "app", complete(2)).await?;
    let first = owned_rs(&rss.list(&ListParams::default()).await?.items, &d);
    let first = first.first().ok_or("no ReplicaSet")?.clone();

    kubectl(&env, &["rollout", "pause", "deployment/app"]).await?;
    deployments.patch("app", &PatchParams::default(), &Patch::Strategic(&set_image("nginx:1"))).await?;
    kubectl(&env, &["scale", "deployment/app", "--replicas=3"]).await?;
    let paused = wait(&deployments, "app", |d: Option<&Deployment>| {
        d.is_some_and(|d| {
            let s = d.status.clone().unwrap_or_default();
            s.observed_generation >= d.metadata.generation && s.available_replicas == Some(3)
        })
    })
    .await?;
    let s = paused.status.clone().unwrap_or_default();
    let progressing = s.conditions.iter().flatten().find(|c| c.type_ == "Progressing").cloned().unwrap_or_default();
    assert_eq!(progressing.reason.as_deref(), Some("DeploymentPaused"));
    assert_eq!(progressing.status, "Unknown");
    assert_eq!(s.updated_replicas, None, "a paused Deployment must not roll out (a zero count is omitted)");
    assert_eq!(owned_rs(&rss.list(&ListParams::default()).await?.items, &paused).len(), 1);

    kubectl(&env, &["rollout", "resume", "deployment/app"]).await?;
    kubectl(&env, &["rollout", "status", "deployment/app", "--timeout=60s"]).await?;
    deployments.patch("app", &PatchParams::default(), &Patch::Strategic(&set_image("nginx:2"))).await?;
    kubectl(&env, &["rollout", "status", "deployment/app", "--timeout=60s"]).await?;
    // revisionHistoryLimit 1: the first ReplicaSet is deleted, one old one is kept.
    let uid = first.metadata.uid.clone().unwrap_or_default();
    tokio::time::timeout(
        WAIT,
        await_condition(rss.clone(), &first.name_any(), kube::runtime::wait::conditions::is_deleted(&uid)),
    )
    .await
    .map_err(|_| "first ReplicaSet not cleaned up")??;
    let d = wait(&deployments, "app", complete(3)).await?;
    let left = owned_rs(&rss.list(&ListParams::default()).await?.items, &d);
    let revisions: BTreeSet<String> = left.iter().map(revision).collect();
    assert_eq!(revisions, ["2".to_string(), "3".to_string()].into());
    Ok(())
}
