//! Read-your-own-writes on a real (in-process) API server whose watch events the test
//! holds back: a reconcile does not run on a cache older than the writes the previous
//! reconcile of the same object made, and without the guard it does (the same test,
//! opted out, sees the duplicate a stale cache causes).

use crate::common;

use std::sync::Arc;

use common::{Log, WAIT, eventually, start};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::Selector;
use opkit::{Action, Context, Controller, Manager, ManagerOptions, ReconcileError, Request};
use opkit_testenv::{HeldWatchEvents, TestEnv, WatchEventFilter};

const NS: &str = "default";

/// The children of parent `name`: ConfigMaps labelled `parent=<name>`.
fn children_of(ctx: &Context<Secret, Log>) -> Vec<Arc<ConfigMap>> {
    let selector: Selector = kube::core::Expression::Equal("parent".into(), ctx.request.name.clone()).into();
    ctx.cache.list_matching::<ConfigMap>(Some(NS), &selector)
}

/// Ensures parent Secrets have one child ConfigMap, named by the server (generateName),
/// as a reconciler that trusts its cache writes it: a stale cache makes a second one.
async fn ensure_one_child(ctx: Context<Secret, Log>) -> Result<Action, ReconcileError> {
    let children = children_of(&ctx);
    ctx.state.record(&ctx.request, format!("children={}", children.len()));
    if children.is_empty() {
        let mut child = ConfigMap::default();
        child.metadata.generate_name = Some(format!("{}-child-", ctx.request.name));
        child.metadata.labels = Some([("parent".to_string(), ctx.request.name.clone())].into());
        ctx.api_for::<ConfigMap>().create(&PostParams::default(), &child).await?;
        ctx.state.record(&ctx.request, "created");
    }
    Ok(Action::done())
}

/// Deletes every child of a parent Secret: a stale cache makes it delete one twice.
async fn delete_children(ctx: Context<Secret, Log>) -> Result<Action, ReconcileError> {
    let children = children_of(&ctx);
    ctx.state.record(&ctx.request, format!("children={}", children.len()));
    for child in children {
        let name = child.metadata.name.clone().unwrap_or_default();
        ctx.state.record(&ctx.request, format!("delete {name}"));
        ctx.api_for::<ConfigMap>().delete(&name, &DeleteParams::default()).await?;
    }
    Ok(Action::done())
}

/// Reconciles a parent when one of its children changes.
fn parent_of(child: &ConfigMap) -> Vec<Request> {
    child
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("parent"))
        .map(|p| Request::new(p, Some(NS)))
        .into_iter()
        .collect()
}

async fn secret(env: &TestEnv, name: &str) {
    let mut s = Secret::default();
    s.metadata.name = Some(name.into());
    Api::<Secret>::namespaced(env.client(), NS).create(&PostParams::default(), &s).await.expect("parent");
}

/// Touches the parent, so it is reconciled again.
async fn touch(env: &TestEnv, name: &str, n: u32) {
    let patch = serde_json::json!({"metadata": {"annotations": {"touched": n.to_string()}}});
    Api::<Secret>::namespaced(env.client(), NS)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("touch the parent");
}

async fn child_count(env: &TestEnv, parent: &str) -> usize {
    let lp = ListParams::default().labels(&format!("parent={parent}"));
    Api::<ConfigMap>::namespaced(env.client(), NS).list(&lp).await.expect("list children").items.len()
}

