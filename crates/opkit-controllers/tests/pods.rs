//! Simulated nodes, the scheduler and simulated kubelets against a real opkit API server,
//! driven with kube-rs and kubectl: node registration and heartbeats, placement
//! (nodeSelector, taints and tolerations, resources), unschedulable pods, pod start and
//! readiness, failure injection (never ready, crash loops, exit codes), run-to-completion
//! pods and graceful deletion.

use crate::common;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use opkit_controllers::ControllersConfig;
use opkit_testenv::TestEnv;
use serde_json::json;

use common::{Error, WAIT, kubectl, wait};

fn condition(p: &Pod, type_: &str) -> Option<String> {
    p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_).map(|c| c.status.clone())
}

fn phase(p: &Pod) -> String {
    p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
}

fn is_ready(p: Option<&Pod>) -> bool {
    p.is_some_and(|p| condition(p, "Ready").as_deref() == Some("True"))
}

fn pod(name: &str, extra: serde_json::Value) -> Result<Pod, Error> {
    let mut v = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}
    });
    merge(&mut v, extra);
    Ok(serde_json::from_value(v)?)
}

fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
    match (a, b) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn node_of(p: &Pod) -> String {
    p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default()
}

#[tokio::test]
async fn nodes_register_ready_with_leases() -> Result<(), Error> {
    let env = TestEnv::builder().controllers(ControllersConfig::default()).start().await?;
    let nodes: Api<Node> = Api::all(env.client());
    let leases: Api<Lease> = Api::namespaced(env.client(), "kube-node-lease");
    for i in 0..3 {
        let name = format!("opkit-worker-{i}");
        let node = wait(&nodes, &name, |n: Option<&Node>| {
            n.and_then(|n| {
                n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready").map(|c| c.status == "True")
            })
            .unwrap_or(false)
        })
        .await?;
        let status = node.status.clone().unwrap_or_default();
        assert_eq!(status.capacity.as_ref().and_then(|c| c.get("cpu")).map(|q| q.0.as_str()), Some("8"));
        assert_eq!(status.allocatable.as_ref().and_then(|c| c.get("memory")).map(|q| q.0.as_str()), Some("32Gi"));
        assert_eq!(status.node_info.as_ref().map(|i| i.kubelet_version.as_str()), Some("v1.33.0"));
        let addr = status.addresses.unwrap_or_default();
        assert!(addr.iter().any(|a| a.type_ == "InternalIP" && a.address.starts_with("10.0.0.")));
        assert_eq!(node.labels().get("kubernetes.io/hostname"), Some(&name));
        assert_eq!(node.labels().get("kubernetes.io/os").map(String::as_str), Some("linux"));
        let lease = wait(&leases, &name, |l: Option<&Lease>| l.is_some()).await?;
        let spec = lease.spec.unwrap_or_default();
        assert_eq!(spec.holder_identity.as_deref(), Some(name.as_str()));
        assert!(spec.renew_time.is_some());
        assert_eq!(lease.metadata.owner_references.unwrap_or_default().first().map(|o| o.kind.as_str()), Some("Node"));
    }
    let out = kubectl(&env, &["get", "nodes"]).await?;
    assert_eq!(out.lines().filter(|l| l.contains(" Ready ")).count(), 3, "{out}");
    assert!(out.contains("v1.33.0"), "{out}");
    Ok(())
}

