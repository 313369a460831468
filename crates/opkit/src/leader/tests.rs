//! Leader-election tests against an in-process API server: hand-over on release,
//! takeover after lease expiry, losing leadership, and config validation.

use super::*;
use opkit_testenv::TestEnv;

const WAIT: Duration = Duration::from_secs(15);

fn cfg(identity: &str, release_on_cancel: bool) -> LeaderElectionConfig {
    LeaderElectionConfig {
        identity: identity.to_string(),
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_secs(1),
        retry_period: Duration::from_millis(200),
        release_on_cancel,
        ..LeaderElectionConfig::new("ctrl-lock", "default")
    }
}

struct Replica {
    rx: watch::Receiver<bool>,
    handle: JoinHandle<()>,
    shutdown: CancellationToken,
    identity: &'static str,
}

fn replica(env: &TestEnv, identity: &'static str, release: bool, m: Option<Metrics>) -> Replica {
    let shutdown = CancellationToken::new();
    let (rx, handle) = LeaderElector::new(env.client(), cfg(identity, release), m).start(shutdown.clone());
    Replica { rx, handle, shutdown, identity }
}

async fn until(rx: &mut watch::Receiver<bool>, want: bool) {
    tokio::time::timeout(WAIT, rx.wait_for(|v| *v == want))
        .await
        .expect("timed out waiting for leadership change")
        .expect("elector dropped its sender");
}

async fn join(handle: JoinHandle<()>) {
    let done = tokio::time::timeout(WAIT, handle).await;
    done.expect("elector did not stop").expect("elector panicked");
}

/// Waits until one of the two leads; returns (leader, follower).
async fn first_leader(mut a: Replica, mut b: Replica) -> (Replica, Replica) {
    let a_leads = tokio::time::timeout(WAIT, async {
        tokio::select! {
            r = a.rx.wait_for(|v| *v) => r.map(|_| true),
            r = b.rx.wait_for(|v| *v) => r.map(|_| false),
        }
    })
    .await
    .expect("nobody became leader")
    .expect("elector dropped its sender");
    if a_leads { (a, b) } else { (b, a) }
}

