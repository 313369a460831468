//! The workload controllers against a real opkit API server with simulated nodes and
//! kubelets, driven with kube-rs and kubectl: StatefulSet ordered creation and claims, Job
//! completion and backoff failure, one DaemonSet pod per node, Service endpoints and
//! EndpointSlices, and a CronJob running a missed schedule.

use crate::common;

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Endpoints, Node, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use opkit_testenv::TestEnv;
use serde_json::json;

use common::{Error, WAIT, kubectl, wait};

async fn kubectl_apply(env: &TestEnv, yaml: &str) -> Result<String, Error> {
    let dir = std::env::temp_dir().join(format!("opkit-workloads-{}", std::process::id()));
    tokio::fs::create_dir_all(&dir).await?;
    let file = dir.join(format!("{:x}.yaml", rand_suffix(yaml)));
    tokio::fs::write(&file, yaml).await?;
    let path = file.to_string_lossy().to_string();
    kubectl(env, &["apply", "-f", &path]).await
}

fn rand_suffix(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn job_condition(j: &Job, t: &str) -> Option<(String, String)> {
    j.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t && c.status == "True")
        .map(|c| (c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()))
}

#[tokio::test]
async fn statefulset_creates_pods_in_order_with_claims() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // Watch pods from before the set exists: each web-N must appear only after web-(N-1)
    // is Ready.
    let mut events = watcher(pods.clone(), watcher::Config::default().labels("app=nginx")).boxed();
    let order = tokio::spawn(async move {
        let mut ready: BTreeMap<String, bool> = BTreeMap::new();
        let mut created: Vec<String> = Vec::new();
        while let Some(ev) = events.next().await {
            let objs = match ev {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => vec![p],
                Ok(_) => continue,
                Err(e) => return Err(format!("watch failed: {e}")),
            };
            for p in objs {
                let name = p.name_any();
                if !ready.contains_key(&name) {
                    let ordinal: usize =
                        name.trim_start_matches("web-").parse().map_err(|_| format!("odd pod {name}"))?;
                    if ordinal > 0 && ready.get(&format!("web-{}", ordinal - 1)) != Some(&true) {
                        return Err(format!("{name} was created before web-{} was ready", ordinal - 1));
                    }
                    created.push(name.clone());
                }
                ready.insert(name, pod_ready(&p));
            }
            if ready.len() == 3 && ready.values().all(|r| *r) {
                return Ok(created);
            }
        }
        Err("watch ended".to_string())
    });
    kubectl_apply(
        &env,
        r#"
apiVersion: v1
kind: Service
metadata: {name: nginx, labels: {app: nginx}}
spec:
  clusterIP: None
  selector: {app: nginx}
  ports: [{name: web, port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: nginx
  replicas: 3
  updateStrategy: {type: RollingUpdate}
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec:
      containers: [{name: nginx, image: registry.k8s.io/nginx-slim:0.8, ports: [{containerPort: 80, name: web}]}]
  volumeClaimTemplates:
  - metadata: {name: www}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"#,
    )
    .await?;
    let created = tokio::time::timeout(WAIT, order).await.map_err(|_| "timed out waiting for web-0..2")???;
    assert_eq!(created, vec!["web-0", "web-1", "web-2"]);

    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let sts = wait(&sts_api, "web", |s: Option<&StatefulSet>| {
        s.and_then(|s| s.status.as_ref())
            .is_some_and(|st| st.ready_replicas == Some(3) && st.current_replicas == Some(3))
    })
    .await?;
    let st = sts.status.clone().unwrap_or_default();
    assert_eq!(st.replicas, 3);
    assert_eq!(st.updated_replicas, Some(3));
    assert_eq!(st.available_replicas, Some(3));
    assert_eq!(st.observed_generation, sts.metadata.generation);
    assert!(st.current_revision.is_some() && st.current_revision == st.update_revision);
    let web1 = pods.get("web-1").await?;
    let labels = web1.labels();
    assert_eq!(labels.get("statefulset.kubernetes.io/pod-name").map(String::as_str), Some("web-1"));
    assert_eq!(labels.get("apps.kubernetes.io/pod-index").map(String::as_str), Some("1"));
    assert_eq!(labels.get("controller-revision-hash"), st.update_revision.as_ref());
    let spec = web1.spec.clone().unwrap_or_default();
    assert_eq!((spec.hostname.as_deref(), spec.subdomain.as_deref()), (Some("web-1"), Some("nginx")));
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    for i in 0..3 {
        let pvc = pvcs.get(&format!("www-web-{i}")).await?;
        // Bound for real: to a provisioned local-path volume, not just marked.
        let volume = pvc.spec.as_ref().and_then(|s| s.volume_name.clone());
        assert_eq!(volume, pvc.metadata.uid.as_ref().map(|u| format!("pvc-{u}")), "{pvc:?}");
        assert_eq!(pvc.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
    }
    kubectl(&env, &["rollout", "status", "statefulset/web", "--timeout=60s"]).await?;

    // A template change rolls pods from the highest ordinal down.
    kubectl(&env, &["set", "image", "statefulset/web", "nginx=registry.k8s.io/nginx-slim:0.9"]).await?;
    let out = kubectl(&env, &["rollout", "status", "statefulset/web", "--timeout=60s"]).await?;
    assert!(out.contains("complete") || out.contains("rolling update complete"), "{out}");
    let image =
        pods.get("web-0").await?.spec.map(|s| s.containers[0].image.clone().unwrap_or_default()).unwrap_or_default();
    assert!(image.ends_with("0.9"), "{image}");

    // Scaling down removes the highest ordinals; claims stay.
    kubectl(&env, &["scale", "statefulset/web", "--replicas=1"]).await?;
    wait(&sts_api, "web", |s: Option<&StatefulSet>| {
        s.and_then(|s| s.status.as_ref()).is_some_and(|st| st.replicas == 1)
    })
    .await?;
    let names: Vec<String> =
        pods.list(&ListParams::default().labels("app=nginx")).await?.items.iter().map(|p| p.name_any()).collect();
    assert!(names.contains(&"web-0".to_string()) && !names.contains(&"web-2".to_string()), "{names:?}");
    assert!(pvcs.get_opt("www-web-2").await?.is_some());
    Ok(())
}

#[tokio::test]
async fn job_with_completions_completes() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    kubectl_apply(
        &env,
        r#"
apiVersion: batch/v1
kind: Job
metadata: {name: pi}
spec:
  completions: 3
  parallelism: 2
  template:
    metadata: {annotations: {opkit.dev/run-duration: 200ms}}
    spec:
      restartPolicy: Never
      containers: [{name: pi, image: perl, command: [perl, -e, print 1]}]
"#,
    )
    .await?;
    kubectl(&env, &["wait", "--for=condition=complete", "job/pi", "--timeout=60s"]).await?;
    let jobs: Api<Job> = Api::namespaced(env.client(), "default");
    let job = jobs.get("pi").await?;
    let st = job.status.clone().unwrap_or_default();
    assert_eq!(st.succeeded, Some(3));
    assert!(st.start_time.is_some() && st.completion_time.is_some());
    assert_eq!(st.active, None);
    assert_eq!(job_condition(&job, "SuccessCriteriaMet").map(|c| c.0).as_deref(), Some("CompletionsReached"));
    assert_eq!(job_condition(&job, "Complete").map(|c| c.0).as_deref(), Some("CompletionsReached"));
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let list = pods.list(&ListParams::default().labels("batch.kubernetes.io/job-name=pi")).await?;
    assert_eq!(list.items.len(), 3);
    for p in &list.items {
        assert_eq!(p.labels().get("batch.kubernetes.io/controller-uid"), job.metadata.uid.as_ref());
        assert!(p.finalizers().is_empty(), "tracking finalizer left on {}", p.name_any());
        assert_eq!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded"));
    }
    Ok(())
}

#[tokio::test]
async fn failing_job_hits_backoff_limit() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let jobs: Api<Job> = Api::namespaced(env.client(), "default");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "broken"},
        "spec": {
            "backoffLimit": 1,
            "template": {
                "metadata": {"annotations": {"opkit.dev/exit-code": "1", "opkit.dev/run-duration": "100ms"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
            }
        }
    }))?;
    jobs.create(&PostParams::default(), &job).await?;
    let job = wait(&jobs, "broken", |j: Option<&Job>| j.is_some_and(|j| job_condition(j, "Failed").is_some())).await?;
    let (reason, message) = job_condition(&job, "Failed").unwrap_or_default();
    assert_eq!(reason, "BackoffLimitExceeded");
    assert_eq!(message, "Job has reached the specified backoff limit");
    assert_eq!(job.status.as_ref().and_then(|s| s.failed), Some(2));
    assert!(job_condition(&job, "Complete").is_none());
    let out = kubectl(&env, &["wait", "--for=condition=failed", "job/broken", "--timeout=10s"]).await?;
    assert!(out.contains("condition met"), "{out}");
    Ok(())
}

