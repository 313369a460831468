//! Sharding on one in-process API server: three shards of one ring share 3,000
//! ConfigMaps. Every object is reconciled by exactly one shard; a shard that dies hands
//! its objects to the others; a shard that comes back takes its share again, through
//! the drain handshake; and no object is ever reconciled by two shards at once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use opkit::sharding::ShardingConfig;
use opkit::{Action, BuildError, CacheScope, Context, Controller, Manager, ManagerOptions, ReconcileError};
use opkit_testenv::TestEnv;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

const NS: &str = "shards";
const RING: &str = "cms";
/// How long a phase may take (3,000 objects in a debug build).
const PHASE: Duration = Duration::from_secs(120);

/// Who reconciles what, and whether two shards ever did one object at once.
#[derive(Default)]
struct Tracker {
    active: Mutex<HashMap<String, String>>,
    by: Mutex<HashMap<String, HashSet<String>>>,
    last: Mutex<HashMap<String, String>>,
    overlaps: AtomicUsize,
}

fn sharding(id: &str) -> ShardingConfig {
    let mut cfg = ShardingConfig::new(RING, NS).shard_id(id).shards::<ConfigMap>();
    cfg.lease_duration = Duration::from_secs(2);
    cfg.renew_deadline = Duration::from_secs(1);
    cfg.retry_period = Duration::from_millis(200);
    // A stopped shard does not hand over: its lease must expire, as after a crash.
    cfg.release_on_cancel = false;
    cfg
}

fn shard(env: &TestEnv, id: &'static str, tracker: Arc<Tracker>) -> (Manager, CancellationToken) {
    let opts = ManagerOptions {
        cache: CacheScope::namespaces(vec![NS.into()]),
        sharding: Some(sharding(id)),
        ..ManagerOptions::default()
    };
    let mgr = Manager::new(env.client(), opts);
    Controller::new(&mgr, move |ctx: Context<ConfigMap>| {
        let tracker = tracker.clone();
        async move {
            // A reconcile of an object gone from this shard's cache counts too: it runs
            // as "not found" while another shard may be reconciling the object.
            let key = ctx.request.name.clone();
            if let Some(other) = tracker.active.lock().insert(key.clone(), id.to_string()) {
                tracker.overlaps.fetch_add(1, Ordering::SeqCst);
                eprintln!("{key} reconciled by {id} while {other} reconciles it");
            }
            // Some work, so that an overlap has a window to show in.
            tokio::time::sleep(Duration::from_millis(5)).await;
            tracker.active.lock().remove(&key);
            if ctx.object.is_none() {
                return Ok::<_, ReconcileError>(Action::done());
            }
            tracker.by.lock().entry(key.clone()).or_default().insert(id.to_string());
            tracker.last.lock().insert(key, id.to_string());
            Ok(Action::done())
        }
    })
    .build()
    .expect("controller");
    let token = CancellationToken::new();
    let (m, t) = (mgr.clone(), token.clone());
    tokio::spawn(async move { m.run_until(t).await });
    (mgr, token)
}

/// Runs `mgr` on its own task until the returned token is cancelled.
fn run(mgr: &Manager) -> CancellationToken {
    let token = CancellationToken::new();
    let (m, t) = (mgr.clone(), token.clone());
    tokio::spawn(async move { m.run_until(t).await });
    token
}

/// A control plane (no controllers of its own) with the namespace [`NS`].
async fn env_with_namespace() -> TestEnv {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let namespaces: Api<Namespace> = Api::all(env.client());
    let ns = serde_json::from_value(serde_json::json!({"metadata": {"name": NS}})).expect("namespace");
    namespaces.create(&PostParams::default(), &ns).await.expect("namespace");
    env
}

/// Every object's shard label.
async fn labels(api: &Api<ConfigMap>) -> BTreeMap<String, Option<String>> {
    let label = sharding("x").shard_label();
    let list = api.list(&ListParams::default()).await.expect("list");
    list.items
        .into_iter()
        .filter(|cm| cm.metadata.name.as_deref() != Some("kube-root-ca.crt"))
        .map(|cm| {
            let shard = cm.metadata.labels.and_then(|mut l| l.remove(&label));
            (cm.metadata.name.unwrap_or_default(), shard)
        })
        .collect()
}