async fn lease(env: &TestEnv) -> LeaseSpec {
    let api: Api<Lease> = Api::namespaced(env.client(), "default");
    api.get("ctrl-lock").await.expect("lease").spec.expect("spec")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_and_release_hands_over_at_once() {
    let env = TestEnv::start().await.expect("test env");
    let metrics = Metrics::new();
    let a = replica(&env, "a", true, Some(metrics.clone()));
    let b = replica(&env, "b", true, None);
    let (leader, mut follower) = first_leader(a, b).await;
    assert!(*leader.rx.borrow());
    assert!(!*follower.rx.borrow(), "both replicas lead");
    let spec = lease(&env).await;
    assert_eq!(spec.holder_identity.as_deref(), Some(leader.identity));
    assert_eq!(spec.lease_duration_seconds, Some(2));
    assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());
    let status = format!("leader_election_master_status{{name=\"ctrl-lock\"}} {}\n", u8::from(leader.identity == "a"));
    assert!(metrics.encode().contains(&status), "{}", metrics.encode());

    // The leader keeps renewing: the follower stays a follower past a lease duration.
    let stolen =
        tokio::time::timeout(Duration::from_millis(2500), follower.rx.wait_for(|v| *v)).await.map(|r| r.is_ok());
    assert!(stolen.is_err(), "the follower took over a renewed lease");
    let renewed = lease(&env).await;
    assert_eq!(renewed.holder_identity.as_deref(), Some(leader.identity));
    assert!(renewed.renew_time > spec.renew_time, "lease was not renewed");
    assert_eq!(renewed.acquire_time, spec.acquire_time);

    let cancelled_at = Instant::now();
    leader.shutdown.cancel();
    until(&mut follower.rx, true).await;
    let took = cancelled_at.elapsed();
    assert!(took < Duration::from_millis(1500), "handover took {took:?}");
    join(leader.handle).await;
    assert!(!*leader.rx.borrow());
    let spec = lease(&env).await;
    assert_eq!(spec.holder_identity.as_deref(), Some(follower.identity));
    assert_eq!(spec.lease_transitions, Some(1));
    if leader.identity == "a" {
        assert!(metrics.encode().contains("leader_election_master_status{name=\"ctrl-lock\"} 0\n"));
    }
    follower.shutdown.cancel();
    join(follower.handle).await;
    assert_eq!(lease(&env).await.holder_identity.as_deref(), Some(""));
    assert_eq!(lease(&env).await.lease_duration_seconds, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_release_takeover_waits_for_expiry() {
    let env = TestEnv::start().await.expect("test env");
    let a = replica(&env, "a", false, None);
    let b = replica(&env, "b", false, None);
    let (leader, mut follower) = first_leader(a, b).await;
    let cancelled_at = Instant::now();
    leader.shutdown.cancel();
    join(leader.handle).await;
    assert_eq!(lease(&env).await.holder_identity.as_deref(), Some(leader.identity));
    until(&mut follower.rx, true).await;
    let took = cancelled_at.elapsed();
    // The follower last saw the lease change at most ~retry period (+ jitter) before
    // the cancel, so it must wait nearly the whole 2s lease duration.
    assert!(took >= Duration::from_millis(1400), "took over after only {took:?}");
    let spec = lease(&env).await;
    assert_eq!(spec.holder_identity.as_deref(), Some(follower.identity));
    assert_eq!(spec.lease_transitions, Some(1));
    follower.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_is_lost_when_the_lease_is_taken() {
    let env = TestEnv::start().await.expect("test env");
    let mut a = replica(&env, "a", false, None);
    until(&mut a.rx, true).await;
    // Another party overwrites the lease; the leader cannot renew and gives up.
    let api: Api<Lease> = Api::namespaced(env.client(), "default");
    // Retry on 409: the leader renews concurrently.
    let mut stolen = false;
    for _ in 0..20 {
        let mut l = api.get("ctrl-lock").await.expect("lease");
        let spec = l.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some("intruder".into());
        spec.lease_duration_seconds = Some(3600);
        spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
        if api.replace("ctrl-lock", &PostParams::default(), &l).await.is_ok() {
            stolen = true;
            break;
        }
    }
    assert!(stolen, "could not overwrite the lease");
    until(&mut a.rx, false).await;
    join(a.handle).await;
    assert!(!a.shutdown.is_cancelled());
    assert_eq!(lease(&env).await.holder_identity.as_deref(), Some("intruder"));
}

#[test]
fn config_defaults_validation_and_jitter() {
    let c = LeaderElectionConfig::new("l", "ns");
    assert_eq!(c.lease_duration, Duration::from_secs(15));
    assert_eq!(c.renew_deadline, Duration::from_secs(10));
    assert_eq!(c.retry_period, Duration::from_secs(2));
    assert!(!c.release_on_cancel);
    let (host, id) = c.identity.rsplit_once('_').expect("host_uuid");
    assert!(!host.is_empty());
    assert_eq!(id.len(), 36);
    assert_eq!(id.as_bytes()[14], b'4');
    assert_ne!(c.identity, LeaderElectionConfig::new("l", "ns").identity);
    assert!(c.validate().is_ok());
    assert!(cfg("x", false).validate().is_ok());
    let with = |f: fn(&mut LeaderElectionConfig)| {
        let mut x = c.clone();
        f(&mut x);
        x
    };
    for bad in [
        with(|x| x.renew_deadline = Duration::from_secs(15)),
        with(|x| x.retry_period = Duration::from_secs(9)),
        with(|x| x.lease_duration = Duration::ZERO),
        with(|x| x.lease_name.clear()),
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
    let d = Duration::from_secs(1);
    for j in (0..100).map(|_| jittered(d)) {
        assert!(j >= d && j <= d.mul_f64(1.0 + JITTER_FACTOR), "{j:?}");
    }
}

/// Replica `identity` on a lease far longer than any wait here, running in pod `pod`
/// when given (its container as the test writes it into the Pod's status).
fn pod_replica(env: &TestEnv, identity: &'static str, pod: Option<&str>) -> Replica {
    let shutdown = CancellationToken::new();
    let cfg = LeaderElectionConfig {
        lease_duration: Duration::from_secs(300),
        holder_pod: pod.map(|p| HolderPod { namespace: "default".into(), name: p.into(), container: None }),
        ..cfg(identity, false)
    };
    let (rx, handle) = LeaderElector::new(env.client(), cfg, None).start(shutdown.clone());
    Replica { rx, handle, shutdown, identity }
}

/// Creates pod `name` with one container `manager`, and writes its status as a kubelet
/// would: `state` for the instance `containerID`.
async fn pod_with_container(env: &TestEnv, name: &str, container_id: &str, state: serde_json::Value) {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(env.client(), "default");
    let pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"automountServiceAccountToken": false, "containers": [{"name": "manager", "image": "m:1"}]},
    }))
    .expect("pod");
    if pods.get_opt(name).await.expect("read pod").is_none() {
        pods.create(&PostParams::default(), &pod).await.expect("create pod");
    }
    let status = serde_json::json!({"status": {"phase": "Running", "containerStatuses": [{
        "name": "manager", "image": "m:1", "imageID": "", "ready": true, "restartCount": 0,
        "containerID": container_id, "state": state,
    }]}});
    let params = kube::api::PatchParams::default();
    pods.patch_status(name, &params, &kube::api::Patch::Merge(&status)).await.expect("write pod status");
}