#[tokio::test]
async fn leases_are_renewed() -> Result<(), Error> {
    let cfg = ControllersConfig { node_heartbeat: Duration::from_millis(300), ..Default::default() };
    let env = TestEnv::builder().controllers(cfg).start().await?;
    let leases: Api<Lease> = Api::namespaced(env.client(), "kube-node-lease");
    let first = wait(&leases, "opkit-worker-0", |l: Option<&Lease>| l.is_some()).await?;
    let t0 = first.spec.and_then(|s| s.renew_time).ok_or("no renewTime")?;
    wait(&leases, "opkit-worker-0", move |l: Option<&Lease>| {
        l.and_then(|l| l.spec.as_ref()?.renew_time.clone()).is_some_and(|t| t.0 > t0.0)
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn pod_is_scheduled_started_and_ready() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let p = pod("web", json!({"spec": {"initContainers": [{"name": "init", "image": "busybox"}]}}))?;
    pods.create(&PostParams::default(), &p).await?;
    let got = wait(&pods, "web", |p: Option<&Pod>| is_ready(p)).await?;
    let st = got.status.clone().unwrap_or_default();
    assert_eq!(st.phase.as_deref(), Some("Running"));
    assert!(node_of(&got).starts_with("opkit-worker-"));
    let ip = st.pod_ip.clone().unwrap_or_default();
    assert!(ip.starts_with("10.244."), "{ip}");
    assert_eq!(st.pod_ips.unwrap_or_default().first().map(|i| i.ip.clone()), Some(ip.clone()));
    assert!(st.host_ip.unwrap_or_default().starts_with("10.0.0."));
    assert!(st.start_time.is_some());
    assert_eq!(st.qos_class.as_deref(), Some("BestEffort"));
    let cs = st.container_statuses.unwrap_or_default();
    assert_eq!(cs.len(), 1);
    assert!(cs[0].ready && cs[0].started == Some(true) && cs[0].restart_count == 0);
    assert!(cs[0].state.as_ref().and_then(|s| s.running.as_ref()).is_some());
    assert!(cs[0].container_id.as_deref().unwrap_or_default().starts_with("containerd://"));
    assert!(!cs[0].image_id.is_empty());
    let init = st.init_container_statuses.unwrap_or_default();
    assert_eq!(init[0].state.as_ref().and_then(|s| s.terminated.as_ref()).map(|t| t.exit_code), Some(0));
    for c in ["PodScheduled", "Initialized", "ContainersReady", "Ready", "PodReadyToStartContainers"] {
        assert_eq!(condition(&got, c).as_deref(), Some("True"), "{c}");
    }
    // kubelet and scheduler events.
    let events: Api<Event> = Api::namespaced(env.client(), "default");
    let want = ["Scheduled", "Pulled", "Created", "Started"];
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let evs = events.list(&ListParams::default()).await?;
        let reasons: Vec<String> = evs
            .items
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web"))
            .filter_map(|e| e.reason.clone())
            .collect();
        if want.iter().all(|w| reasons.iter().any(|r| r == w)) {
            let scheduled =
                evs.items.iter().find(|e| e.reason.as_deref() == Some("Scheduled")).ok_or("no Scheduled")?;
            assert_eq!(scheduled.reporting_controller.as_deref(), Some("default-scheduler"));
            let note = scheduled.note.clone().unwrap_or_default();
            assert_eq!(note, format!("Successfully assigned default/web to {}", node_of(&got)));
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("missing events, have {reasons:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // kubectl shows node and IP.
    let out = kubectl(&env, &["get", "pods", "-o", "wide"]).await?;
    let line = out.lines().find(|l| l.starts_with("web ")).ok_or("no row")?;
    assert!(line.contains("Running") && line.contains("1/1"), "{out}");
    assert!(line.contains(&ip) && line.contains(&node_of(&got)), "{out}");
    Ok(())
}

async fn ready_nodes(env: &TestEnv) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(env.client());
    for i in 0..3 {
        wait(&nodes, &format!("opkit-worker-{i}"), |n: Option<&Node>| {
            n.and_then(|n| {
                n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready").map(|c| c.status == "True")
            })
            .unwrap_or(false)
        })
        .await?;
    }
    Ok(())
}

fn scheduled_false(p: Option<&Pod>) -> Option<String> {
    let c = p?.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "PodScheduled")?.clone();
    (c.status == "False" && c.reason.as_deref() == Some("Unschedulable")).then(|| c.message.unwrap_or_default())
}

#[tokio::test]
async fn placement_honours_selectors_taints_and_tolerations() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    ready_nodes(&env).await?;
    let nodes: Api<Node> = Api::all(env.client());
    let taint = json!({"spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}});
    nodes.patch("opkit-worker-1", &PatchParams::default(), &Patch::Merge(&taint)).await?;
    nodes
        .patch(
            "opkit-worker-2",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {"disk": "ssd"}}})),
        )
        .await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    // nodeSelector picks the labelled node.
    pods.create(&PostParams::default(), &pod("ssd", json!({"spec": {"nodeSelector": {"disk": "ssd"}}}))?).await?;
    // A toleration plus required node affinity lands on the tainted node.
    let tolerant = json!({"spec": {
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["opkit-worker-1"]}]}]}}}}});
    pods.create(&PostParams::default(), &pod("tolerant", tolerant)?).await?;
    // Without the toleration the tainted node is out of bounds.
    let intolerant = json!({"spec": {"nodeSelector": {"kubernetes.io/hostname": "opkit-worker-1"}}});
    pods.create(&PostParams::default(), &pod("intolerant", intolerant)?).await?;
    // Several plain pods never land on the tainted node.
    for i in 0..6 {
        pods.create(&PostParams::default(), &pod(&format!("plain-{i}"), json!({}))?).await?;
    }
    let ssd = wait(&pods, "ssd", |p: Option<&Pod>| is_ready(p)).await?;
    assert_eq!(node_of(&ssd), "opkit-worker-2");
    let tolerant = wait(&pods, "tolerant", |p: Option<&Pod>| is_ready(p)).await?;
    assert_eq!(node_of(&tolerant), "opkit-worker-1");
    let intolerant = wait(&pods, "intolerant", |p: Option<&Pod>| scheduled_false(p).is_some()).await?;
    let msg = scheduled_false(Some(&intolerant)).unwrap_or_default();
    assert_eq!(
        msg,
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match Pod's node affinity/selector. \
         preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    assert_eq!(phase(&intolerant), "Pending");
    let mut used = std::collections::BTreeSet::new();
    for i in 0..6 {
        let p = wait(&pods, &format!("plain-{i}"), |p: Option<&Pod>| is_ready(p)).await?;
        assert_ne!(node_of(&p), "opkit-worker-1");
        used.insert(node_of(&p));
    }
    assert_eq!(used.len(), 2, "spread over both untainted nodes: {used:?}");
    // Pod IPs are unique.
    let all = pods.list(&ListParams::default()).await?;
    let ips: Vec<String> = all.items.iter().filter_map(|p| p.status.as_ref()?.pod_ip.clone()).collect();
    let unique: std::collections::BTreeSet<_> = ips.iter().collect();
    assert_eq!(ips.len(), unique.len(), "{ips:?}");
    // Removing the taint lets the waiting pod in.
    nodes.patch("opkit-worker-1", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"taints": null}}))).await?;
    let p = wait(&pods, "intolerant", |p: Option<&Pod>| is_ready(p)).await?;
    assert_eq!(node_of(&p), "opkit-worker-1");
    Ok(())
}

