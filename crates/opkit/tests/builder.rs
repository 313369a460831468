//! The controller builder and the guarantees a reconcile relies on, on a real
//! (in-process) API server: caches synced before the first reconcile, additive and
//! per-source event filters, unique names, external triggers, user state, the event
//! recorder.

use crate::common;

use std::sync::Arc;

use common::{Log, configmap, eventually, start};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, Resource};
use opkit::predicate::{Event, LabelsChanged};
use opkit::{Action, BuildError, Context, Controller, Manager, ManagerOptions, ReconcileError, Request};
use opkit_testenv::TestEnv;
use parking_lot::Mutex;

mod late {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// A kind whose CRD is installed after the manager starts, so its informer syncs late.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(group = "late.opkit.dev", version = "v1", kind = "Gizmo", namespaced)]
    pub(super) struct GizmoSpec {
        pub size: i64,
    }
}

fn labelled(key: &str) -> impl Fn(&Event<'_>) -> bool + Send + Sync + 'static {
    let key = key.to_string();
    move |e: &Event<'_>| {
        let meta = match e {
            Event::Create(m) | Event::Delete(m) => m,
            Event::Update { new, .. } => new,
        };
        meta.labels.as_ref().is_some_and(|l| l.contains_key(&key))
    }
}

/// What the first reconcile saw of the cache.
#[derive(Debug, Default, Clone)]
struct FirstLook {
    configmaps: usize,
    secrets: usize,
    gizmos_synced: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_reconcile_sees_every_cache_synced() {
    const N: usize = 40;
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    for i in 0..N {
        configmap(&cms, &format!("cm-{i:02}"), &[("pre", "yes")]).await;
        let mut s = Secret::default();
        s.metadata.name = Some(format!("s-{i:02}"));
        secrets.create(&PostParams::default(), &s).await.expect("secret");
    }
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let first: Arc<Mutex<Option<FirstLook>>> = Arc::default();
    let log = Log::default();
    let (f, l) = (first.clone(), log.clone());
    Controller::new(&mgr, move |ctx: Context<ConfigMap>| {
        let (f, l) = (f.clone(), l.clone());
        async move {
            f.lock().get_or_insert_with(|| FirstLook {
                configmaps: ctx.cache.list::<ConfigMap>().iter().filter(|c| c.metadata.labels.is_some()).count(),
                secrets: ctx.cache.list::<Secret>().len(),
                gizmos_synced: ctx.cache.informer::<late::Gizmo>().is_synced(),
            });
            l.record(&ctx.request, "");
            Ok::<_, ReconcileError>(Action::done())
        }
    })
    .owns::<Secret>()
    // The Gizmo CRD does not exist yet: this informer cannot sync until it is installed.
    .watches::<late::Gizmo>(|_| vec![])
    .build()
    .expect("build");
    let cache = mgr.cache().clone();
    let _stop = start(mgr).drop_guard();
    eventually("the ConfigMap and Secret informers to sync", || async {
        (cache.informer::<ConfigMap>().is_synced() && cache.informer::<Secret>().is_synced()).then_some(())
    })
    .await;
    assert!(log.counts().is_empty(), "reconciled before the Gizmo informer synced: {:?}", log.counts());
    env.install_crds([late::Gizmo::crd()]).await.expect("crd");
    log.wait("every pre-created object to be reconciled", |l| l.counts().len() >= N).await;
    let seen = first.lock().clone().expect("first look");
    assert_eq!(seen.configmaps, N, "the first reconcile saw a partial ConfigMap cache: {seen:?}");
    assert_eq!(seen.secrets, N, "the first reconcile saw a partial Secret cache: {seen:?}");
    assert!(seen.gizmos_synced, "the first reconcile ran before the Gizmo informer synced");
}

#[tokio::test]
async fn event_filters_add_up_and_watches_have_their_own() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let log = Log::default();
    let l = log.clone();
    Controller::new(&mgr, move |ctx: Context<ConfigMap>| {
        let l = l.clone();
        async move {
            l.record(&ctx.request, "");
            Ok::<_, ReconcileError>(Action::done())
        }
    })
    // Two global filters: both must pass (the second must not replace the first).
    .with_event_filter(labelled("a"))
    .with_event_filter(labelled("b"))
    // A watch with its own predicate, on top of the global ones.
    .watches_with::<Secret>(
        |s: &Secret| {
            vec![Request::new(format!("via-{}", s.metadata.name.clone().unwrap_or_default()), Some("default"))]
        },
        labelled("secret-ok"),
    )
    .build()
    .expect("build");
    let _stop = start(mgr).drop_guard();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    configmap(&cms, "only-a", &[("a", "1")]).await;
    configmap(&cms, "only-b", &[("b", "1")]).await;
    configmap(&cms, "both", &[("a", "1"), ("b", "1")]).await;
    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    for (name, labels) in [
        ("plain", vec![("a", "1"), ("b", "1")]),
        ("ok", vec![("a", "1"), ("b", "1"), ("secret-ok", "1")]),
        ("ok-but-not-global", vec![("secret-ok", "1")]),
    ] {
        let mut s = Secret::default();
        s.metadata.name = Some(name.into());
        s.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        secrets.create(&PostParams::default(), &s).await.expect("secret");
    }
    // Events of one source arrive in order: a last object that passes proves the
    // earlier ones were seen and dropped.
    configmap(&cms, "last", &[("a", "1"), ("b", "1")]).await;
    let mut s = Secret::default();
    s.metadata.name = Some("last".into());
    s.metadata.labels = Some([("a", "1"), ("b", "1"), ("secret-ok", "1")].map(|(k, v)| (k.into(), v.into())).into());
    secrets.create(&PostParams::default(), &s).await.expect("secret");
    log.wait_calls("last", 1).await;
    log.wait_calls("via-last", 1).await;
    assert_eq!(log.calls("both").len(), 1);
    assert_eq!(log.calls("via-ok").len(), 1);
    for dropped in ["only-a", "only-b", "via-plain", "via-ok-but-not-global"] {
        assert!(log.calls(dropped).is_empty(), "{dropped} passed the filters: {:?}", log.counts());
    }
}