/// Waits until every object is labelled with one of `shards` (each of them holding
/// some), no drain is pending, and its last reconcile was by that shard, and, when given,
/// the labels are `expected`; returns the labels.
async fn settled(
    api: &Api<ConfigMap>,
    tracker: &Tracker,
    shards: &[&str],
    expected: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let drain = sharding("x").drain_label();
    let started = Instant::now();
    loop {
        let list = api.list(&ListParams::default()).await.expect("list");
        let draining = list.items.iter().any(|cm| cm.metadata.labels.as_ref().is_some_and(|l| l.contains_key(&drain)));
        let now = labels(api).await;
        let last = tracker.last.lock().clone();
        let done = !draining
            && now.iter().all(|(name, shard)| {
                shard.as_deref().is_some_and(|s| shards.contains(&s) && last.get(name).map(String::as_str) == Some(s))
            })
            && shards.iter().all(|s| now.values().any(|v| v.as_deref() == Some(*s)));
        let now: BTreeMap<String, String> = now.into_iter().map(|(k, v)| (k, v.unwrap_or_default())).collect();
        if done && expected.is_none_or(|e| *e == now) {
            return now;
        }
        if started.elapsed() > PHASE {
            let placed = now.values().filter(|s| shards.contains(&s.as_str())).count();
            let unreconciled = now.iter().filter(|(name, s)| last.get(*name) != Some(*s)).count();
            let unexpected = expected.map_or(0, |e| now.iter().filter(|(name, s)| e.get(*name) != Some(*s)).count());
            let mut per_shard: BTreeMap<&str, usize> = BTreeMap::new();
            for s in now.values() {
                *per_shard.entry(s.as_str()).or_default() += 1;
            }
            panic!(
                "not settled on {shards:?}: {placed} of {} placed ({per_shard:?}), draining: {draining}, \
                 last reconciled elsewhere: {unreconciled}, not as expected: {unexpected}",
                now.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Changes every object (an annotation), so that its shard reconciles it.
async fn touch_all(api: &Api<ConfigMap>) {
    let names: Vec<String> = labels(api).await.into_keys().collect();
    futures::stream::iter(names)
        .for_each_concurrent(32, |name| {
            let api = api.clone();
            async move {
                let patch = serde_json::json!({"metadata": {"annotations": {"touched": "yes"}}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("touch");
            }
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_share_3000_objects_and_hand_them_over_without_overlap() {
    let env = env_with_namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    futures::stream::iter(0..3000)
        .for_each_concurrent(32, |i| {
            let api = api.clone();
            async move {
                let cm = serde_json::from_value(serde_json::json!({"metadata": {"name": format!("cm-{i:04}")}}))
                    .expect("configmap");
                api.create(&PostParams::default(), &cm).await.expect("create");
            }
        })
        .await;
    let tracker = Arc::new(Tracker::default());
    let (a, _stop_a) = shard(&env, "a", tracker.clone());
    let (b, _stop_b) = shard(&env, "b", tracker.clone());
    let (_c, stop_c) = shard(&env, "c", tracker.clone());

    // Every object is reconciled by exactly one shard, about a third each. (While the
    // shards start, objects move from the first one to the others: touch them all once
    // settled, and see who reconciles them.)
    let first = settled(&api, &tracker, &["a", "b", "c"], None).await;
    assert_eq!(first.len(), 3000);
    tracker.by.lock().clear();
    touch_all(&api).await;
    let started = Instant::now();
    while tracker.by.lock().len() < 3000 {
        assert!(started.elapsed() < PHASE, "not every object was reconciled after the touch");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (name, shards) in tracker.by.lock().iter() {
        assert_eq!(shards, &HashSet::from([first[name].clone()]), "{name} was reconciled by {shards:?}");
    }
    for id in ["a", "b", "c"] {
        let share = first.values().filter(|s| *s == id).count();
        assert!((600..1400).contains(&share), "shard {id} has {share} of 3,000");
    }

    // Shard c dies without handing over: once its lease expires, its objects move to
    // a and b, and theirs stay.
    stop_c.cancel();
    let second = settled(&api, &tracker, &["a", "b"], None).await;
    for (name, shard) in &first {
        if shard != "c" {
            assert_eq!(second.get(name), Some(shard), "{name} moved though its shard lives");
        }
    }

    // c comes back and takes its share again, drained from a and b.
    let (c2, _stop_c2) = shard(&env, "c", tracker.clone());
    // The ring gives c its share back: the very objects it had.
    settled(&api, &tracker, &["a", "b", "c"], Some(&first)).await;
    assert_eq!(tracker.overlaps.load(Ordering::SeqCst), 0, "an object was reconciled by two shards at once");
    let metrics: String = [a.metrics(), c2.metrics(), b.metrics()].iter().map(|m| m.encode()).collect();
    assert!(metrics.contains(r#"opkit_sharding_moves_total{ring="cms",how="drained"}"#), "{metrics}");
    assert!(metrics.contains(r#"opkit_sharding_moves_total{ring="cms",how="reassigned"}"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_moved_by_hand_is_refused_one_naming_an_unknown_shard_is_repaired_and_an_unsharded_controller_is_refused()
 {
    let env = env_with_namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    for i in 0..20 {
        let cm = serde_json::from_value(serde_json::json!({"metadata": {"name": format!("cm-{i}")}})).expect("cm");
        api.create(&PostParams::default(), &cm).await.expect("create");
    }
    let tracker = Arc::new(Tracker::default());
    let (mgr, _stop) = shard(&env, "a", tracker.clone());
    settled(&api, &tracker, &["a"], None).await;

    // A user who rewrites the shard label bypasses the drain handshake: the coordinator's
    // policy refuses it, naming the way that works.
    let (label, drain) = (sharding("x").shard_label(), sharding("x").drain_label());
    let patch = serde_json::json!({"metadata": {"labels": {label.clone(): "nobody"}}});
    // The API server enforces a new policy once its policy cache has it (as kube's does):
    // wait for that with dry runs.
    let started = Instant::now();
    while api.patch("cm-3", &PatchParams::default().dry_run(), &Patch::Merge(&patch)).await.is_ok() {
        assert!(started.elapsed() < PHASE, "the label's guard is never enforced");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let err = api.patch("cm-3", &PatchParams::default(), &Patch::Merge(&patch)).await.expect_err("refused");
    let kube::Error::Api(status) = err else { panic!("{err}") };
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"), "{status:?}");
    assert!(status.message.contains(&format!("set {drain}=true first")), "{}", status.message);

    // An object created naming a shard that never existed comes back to a live one.
    let cm = serde_json::json!({"metadata": {"name": "stray", "labels": {label.clone(): "nobody"}}});
    api.create(&PostParams::default(), &serde_json::from_value(cm).expect("cm")).await.expect("create");
    let started = Instant::now();
    loop {
        let now = api.get("stray").await.expect("get").metadata.labels.unwrap_or_default();
        if now.get(&label).map(String::as_str) == Some("a") && !now.contains_key(&drain) {
            break;
        }
        assert!(started.elapsed() < PHASE, "never repaired: {now:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(mgr.metrics().encode().contains(r#"opkit_sharding_moves_total{ring="cms",how="repaired"} 1"#));

    // A leader-only controller of a kind the ring does not shard would run on every shard.
    let err = Controller::new(&mgr, |_: Context<Secret>| async { Ok::<_, ReconcileError>(Action::done()) })
        .build()
        .expect_err("refused");
    assert!(matches!(err, BuildError::NotSharded { .. }), "{err}");
    assert!(err.to_string().contains("Secret"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owned_objects_follow_their_owners_shard() {
    let env = env_with_namespace().await;
    let (cms, secrets): (Api<ConfigMap>, Api<Secret>) =
        (Api::namespaced(env.client(), NS), Api::namespaced(env.client(), NS));
    for i in 0..40 {
        let name = format!("cm-{i}");
        let owner = cms
            .create(
                &PostParams::default(),
                &serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).expect("cm"),
            )
            .await
            .expect("owner");
        let uid = owner.metadata.uid.expect("uid");
        let child = serde_json::json!({"metadata": {"name": format!("{name}-child"), "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid, "controller": true}]}});
        secrets.create(&PostParams::default(), &serde_json::from_value(child).expect("secret")).await.expect("child");
    }
    let start = |id: &'static str| {
        let mut cfg = sharding(id).follows::<Secret>();
        cfg.release_on_cancel = true;
        let opts = ManagerOptions {
            cache: CacheScope::namespaces(vec![NS.into()]),
            sharding: Some(cfg),
            ..ManagerOptions::default()
        };
        let mgr = Manager::new(env.client(), opts);
        Controller::new(&mgr, |_: Context<ConfigMap>| async { Ok::<_, ReconcileError>(Action::done()) })
            .owns::<Secret>()
            .build()
            .expect("controller");
        run(&mgr)
    };
    let label = sharding("x").shard_label();
    // Every child has its owner's shard, and moves when its owner does.
    let follows = |want: &'static [&'static str]| {
        let (cms, secrets, label) = (cms.clone(), secrets.clone(), label.clone());
        async move {
            let started = Instant::now();
            loop {
                let owners: HashMap<String, Option<String>> = cms
                    .list(&ListParams::default())
                    .await
                    .expect("list")
                    .items
                    .into_iter()
                    .map(|c| {
                        (c.metadata.name.unwrap_or_default(), c.metadata.labels.and_then(|mut l| l.remove(&label)))
                    })
                    .collect();
                let children = secrets.list(&ListParams::default()).await.expect("list").items;
                let placed = owners.values().all(|s| s.as_deref().is_some_and(|s| want.contains(&s)));
                let followed = children.len() == 40
                    && children.iter().all(|c| {
                        let owner = c.metadata.name.as_deref().and_then(|n| n.strip_suffix("-child")).unwrap_or("");
                        let mine = c.metadata.labels.as_ref().and_then(|l| l.get(&label)).cloned();
                        owners.get(owner).cloned().flatten() == mine && mine.is_some()
                    });
                if placed && followed {
                    return;
                }
                assert!(started.elapsed() < PHASE, "children do not follow their owners onto {want:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let _a = start("a");
    let stop_b = start("b");
    follows(&["a", "b"]).await;
    stop_b.cancel();
    follows(&["a"]).await;
}

/// The Helm, Ansible and KUDO operators' path: managers started with `--shard-ring`
/// shard every controller they build, here a dynamic controller of ConfigMaps that also
/// owns ConfigMaps (as KUDO's Instances own Instances). A child is reconciled by its
/// parent's shard, having moved there with the drain handshake; an object with no owner
/// goes by its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_flags_shard_every_controller_and_children_of_a_reconciled_kind_follow_their_parent() {
    use clap::Parser;
    use kube::api::{ApiResource, DynamicObject};
    use kube::discovery::Scope;
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        manager: opkit::ManagerArgs,
    }
    let env = env_with_namespace().await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    for i in 0..30 {
        let parent = format!("p-{i}");
        let meta = serde_json::json!({"metadata": {"name": parent}});
        let owner = cms.create(&PostParams::default(), &serde_json::from_value(meta).expect("cm")).await.expect("p");
        let uid = owner.metadata.uid.expect("uid");
        let child = serde_json::json!({"metadata": {"name": format!("c-{i}"), "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": parent, "uid": uid, "controller": true}]}});
        cms.create(&PostParams::default(), &serde_json::from_value(child).expect("cm")).await.expect("child");
    }
    let tracker = Arc::new(Tracker::default());
    let resource = ApiResource::erase::<ConfigMap>(&());
    let start = |id: &'static str| {
        let flags = Flags::parse_from([
            "op",
            "--shard-ring",
            RING,
            "--shard-id",
            id,
            "--leader-election-namespace",
            NS,
            "--namespace",
            NS,
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
        ]);
        let mgr = Manager::new(env.client(), flags.manager.options().expect("options"));
        let tracker = tracker.clone();
        Controller::new_dynamic(&mgr, resource.clone(), Scope::Namespaced, move |ctx: Context<DynamicObject>| {
            let tracker = tracker.clone();
            async move {
                if ctx.object.is_some() {
                    tracker.last.lock().insert(ctx.request.name.clone(), id.to_string());
                }
                Ok::<_, ReconcileError>(Action::done())
            }
        })
        .owns_dynamic(&resource, Scope::Namespaced)
        .build()
        .expect("controller");
        run(&mgr)
    };
    let _a = start("a");
    let _b = start("b");
    let label = sharding("x").shard_label();
    let started = Instant::now();
    loop {
        let now = labels(&cms).await;
        let last = tracker.last.lock().clone();
        let children_follow = (0..30).all(|i| {
            let parent = now.get(&format!("p-{i}")).cloned().flatten();
            parent.is_some() && now.get(&format!("c-{i}")).cloned().flatten() == parent
        });
        let reconciled_there = now.iter().all(|(name, s)| s.is_some() && last.get(name) == s.as_ref());
        let parents_on_both = ["a", "b"].iter().all(|s| (0..30).any(|i| now[&format!("p-{i}")].as_deref() == Some(*s)));
        if children_follow && reconciled_there && parents_on_both {
            break;
        }
        assert!(
            started.elapsed() < PHASE,
            "children do not follow their parents ({label}): {now:?}; last reconciled by: {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