fn rfc3339(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn running_since(t: jiff::Timestamp) -> serde_json::Value {
    serde_json::json!({"running": {"startedAt": rfc3339(t)}})
}

fn terminated_at(id: &str, t: jiff::Timestamp) -> serde_json::Value {
    serde_json::json!({"terminated": {"exitCode": 137, "reason": "Error", "containerID": id,
        "startedAt": rfc3339(t), "finishedAt": rfc3339(t)}})
}

async fn lease_object(env: &TestEnv) -> Lease {
    let api: Api<Lease> = Api::namespaced(env.client(), "default");
    api.get("ctrl-lock").await.expect("lease")
}

/// Waits until the lease names `container` as its holder's.
async fn until_published(env: &TestEnv, container: &str) {
    let published = async {
        loop {
            let lease = lease_object(env).await;
            let named = lease.metadata.annotations.as_ref().and_then(|a| a.get(CONTAINER_ANNOTATION));
            if named.map(String::as_str) == Some(container) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(WAIT, published).await.expect("the leader never named its container on the lease");
}

/// Waits until the leader renewed the lease `n` more times.
async fn renewals(env: &TestEnv, n: usize) {
    let counted = async {
        let mut last = lease(env).await.renew_time;
        let mut seen = 0;
        while seen < n {
            let now = lease(env).await.renew_time;
            if now != last {
                seen += 1;
                last = now;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(WAIT, counted).await.expect("the leader stopped renewing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_as_soon_as_the_leaders_container_is_reported_ended() {
    let env = TestEnv::builder().without_controllers().start().await.expect("test env");
    pod_with_container(&env, "pod-a", "containerd://a-1", running_since(jiff::Timestamp::now())).await;
    let mut a = pod_replica(&env, "a", Some("pod-a"));
    until(&mut a.rx, true).await;
    until_published(&env, "containerd://a-1").await;
    let annotations = lease_object(&env).await.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get(POD_ANNOTATION).map(String::as_str), Some("default/pod-a"));
    let mut b = pod_replica(&env, "b", None);
    renewals(&env, 2).await;
    assert!(!*b.rx.borrow(), "the standby took a renewed lease");

    // The leader's process dies (nothing releases the lease), and the kubelet says so.
    a.handle.abort();
    pod_with_container(&env, "pod-a", "containerd://a-1", terminated_at("containerd://a-1", jiff::Timestamp::now()))
        .await;
    // Far sooner than the 300 s lease: only the container's end can explain it.
    until(&mut b.rx, true).await;
    let lease = lease_object(&env).await;
    let spec = lease.spec.clone().expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
    // B runs in no pod it knows of: the old holder's container is no longer named.
    assert_eq!(lease.metadata.annotations.unwrap_or_default().get(CONTAINER_ANNOTATION), None);
    b.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_renewed_after_the_reported_end_or_naming_an_older_instance_is_not_taken() {
    let env = TestEnv::builder().without_controllers().start().await.expect("test env");
    // An instance that started long before this process is not this process: the
    // leader does not name it.
    let long_ago = jiff::Timestamp::now().checked_sub(Duration::from_secs(3600)).expect("an hour ago");
    pod_with_container(&env, "pod-a", "containerd://a-0", running_since(long_ago)).await;
    let mut a = pod_replica(&env, "a", Some("pod-a"));
    until(&mut a.rx, true).await;
    renewals(&env, 2).await;
    assert_eq!(lease_object(&env).await.metadata.annotations.unwrap_or_default().get(CONTAINER_ANNOTATION), None);

    // Once its own instance is reported, it is named.
    pod_with_container(&env, "pod-a", "containerd://a-1", running_since(jiff::Timestamp::now())).await;
    until_published(&env, "containerd://a-1").await;
    // A status claiming the instance ended a minute ago, while the lease is renewed
    // after that: the holder is alive, and the standby must not take over.
    let b = pod_replica(&env, "b", None);
    let a_minute_ago = jiff::Timestamp::now().checked_sub(Duration::from_secs(60)).expect("a minute ago");
    pod_with_container(&env, "pod-a", "containerd://a-1", terminated_at("containerd://a-1", a_minute_ago)).await;
    renewals(&env, 5).await;
    assert!(!*b.rx.borrow(), "the standby took over a lease renewed after its holder's reported end");
    assert!(*a.rx.borrow());
    assert_eq!(lease(&env).await.holder_identity.as_deref(), Some("a"));
    a.shutdown.cancel();
    b.shutdown.cancel();
}