#[tokio::test]
async fn daemonset_runs_one_pod_per_node() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let node_count = opkit_controllers::ControllersConfig::default().nodes;
    tokio::time::timeout(WAIT, async {
        while nodes.list(&ListParams::default()).await.map(|l| l.items.len()).unwrap_or(0) < node_count {
            tokio::task::yield_now().await;
        }
    })
    .await?;
    kubectl_apply(
        &env,
        r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  updateStrategy: {type: RollingUpdate}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: busybox}]
"#,
    )
    .await?;
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let want = i32::try_from(node_count)?;
    let ds = wait(&api, "agent", move |d: Option<&DaemonSet>| {
        d.and_then(|d| d.status.as_ref()).is_some_and(|s| s.number_ready == want && s.desired_number_scheduled == want)
    })
    .await?;
    let st = ds.status.clone().unwrap_or_default();
    assert_eq!(st.current_number_scheduled, want);
    assert_eq!(st.updated_number_scheduled, Some(want));
    assert_eq!(st.number_available, Some(want));
    assert_eq!(st.number_misscheduled, 0);
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let list = pods.list(&ListParams::default().labels("app=agent")).await?;
    let mut on: Vec<String> =
        list.items.iter().filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone())).collect();
    on.sort();
    on.dedup();
    assert_eq!((list.items.len(), on.len()), (node_count, node_count));
    kubectl(&env, &["rollout", "status", "daemonset/agent", "--timeout=30s"]).await?;
    Ok(())
}