#[tokio::test]
async fn unschedulable_pod_stays_pending() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    ready_nodes(&env).await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let huge = json!({"spec": {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "64", "memory": "1Gi"}}}]}});
    pods.create(&PostParams::default(), &pod("huge", huge)?).await?;
    pods.create(&PostParams::default(), &pod("nowhere", json!({"spec": {"nodeSelector": {"zone": "mars"}}}))?).await?;
    let huge = wait(&pods, "huge", |p: Option<&Pod>| scheduled_false(p).is_some()).await?;
    assert_eq!(
        scheduled_false(Some(&huge)).unwrap_or_default(),
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: \
         3 No preemption victims found for incoming pod."
    );
    let nowhere = wait(&pods, "nowhere", |p: Option<&Pod>| scheduled_false(p).is_some()).await?;
    assert!(
        scheduled_false(Some(&nowhere))
            .unwrap_or_default()
            .contains("3 node(s) didn't match Pod's node affinity/selector")
    );
    for p in [&huge, &nowhere] {
        assert_eq!(phase(p), "Pending");
        assert_eq!(node_of(p), "");
    }
    let events: Api<Event> = Api::namespaced(env.client(), "default");
    let deadline = tokio::time::Instant::now() + WAIT;
    while !events
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .any(|e| e.reason.as_deref() == Some("FailedScheduling") && e.type_.as_deref() == Some("Warning"))
    {
        if tokio::time::Instant::now() > deadline {
            return Err("no FailedScheduling event".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = kubectl(&env, &["get", "pod", "huge"]).await?;
    assert!(out.contains("Pending"), "{out}");
    Ok(())
}

#[tokio::test]
async fn never_ready_pod_runs_unready() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(
        &PostParams::default(),
        &pod("lazy", json!({"metadata": {"annotations": {"opkit.dev/never-ready": "true"}}}))?,
    )
    .await?;
    pods.create(&PostParams::default(), &pod("marker", json!({}))?).await?;
    let p = wait(&pods, "lazy", |p: Option<&Pod>| p.is_some_and(|p| phase(p) == "Running")).await?;
    // Once a pod created later is ready, the never-ready one has had every chance.
    wait(&pods, "marker", |p: Option<&Pod>| is_ready(p)).await?;
    let p2 = pods.get("lazy").await?;
    for p in [&p, &p2] {
        assert_eq!(condition(p, "Ready").as_deref(), Some("False"));
        assert_eq!(condition(p, "ContainersReady").as_deref(), Some("False"));
        let cs = p.status.as_ref().and_then(|s| s.container_statuses.clone()).unwrap_or_default();
        assert!(!cs[0].ready && cs[0].state.as_ref().and_then(|s| s.running.as_ref()).is_some());
    }
    let out = kubectl(&env, &["get", "pod", "lazy"]).await?;
    assert!(out.contains("0/1") && out.contains("Running"), "{out}");
    Ok(())
}

#[tokio::test]
async fn ready_delay_is_honoured() -> Result<(), Error> {
    let cfg = ControllersConfig { pod_ready_delay: Duration::from_millis(800), ..Default::default() };
    let env = TestEnv::builder().controllers(cfg).start().await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(&PostParams::default(), &pod("slow", json!({}))?).await?;
    let running = wait(&pods, "slow", |p: Option<&Pod>| p.is_some_and(|p| phase(p) == "Running")).await?;
    assert_eq!(condition(&running, "Ready").as_deref(), Some("False"), "not ready at first");
    wait(&pods, "slow", |p: Option<&Pod>| is_ready(p)).await?;
    Ok(())
}

#[tokio::test]
async fn crash_looping_pod_restarts() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let ann =
        json!({"metadata": {"annotations": {"opkit.dev/crash-loop": "true", "opkit.dev/restart-backoff": "100ms"}}});
    pods.create(&PostParams::default(), &pod("crashy", ann)?).await?;
    let restarts = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.container_statuses.as_ref()?.first().map(|c| c.restart_count)).unwrap_or(0)
    };
    let p = wait(&pods, "crashy", move |p: Option<&Pod>| restarts(p) >= 2).await?;
    assert_eq!(phase(&p), "Running");
    assert_eq!(condition(&p, "Ready").as_deref(), Some("False"));
    let c = p.status.as_ref().and_then(|s| s.container_statuses.clone()).unwrap_or_default().remove(0);
    let waiting = c.state.and_then(|s| s.waiting).ok_or("not waiting")?;
    assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));
    let last = c.last_state.and_then(|s| s.terminated).ok_or("no lastState")?;
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    let out = kubectl(&env, &["get", "pod", "crashy"]).await?;
    assert!(out.contains("CrashLoopBackOff"), "{out}");
    Ok(())
}

