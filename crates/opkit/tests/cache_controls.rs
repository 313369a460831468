//! The cache's controls (controller-runtime's `cache.Options`) on a real (in-process) API
//! server: managedFields removed by default, per-kind transforms, label and field
//! selectors and namespaces, metadata-only `Owns`, and a budget of objects per kind.

use crate::common;

use std::sync::Arc;

use common::{Log, WAIT, configmap, start};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use opkit::cache::ByKind;
use opkit::{Action, Cache, CacheScope, Context, Controller, Manager, ManagerOptions, ReconcileError};
use opkit_testenv::TestEnv;
use tokio_util::sync::CancellationToken;

/// A started cache with a ConfigMap informer, synced.
async fn synced_cache(env: &TestEnv, scope: CacheScope) -> (Cache, tokio_util::sync::DropGuard) {
    let cache = Cache::new(env.client(), scope);
    let _ = cache.informer::<ConfigMap>();
    let _ = cache.informer::<Secret>();
    let stop = CancellationToken::new();
    cache.start(stop.clone());
    assert!(cache.wait_for_sync(WAIT).await, "cache sync");
    (cache, stop.drop_guard())
}

#[tokio::test]
async fn managed_fields_are_removed_unless_kept_and_kinds_have_their_own_transform() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let apply = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied", "annotations": {"note": "long"}}, "data": {"k": "v"}});
    api.patch("applied", &PatchParams::apply("test"), &Patch::Apply(&apply)).await.expect("apply");
    let stored = api.get("applied").await.expect("get");
    assert!(stored.metadata.managed_fields.is_some_and(|m| !m.is_empty()), "the server records managedFields");

    let (default, _g1) = synced_cache(&env, CacheScope::default()).await;
    let cached = default.get::<ConfigMap>("applied", Some("default")).expect("cached");
    assert!(cached.metadata.managed_fields.is_none(), "removed by default");
    assert!(cached.metadata.annotations.is_some(), "nothing else is removed");

    let keep =
        CacheScope::default().keeping_managed_fields().transform::<ConfigMap>(|cm| cm.metadata.annotations = None);
    let (kept, _g2) = synced_cache(&env, keep).await;
    let cached = kept.get::<ConfigMap>("applied", Some("default")).expect("cached");
    assert!(cached.metadata.managed_fields.is_some(), "kept when asked");
    assert!(cached.metadata.annotations.is_none(), "the kind's own transform ran");
    assert_eq!(cached.data.as_ref().and_then(|d| d.get("k")).map(String::as_str), Some("v"));
}

#[tokio::test]
async fn kinds_have_their_own_selectors_and_namespaces() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mut ns = Namespace::default();
    ns.metadata.name = Some("other".into());
    Api::<Namespace>::all(env.client()).create(&PostParams::default(), &ns).await.expect("namespace");
    let here: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    configmap(&here, "web-1", &[("app", "web")]).await;
    configmap(&here, "web-skip", &[("app", "web")]).await;
    configmap(&here, "db-1", &[("app", "db")]).await;
    for ns in ["default", "other"] {
        let mut s = Secret::default();
        s.metadata.name = Some(format!("in-{ns}"));
        Api::<Secret>::namespaced(env.client(), ns).create(&PostParams::default(), &s).await.expect("secret");
    }

    let scope = CacheScope::default()
        .by_kind::<ConfigMap>(ByKind::default().label_selector("app=web").field_selector("metadata.name!=web-skip"))
        .by_kind::<Secret>(ByKind::default().namespaces(vec!["other".into()]));
    let (cache, _g) = synced_cache(&env, scope).await;
    let mut cms: Vec<String> = cache.list::<ConfigMap>().iter().filter_map(|c| c.metadata.name.clone()).collect();
    cms.sort();
    assert_eq!(cms, ["web-1"]);
    let secrets: Vec<String> = cache.list::<Secret>().iter().filter_map(|s| s.metadata.name.clone()).collect();
    assert_eq!(secrets, ["in-other"]);
}