#[tokio::test]
async fn service_gets_endpoints_for_ready_pods() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, annotations) in
        [("ready", json!({})), ("lazy", json!({"opkit.dev/never-ready": "true"})), ("other", json!({}))]
    {
        let app = if name == "other" { "db" } else { "web" };
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": app}, "annotations": annotations},
            "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"name": "http", "containerPort": 8080}]}]}
        }))?;
        pods.create(&PostParams::default(), &pod).await?;
    }
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
    }))?;
    Api::<Service>::namespaced(client.clone(), "default").create(&PostParams::default(), &svc).await?;
    let ready_ip = wait(&pods, "ready", |p: Option<&Pod>| p.is_some_and(pod_ready))
        .await?
        .status
        .and_then(|s| s.pod_ip)
        .unwrap_or_default();
    let lazy_ip =
        wait(&pods, "lazy", |p: Option<&Pod>| p.and_then(|p| p.status.as_ref()).is_some_and(|s| s.pod_ip.is_some()))
            .await?
            .status
            .and_then(|s| s.pod_ip)
            .unwrap_or_default();
    let eps: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    let (r, l) = (ready_ip.clone(), lazy_ip.clone());
    let ep = wait(&eps, "web", move |e: Option<&Endpoints>| {
        e.and_then(|e| e.subsets.as_ref()).is_some_and(|ss| {
            ss.iter().any(|s| {
                s.addresses.iter().flatten().any(|a| a.ip == r)
                    && s.not_ready_addresses.iter().flatten().any(|a| a.ip == l)
            })
        })
    })
    .await?;
    let subset = ep.subsets.clone().unwrap_or_default().remove(0);
    assert_eq!(subset.addresses.as_ref().map(Vec::len), Some(1));
    let addr = subset.addresses.clone().unwrap_or_default().remove(0);
    assert_eq!(addr.target_ref.as_ref().and_then(|t| t.name.as_deref()), Some("ready"));
    assert!(addr.node_name.is_some());
    assert_eq!(subset.ports.unwrap_or_default()[0].port, 8080);

    let slices: Api<EndpointSlice> = Api::namespaced(client, "default");
    let lp = ListParams::default().labels("kubernetes.io/service-name=web");
    let slice = tokio::time::timeout(WAIT, async {
        loop {
            if let Ok(l) = slices.list(&lp).await
                && let Some(s) = l.items.into_iter().find(|s| s.endpoints.len() == 2)
            {
                return s;
            }
            tokio::task::yield_now().await;
        }
    })
    .await?;
    assert_eq!(
        slice.labels().get("endpointslice.kubernetes.io/managed-by").map(String::as_str),
        Some("endpointslice-controller.k8s.io")
    );
    assert_eq!(slice.address_type, "IPv4");
    assert_eq!(slice.ports.as_ref().and_then(|p| p[0].port), Some(8080));
    let ready_of = |ip: &str| {
        slice.endpoints.iter().find(|e| e.addresses[0] == ip).and_then(|e| e.conditions.as_ref()).and_then(|c| c.ready)
    };
    assert_eq!((ready_of(&ready_ip), ready_of(&lazy_ip)), (Some(true), Some(false)));
    assert!(
        slice.metadata.owner_references.iter().flatten().any(|o| o.kind == "Service" && o.controller == Some(true))
    );
    let out = kubectl(&env, &["get", "endpoints", "web", "-o", "jsonpath={.subsets[0].addresses[0].ip}"]).await?;
    assert_eq!(out, ready_ip);
    Ok(())
}