#[tokio::test]
async fn run_to_completion_pods_succeed_or_fail() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let done =
        json!({"metadata": {"annotations": {"opkit.dev/run-duration": "300ms"}}, "spec": {"restartPolicy": "Never"}});
    pods.create(&PostParams::default(), &pod("done", done)?).await?;
    let fail = json!({"metadata": {"annotations": {"opkit.dev/exit-code": "3"}}, "spec": {"restartPolicy": "Never"}});
    pods.create(&PostParams::default(), &pod("fail", fail)?).await?;
    let retry = json!({"metadata": {"annotations": {"opkit.dev/exit-code": "2", "opkit.dev/restart-backoff": "100ms"}},
        "spec": {"restartPolicy": "OnFailure"}});
    pods.create(&PostParams::default(), &pod("retry", retry)?).await?;
    let terminated = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.clone())
            .unwrap_or_default()
            .remove(0)
            .state
            .and_then(|s| s.terminated)
    };
    let ok = wait(&pods, "done", |p: Option<&Pod>| p.is_some_and(|p| phase(p) == "Succeeded")).await?;
    let t = terminated(&ok).ok_or("not terminated")?;
    assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")));
    assert_eq!(condition(&ok, "Ready").as_deref(), Some("False"));
    let failed = wait(&pods, "fail", |p: Option<&Pod>| p.is_some_and(|p| phase(p) == "Failed")).await?;
    let t = terminated(&failed).ok_or("not terminated")?;
    assert_eq!((t.exit_code, t.reason.as_deref()), (3, Some("Error")));
    let retried = wait(&pods, "retry", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.container_statuses.as_ref()?.first().map(|c| c.restart_count >= 1))
            .unwrap_or(false)
    })
    .await?;
    assert_eq!(phase(&retried), "Running", "OnFailure restarts instead of failing");
    let out = kubectl(&env, &["get", "pods"]).await?;
    assert!(out.lines().any(|l| l.starts_with("done ") && l.contains("Completed")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("fail ") && l.contains("Error")), "{out}");
    Ok(())
}