/// Records the parent's reconciles.
async fn record(ctx: Context<Secret, Log>) -> Result<Action, ReconcileError> {
    ctx.state.record(&ctx.request, "reconciled");
    Ok(Action::done())
}

#[tokio::test]
async fn a_metadata_only_owns_cache_holds_no_data_and_still_maps_children_to_owners() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mut parent = Secret::default();
    parent.metadata.name = Some("parent".into());
    let parent = Api::<Secret>::namespaced(env.client(), "default")
        .create(&PostParams::default(), &parent)
        .await
        .expect("parent");
    let mut child = ConfigMap::default();
    child.metadata.name = Some("child".into());
    child.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Secret".into(),
        name: "parent".into(),
        uid: parent.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    child.data = Some([("payload".to_string(), "x".repeat(8192))].into());
    let children: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    children.create(&PostParams::default(), &child).await.expect("child");

    let log = Log::default();
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    Controller::new(&mgr, record)
        .with_state(Arc::new(log.clone()))
        .owns_metadata::<ConfigMap>()
        .build()
        .expect("controller");
    let _stop = start(mgr.clone()).drop_guard();
    log.wait_calls("parent", 1).await;

    let cached: Vec<Arc<PartialObjectMeta<ConfigMap>>> = mgr.cache().metadata_informer::<ConfigMap>().list();
    let cached = cached.iter().find(|c| c.metadata.name.as_deref() == Some("child")).expect("the child is cached");
    let as_json = serde_json::to_value(&**cached).expect("serialises");
    assert!(as_json.get("data").is_none(), "metadata only: {as_json}");
    assert!(cached.metadata.owner_references.as_ref().is_some_and(|o| o[0].name == "parent"));

    // A change of the child reconciles its owner.
    let patch = serde_json::json!({"metadata": {"labels": {"touched": "yes"}}});
    children.patch("child", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("touch");
    log.wait_calls("parent", 2).await;
}

async fn nothing(_ctx: Context<ConfigMap>) -> Result<Action, ReconcileError> {
    Ok(Action::done())
}

#[tokio::test]
async fn a_cache_over_its_budget_stops_the_manager_naming_the_kind_and_the_budget() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for i in 0..3 {
        configmap(&api, &format!("cm-{i}"), &[]).await;
    }
    let opts = ManagerOptions {
        cache: CacheScope::namespaces(vec!["default".into()]).by_kind::<ConfigMap>(ByKind::default().max_objects(2)),
        ..ManagerOptions::default()
    };
    let mgr = Manager::new(env.client(), opts);
    Controller::new(&mgr, nothing).build().expect("controller");
    let result = tokio::time::timeout(WAIT, mgr.run_until(CancellationToken::new())).await.expect("the manager stops");
    let message = result.expect_err("over budget").to_string();
    assert!(message.contains("ConfigMap") && message.contains("budget of 2"), "{message}");
}

#[tokio::test]
async fn a_selector_the_server_rejects_stops_the_manager_naming_the_kind_and_the_selector() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    for (selector, server_says) in [
        (ByKind::default().field_selector("spec.replicas=1"), r#"field selector "spec.replicas=1""#),
        (ByKind::default().label_selector("app in (web"), r#"label selector "app in (web""#),
    ] {
        let opts = ManagerOptions {
            cache: CacheScope::namespaces(vec!["default".into()]).by_kind::<ConfigMap>(selector),
            ..ManagerOptions::default()
        };
        let mgr = Manager::new(env.client(), opts);
        Controller::new(&mgr, nothing).build().expect("controller");
        // Well inside the 2-minute cache sync timeout, which is how it failed before.
        let result =
            tokio::time::timeout(WAIT, mgr.run_until(CancellationToken::new())).await.expect("the manager stops");
        let message = result.expect_err("the selector is rejected").to_string();
        assert!(message.contains("the cache of ConfigMap cannot sync"), "{message}");
        assert!(message.contains("rejects its list") && message.contains(server_says), "{message}");
    }
}