#[tokio::test]
async fn owns_with_filters_only_its_children() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let log = Log::default();
    let l = log.clone();
    Controller::new(&mgr, move |ctx: Context<ConfigMap>| {
        let l = l.clone();
        async move {
            l.record(&ctx.request, "");
            Ok::<_, ReconcileError>(Action::done())
        }
    })
    .owns_with::<Secret>(LabelsChanged)
    .build()
    .expect("build");
    let _stop = start(mgr).drop_guard();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let owner = configmap(&cms, "owner", &[]).await;
    let marker = configmap(&cms, "marker", &[]).await;
    log.wait_calls("owner", 1).await;
    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    let child = |name: &str, owner: &ConfigMap| {
        let mut s = Secret::default();
        s.metadata.name = Some(name.into());
        s.metadata.owner_references = Some(vec![owner.controller_owner_ref(&()).expect("owner ref")]);
        s
    };
    secrets.create(&PostParams::default(), &child("child", &owner)).await.expect("child");
    log.wait_calls("owner", 2).await;
    // A data-only change does not pass LabelsChanged; a label change does.
    let data = serde_json::json!({"stringData": {"k": "v"}});
    secrets.patch("child", &PatchParams::default(), &Patch::Merge(&data)).await.expect("data");
    secrets.create(&PostParams::default(), &child("marker-child", &marker)).await.expect("marker child");
    log.wait_calls("marker", 2).await;
    assert_eq!(log.calls("owner").len(), 2, "a data-only change of a child passed LabelsChanged");
    let relabel = serde_json::json!({"metadata": {"labels": {"x": "y"}}});
    secrets.patch("child", &PatchParams::default(), &Patch::Merge(&relabel)).await.expect("relabel");
    log.wait_calls("owner", 3).await;
}

#[tokio::test]
async fn duplicate_controller_names_are_rejected() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let noop = |_: Context<ConfigMap>| async { Ok::<_, ReconcileError>(Action::done()) };
    Controller::new(&mgr, noop).build().expect("first");
    match Controller::new(&mgr, noop).build() {
        Err(BuildError::DuplicateName(name)) => assert_eq!(name, "configmap"),
        other => panic!("expected a duplicate name error, got {other:?}"),
    }
    Controller::new(&mgr, noop).named("configmap-2").build().expect("renamed");
    let noop_secret = |_: Context<Secret>| async { Ok::<_, ReconcileError>(Action::done()) };
    assert!(matches!(
        Controller::new(&mgr, noop_secret).named("configmap-2").build(),
        Err(BuildError::DuplicateName(_))
    ));
}

#[tokio::test]
async fn channel_triggers_and_reconcile_all() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let log = Log::default();
    let l = log.clone();
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let controller = Controller::new(&mgr, move |ctx: Context<ConfigMap>| {
        let l = l.clone();
        async move {
            l.record(&ctx.request, if ctx.object.is_some() { "cached" } else { "absent" });
            Ok::<_, ReconcileError>(Action::done())
        }
    })
    .watches_channel(rx);
    let handle = controller.handle();
    controller.build().expect("build");
    assert_eq!(handle.reconcile_all(), 0, "nothing is enqueued before the controller runs");
    let _stop = start(mgr).drop_guard();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    configmap(&cms, "a", &[]).await;
    configmap(&cms, "b", &[]).await;
    log.wait_calls("a", 1).await;
    log.wait_calls("b", 1).await;
    tx.send(Request::new("from-outside", Some("default"))).await.expect("send");
    log.wait_calls("from-outside", 1).await;
    assert_eq!(log.calls("from-outside")[0].1, "absent");
    assert_eq!(handle.reconcile_all(), 2);
    log.wait_calls("a", 2).await;
    log.wait_calls("b", 2).await;
}

/// The operator's own state.
struct Settings {
    note: String,
}

#[tokio::test]
async fn reconciles_get_the_state_and_a_recorder() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let log = Log::default();
    let l = log.clone();
    async fn reconcile(ctx: Context<ConfigMap, Settings>, log: Log) -> opkit::ReconcileResult {
        // The controller's event recorder (its use is covered by the events tests).
        let _recorder: &opkit::events::Recorder = &ctx.recorder;
        log.record(&ctx.request, ctx.state.note.clone());
        Ok(Action::done())
    }
    let noop = |_: Context<ConfigMap, Settings>| async { Ok::<_, ReconcileError>(Action::done()) };
    assert!(matches!(Controller::new(&mgr, noop).named("stateless").build(), Err(BuildError::MissingState { .. })));
    Controller::new(&mgr, move |ctx| reconcile(ctx, l.clone()))
        .with_state(Arc::new(Settings { note: "from the state".into() }))
        .build()
        .expect("build");
    let _stop = start(mgr).drop_guard();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    configmap(&cms, "stateful", &[]).await;
    log.wait_calls("stateful", 1).await;
    assert_eq!(log.calls("stateful")[0].1, "from the state");
}