#[tokio::test]
async fn kubectl_delete_waits_for_kubelet() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(&PostParams::default(), &pod("doomed", json!({}))?).await?;
    let p = wait(&pods, "doomed", |p: Option<&Pod>| is_ready(p)).await?;
    let node = node_of(&p);
    let out = tokio::time::timeout(WAIT, kubectl(&env, &["delete", "pod", "doomed", "--wait=true", "--timeout=25s"]))
        .await??;
    assert!(out.contains("pod \"doomed\" deleted"), "{out}");
    assert!(pods.get_opt("doomed").await?.is_none());
    // A finalizer keeps the pod, terminated, until it is removed.
    pods.create(&PostParams::default(), &pod("held", json!({"metadata": {"finalizers": ["example.com/hold"]}}))?)
        .await?;
    wait(&pods, "held", |p: Option<&Pod>| is_ready(p)).await?;
    pods.delete("held", &Default::default()).await?;
    let held = wait(&pods, "held", |p: Option<&Pod>| p.is_some_and(|p| phase(p) == "Failed")).await?;
    assert!(held.metadata.deletion_timestamp.is_some());
    pods.patch("held", &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"finalizers": null}}))).await?;
    tokio::time::timeout(WAIT, await_condition(pods.clone(), "held", |p: Option<&Pod>| p.is_none())).await??;
    // The freed IP is handed out again on that node eventually; the kill was reported.
    let events: Api<Event> = Api::namespaced(env.client(), "default");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let evs = events.list(&ListParams::default()).await?;
        if let Some(e) = evs.items.iter().find(|e| e.reason.as_deref() == Some("Killing")) {
            assert_eq!(e.reporting_controller.as_deref(), Some("kubelet"));
            assert!(e.reporting_instance.as_deref().is_some_and(|i| i.starts_with("opkit-worker-")));
            assert_eq!(e.note.as_deref(), Some("Stopping container app"));
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("no Killing event (node {node})").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

#[tokio::test]
async fn simulated_termination_takes_its_time() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let slow = json!({"metadata": {"annotations": {"opkit.dev/termination-duration": "2s"}}});
    pods.create(&PostParams::default(), &pod("slow-stop", slow)?).await?;
    wait(&pods, "slow-stop", |p: Option<&Pod>| is_ready(p)).await?;
    let started = tokio::time::Instant::now();
    pods.delete("slow-stop", &Default::default()).await?;
    let terminating = pods.get("slow-stop").await?;
    assert!(terminating.metadata.deletion_timestamp.is_some());
    let out = kubectl(&env, &["get", "pod", "slow-stop"]).await?;
    assert!(out.contains("Terminating"), "{out}");
    tokio::time::timeout(WAIT, await_condition(pods.clone(), "slow-stop", |p: Option<&Pod>| p.is_none())).await??;
    assert!(started.elapsed() >= Duration::from_millis(1500), "stopped after {:?}", started.elapsed());
    Ok(())
}

#[tokio::test]
async fn readiness_gates_hold_back_ready() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let gated = json!({"spec": {"readinessGates": [{"conditionType": "example.com/ok"}]}});
    pods.create(&PostParams::default(), &pod("gated", gated)?).await?;
    let p = wait(&pods, "gated", |p: Option<&Pod>| {
        p.is_some_and(|p| condition(p, "ContainersReady").as_deref() == Some("True"))
    })
    .await?;
    assert_eq!(condition(&p, "Ready").as_deref(), Some("False"));
    let gate = json!({"status": {"conditions": [{"type": "example.com/ok", "status": "True"}]}});
    pods.patch_status("gated", &PatchParams::default(), &Patch::Strategic(&gate)).await?;
    let p = wait(&pods, "gated", |p: Option<&Pod>| is_ready(p)).await?;
    assert_eq!(condition(&p, "example.com/ok").as_deref(), Some("True"), "foreign condition kept");
    Ok(())
}

#[tokio::test]
async fn scheduler_alone_marks_pods_scheduled() -> Result<(), Error> {
    let env = TestEnv::builder().controllers(ControllersConfig::default().disable("kubelet")).start().await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(&PostParams::default(), &pod("bound", json!({}))?).await?;
    let p = wait(&pods, "bound", |p: Option<&Pod>| {
        p.is_some_and(|p| condition(p, "PodScheduled").as_deref() == Some("True"))
    })
    .await?;
    assert!(node_of(&p).starts_with("opkit-worker-"));
    assert_eq!(phase(&p), "Pending", "no kubelet runs it");
    Ok(())
}