#[tokio::test]
async fn cronjob_runs_missed_schedule() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let cjs: Api<CronJob> = Api::namespaced(client.clone(), "default");
    let cj: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "tick"},
        "spec": {
            "schedule": "* * * * *",
            "suspend": true,
            "startingDeadlineSeconds": 300,
            "jobTemplate": {"spec": {"template": {
                "metadata": {"annotations": {"opkit.dev/run-duration": "100ms"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
            }}}
        }
    }))?;
    cjs.create(&PostParams::default(), &cj).await?;
    // Pretend the last run was ten minutes ago, then resume: the most recent missed
    // schedule runs at once.
    let past = jiff::Timestamp::now() - jiff::SignedDuration::from_mins(10);
    let past = jiff::Timestamp::from_second(past.as_second() - past.as_second().rem_euclid(60))?;
    let status = json!({"status": {"lastScheduleTime": past.to_string()}});
    cjs.patch_status("tick", &PatchParams::default(), &Patch::Merge(&status)).await?;
    cjs.patch("tick", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"suspend": false}}))).await?;
    let cj = wait(&cjs, "tick", move |c: Option<&CronJob>| {
        c.and_then(|c| c.status.as_ref()).and_then(|s| s.last_schedule_time.as_ref()).is_some_and(|t| t.0 > past)
    })
    .await?;
    let scheduled = cj.status.as_ref().and_then(|s| s.last_schedule_time.clone()).map(|t| t.0).unwrap_or(past);
    let name = format!("tick-{}", scheduled.as_second() / 60);
    assert!(jiff::Timestamp::now().as_second() - scheduled.as_second() < 120);
    let jobs: Api<Job> = Api::namespaced(client, "default");
    let job = wait(&jobs, &name, |j: Option<&Job>| j.is_some_and(|j| job_condition(j, "Complete").is_some())).await?;
    assert!(job.owner_references().iter().any(|o| o.kind == "CronJob" && o.name == "tick"));
    assert!(job.annotations().contains_key("batch.kubernetes.io/cronjob-scheduled-timestamp"));
    wait(&cjs, "tick", |c: Option<&CronJob>| {
        c.and_then(|c| c.status.as_ref()).is_some_and(|s| s.last_successful_time.is_some() && s.active.is_none())
    })
    .await?;
    Ok(())
}