/// A metric's value in the manager's exposition (0 when absent).
fn metric(mgr: &Manager, name: &str) -> f64 {
    mgr.metrics()
        .encode()
        .lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

async fn wait_metric(mgr: &Manager, name: &str, at_least: f64) {
    eventually(&format!("{name} >= {at_least}"), || async { (metric(mgr, name) >= at_least).then_some(()) }).await;
}

/// What the first two tests share: a manager running `ensure_one_child` (with the guard
/// or without), the first reconcile of parent `p` done, its child's ADDED event held, and
/// the parent touched so it is reconciled again on a cache without the child.
struct ChildCreated {
    env: TestEnv,
    mgr: Manager,
    log: Log,
    held: HeldWatchEvents,
    _stop: tokio_util::sync::DropGuard,
}

async fn child_created_while_its_event_is_held(guarded: bool) -> ChildCreated {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let log = Log::default();
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let controller =
        Controller::new(&mgr, ensure_one_child).with_state(Arc::new(log.clone())).watches::<ConfigMap>(parent_of);
    let controller = if guarded { controller } else { controller.without_read_your_writes() };
    controller.build().expect("controller");
    let stop = start(mgr.clone()).drop_guard();
    assert!(mgr.cache().wait_for_sync(WAIT).await, "cache sync");

    // The child's ADDED event is held: the cache will not show the child.
    let held = env.hold_watch_events(WatchEventFilter::new("", "configmaps").in_namespace(NS).of_type("ADDED"));
    secret(&env, "p").await;
    log.wait("the first reconcile to create the child", |l| l.calls("p").iter().any(|(_, n)| n == "created")).await;
    assert!(held.wait_held(1, WAIT).await, "the child's event is held");
    touch(&env, "p", 1).await;
    ChildCreated { env, mgr, log, held, _stop: stop }
}

#[tokio::test]
async fn a_reconcile_waits_for_the_cache_to_show_the_child_it_created() {
    let ChildCreated { env, mgr, log, held, _stop } = child_created_while_its_event_is_held(true).await;
    // Reconciling again now would read a cache without the child: it is requeued instead.
    wait_metric(&mgr, "opkit_read_your_writes_stale_requeues_total{controller=\"secret\"}", 1.0).await;
    assert_eq!(log.calls("p").len(), 2, "only the first reconcile ran: {:?}", log.calls("p"));
    assert_eq!(child_count(&env, "p").await, 1);

    held.release();
    log.wait("a reconcile that sees the child", |l| l.calls("p").iter().any(|(_, n)| n == "children=1")).await;
    assert_eq!(child_count(&env, "p").await, 1, "no duplicate child: {:?}", log.calls("p"));
    assert!(metric(&mgr, "opkit_read_your_writes_waits_total{controller=\"secret\"}") >= 1.0);
}

#[tokio::test]
async fn without_the_guard_the_stale_cache_makes_a_duplicate() {
    let ChildCreated { env, log, held, _stop, .. } = child_created_while_its_event_is_held(false).await;
    log.wait("a second create", |l| l.calls("p").iter().filter(|(_, n)| n == "created").count() == 2).await;
    assert_eq!(child_count(&env, "p").await, 2, "the stale cache made a duplicate");
    held.release();
}

#[tokio::test]
async fn a_delete_is_remembered_until_the_cache_shows_it() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let children: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let mut child = ConfigMap::default();
    child.metadata.name = Some("only-child".into());
    child.metadata.labels = Some([("parent".to_string(), "p".to_string())].into());
    children.create(&PostParams::default(), &child).await.expect("child");

    let log = Log::default();
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    Controller::new(&mgr, delete_children)
        .with_state(Arc::new(log.clone()))
        .watches::<ConfigMap>(parent_of)
        .build()
        .expect("controller");
    let _stop = start(mgr.clone()).drop_guard();
    assert!(mgr.cache().wait_for_sync(WAIT).await, "cache sync");

    let held = env.hold_watch_events(WatchEventFilter::new("", "configmaps").named("only-child").of_type("DELETED"));
    secret(&env, "p").await;
    log.wait("the child's delete", |l| l.calls("p").iter().any(|(_, n)| n == "delete only-child")).await;
    assert!(held.wait_held(1, WAIT).await, "the delete's event is held");

    // The cache still holds the child; a reconcile now would delete it again (a 404).
    touch(&env, "p", 1).await;
    wait_metric(&mgr, "opkit_read_your_writes_stale_requeues_total{controller=\"secret\"}", 1.0).await;
    held.release();
    touch(&env, "p", 2).await;
    log.wait("a reconcile after the delete is seen", |l| l.calls("p").iter().any(|(_, n)| n == "children=0")).await;
    let deletes = log.calls("p").iter().filter(|(_, n)| n.starts_with("delete")).count();
    assert_eq!(deletes, 1, "deleted once: {:?}", log.calls("p"));
    assert_eq!(metric(&mgr, "controller_runtime_reconcile_errors_total{controller=\"secret\"}"), 0.0);
}
