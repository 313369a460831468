//! Perturbation testing of opkit operators (opkit_testenv::perturb): small operators,
//! each with a bug seeded from one Sieve found in a real controller, and a correct twin
//! of each. Every seeded bug is found and classified; every twin passes clean.
//!
//! Each fixture reconciles ConfigMaps labelled `fixture=parent` into a child ConfigMap
//! and marks the parent `fixture/ready` when done; the workload creates one parent and
//! waits for that mark.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::{Client, ResourceExt};
use opkit::{Action, Context, Controller, Manager, ManagerOptions, ReconcileError};
use opkit_testenv::perturb::{Oracle, Perturber, PlanClass};
use tokio_util::sync::CancellationToken;

const NS: &str = "default";
const READY: &str = "fixture/ready";

/// The seeded bugs, and their correct twins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fixture {
    /// Marks its progress on the parent before it creates the child, and skips the create
    /// when the mark is there: a crash between the two writes (or a failed create) leaves
    /// no child, ever (Sieve's intermediate-state bugs, e.g. cass-operator's).
    MarkBeforeCreate,
    /// Creates the child first, tolerating AlreadyExists, then marks the parent.
    CreateThenMark,
    /// Creates the child by `generateName` and records its name after: a create whose
    /// answer is lost is made again, and the first child leaks.
    GeneratedName,
    /// Creates the child under a fixed name: a repeated create is AlreadyExists.
    FixedName,
    /// Counts the parent's children in its cache and creates the missing ones by
    /// `generateName`: a cache that lags behind its own creates makes it create again
    /// (Sieve's stale-state bugs, e.g. a ReplicaSet without expectations).
    CountChildrenInCache,
    /// Names its children `<parent>-0`, `<parent>-1`: a create made again is
    /// AlreadyExists.
    NameChildrenByIndex,
    /// Stamps the parent with the time of every reconcile: its own write triggers the
    /// next reconcile, forever (a hot loop).
    StampEveryReconcile,
    /// Stamps only what changed.
    StampOnce,
}

/// What a reconcile reads children from: for the counting fixtures, a kube-rs reflector
/// that lists with `any_semantic()` and no pages (resourceVersion=0, served from the API
/// server's watch cache, as client-go's informers list), as kube's docs suggest for
/// large clusters.
type Children = Option<kube::runtime::reflector::Store<ConfigMap>>;

async fn reconcile(fixture: Fixture, children: Children, ctx: Context<ConfigMap>) -> Result<Action, ReconcileError> {
    let Some(parent) = ctx.object.as_ref() else { return Ok(Action::done()) };
    if parent.labels().get("fixture").map(String::as_str) != Some("parent") {
        return Ok(Action::done());
    }
    let api: Api<ConfigMap> = ctx.api();
    let name = parent.name_any();
    let annotations = parent.annotations();
    let annotate = |values: serde_json::Value| {
        let patch = serde_json::json!({"metadata": {"annotations": values}});
        let (api, name) = (&api, &name);
        async move { api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(|_| ()) }
    };
    match fixture {
        Fixture::MarkBeforeCreate => {
            if annotations.contains_key(READY) {
                return Ok(Action::done());
            }
            if !annotations.contains_key("fixture/child-created") {
                annotate(serde_json::json!({"fixture/child-created": "true"})).await?;
                create_child(&api, parent, Some(&format!("{name}-child")), None).await?;
            }
            annotate(serde_json::json!({READY: "true"})).await?;
        }
        Fixture::CreateThenMark | Fixture::FixedName => {
            if annotations.contains_key(READY) {
                return Ok(Action::done());
            }
            create_child(&api, parent, Some(&format!("{name}-child")), None).await?;
            annotate(serde_json::json!({READY: "true"})).await?;
        }
        Fixture::GeneratedName => {
            if annotations.contains_key(READY) {
                return Ok(Action::done());
            }
            let child = create_child(&api, parent, None, Some(&format!("{name}-"))).await?;
            annotate(serde_json::json!({"fixture/child": child, READY: "true"})).await?;
        }
        Fixture::CountChildrenInCache | Fixture::NameChildrenByIndex => {
            if annotations.contains_key(READY) {
                return Ok(Action::done());
            }
            let store = children.as_ref().ok_or_else(|| ReconcileError::terminal("no reflector"))?;
            let children = store.state().into_iter().filter(|c| is_child_of(c, &name)).count();
            for i in children..CHILDREN {
                match fixture {
                    Fixture::CountChildrenInCache => {
                        create_child(&api, parent, None, Some(&format!("{name}-"))).await?
                    }
                    _ => create_child(&api, parent, Some(&format!("{name}-{i}")), None).await?,
                };
            }
            annotate(serde_json::json!({READY: "true"})).await?;
        }
        Fixture::StampEveryReconcile | Fixture::StampOnce => {
            if fixture == Fixture::StampOnce && annotations.contains_key(READY) {
                return Ok(Action::done());
            }
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            annotate(serde_json::json!({"fixture/reconciled-at": now.as_nanos().to_string(), READY: "true"})).await?;
        }
    }
    Ok(Action::done())
}

/// How many children [`Fixture::CountChildrenInCache`] and its twin make.
const CHILDREN: usize = 2;

/// Whether `cm` is a child of the parent `parent`.
fn is_child_of(cm: &ConfigMap, parent: &str) -> bool {
    cm.labels().get("fixture").map(String::as_str) == Some("child") && cm.name_any().starts_with(&format!("{parent}-"))
}

/// Creates the parent's child (by `name`, or by `generate_name`); an existing one is
/// kept. Returns its name.
async fn create_child(
    api: &Api<ConfigMap>,
    parent: &ConfigMap,
    name: Option<&str>,
    generate_name: Option<&str>,
) -> Result<String, kube::Error> {
    let mut child = ConfigMap::default();
    child.metadata.name = name.map(String::from);
    child.metadata.generate_name = generate_name.map(String::from);
    child.metadata.labels = Some(BTreeMap::from([("fixture".to_string(), "child".to_string())]));
    child.data = parent.data.clone();
    match api.create(&PostParams::default(), &child).await {
        Ok(created) => Ok(created.name_any()),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(name.unwrap_or_default().to_string()),
        Err(e) => Err(e),
    }
}

/// The operator: an opkit manager with the fixture's controller, run until killed.
async fn operator(fixture: Fixture, client: Client) {
    let children = match fixture {
        Fixture::CountChildrenInCache | Fixture::NameChildrenByIndex => Some(reflect_children(client.clone()).await),
        _ => None,
    };
    let mgr = Manager::new(client, ManagerOptions::default());
    let built = Controller::new(&mgr, move |ctx: Context<ConfigMap>| reconcile(fixture, children.clone(), ctx)).build();
    if let Err(e) = built {
        return eprintln!("building the controller: {e}");
    }
    let _ = mgr.run_until(CancellationToken::new()).await;
}

/// A reflector of the namespace's ConfigMaps, listing with `any_semantic()` unpaginated,
/// synced.
async fn reflect_children(client: Client) -> kube::runtime::reflector::Store<ConfigMap> {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, reflector, watcher};
    let (reader, writer) = reflector::store();
    // kube sends resourceVersion=0 only on an unpaginated list.
    let config = watcher::Config { page_size: None, ..watcher::Config::default().any_semantic() };
    let stream = reflector(writer, watcher(Api::<ConfigMap>::namespaced(client, NS), config));
    tokio::spawn(stream.default_backoff().for_each(|_| async {}));
    let _ = reader.wait_until_ready().await;
    reader
}

/// The workload: one parent, until it is marked ready.
async fn workload(client: Client) -> Result<(), String> {
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    let mut parent = ConfigMap::default();
    parent.metadata.name = Some("app".into());
    parent.metadata.labels = Some(BTreeMap::from([("fixture".to_string(), "parent".to_string())]));
    parent.data = Some(BTreeMap::from([("size".to_string(), "3".to_string())]));
    api.create(&PostParams::default(), &parent).await.map_err(|e| format!("creating the parent: {e}"))?;
    let ready = |cm: Option<&ConfigMap>| cm.is_some_and(|cm| cm.annotations().contains_key(READY));
    await_condition(api, "app", ready).await.map_err(|e| format!("waiting for the parent to be ready: {e}"))?;
    Ok(())
}

fn perturber(fixture: Fixture, classes: &[PlanClass]) -> Perturber {
    Perturber::new(move |client| operator(fixture, client), workload)
        .compare::<ConfigMap>()
        .classes(classes)
        .workload_timeout(Duration::from_secs(20))
        .settle(Duration::from_millis(300), Duration::from_secs(3))
}

#[tokio::test]
async fn a_crash_between_marking_progress_and_creating_the_child_is_found_and_its_twin_passes() {
    let buggy = perturber(Fixture::MarkBeforeCreate, &[PlanClass::IntermediateState]).run().await.expect("run");
    eprintln!("{}", buggy.render());
    assert_eq!(buggy.learned_writes, 3);
    let found = buggy.found();
    assert!(found.contains(&(Some(PlanClass::IntermediateState), Oracle::EndState)), "{}", buggy.render());
    assert!(found.contains(&(Some(PlanClass::IntermediateState), Oracle::Lifecycle)), "{}", buggy.render());
    let missing = &buggy.findings.iter().find(|f| f.oracle == Oracle::EndState).expect("end state").diff;
    assert!(missing.iter().any(|l| l.contains("configmaps/app-child: missing")), "{missing:?}");
    let plan = buggy.findings[0].plan.as_ref().expect("a plan");
    assert_eq!(plan.nth_write, 1, "the crash after the first write is the one that loses the child");

    let twin = perturber(Fixture::CreateThenMark, &[PlanClass::IntermediateState]).run().await.expect("run");
    assert_eq!(twin.plans.len(), 2);
    assert!(twin.findings.is_empty(), "{}", twin.render());
}

#[tokio::test]
async fn a_failed_create_that_is_never_retried_is_found_by_an_api_error_and_its_twin_passes() {
    let buggy = perturber(Fixture::MarkBeforeCreate, &[PlanClass::ApiError]).run().await.expect("run");
    assert!(buggy.found().contains(&(Some(PlanClass::ApiError), Oracle::EndState)), "{}", buggy.render());
    let twin = perturber(Fixture::CreateThenMark, &[PlanClass::ApiError]).run().await.expect("run");
    assert_eq!(twin.plans.len(), 3, "500 on the create; 409 and 500 on the patch");
    assert!(twin.findings.is_empty(), "{}", twin.render());
}

#[tokio::test]
async fn a_create_by_generate_name_whose_answer_is_lost_leaks_a_child_and_its_twin_passes() {
    let buggy = perturber(Fixture::GeneratedName, &[PlanClass::TimeoutAfterCommit]).run().await.expect("run");
    let found = buggy.found();
    assert!(found.contains(&(Some(PlanClass::TimeoutAfterCommit), Oracle::Lifecycle)), "{}", buggy.render());
    assert!(found.contains(&(Some(PlanClass::TimeoutAfterCommit), Oracle::EndState)), "{}", buggy.render());
    let twin = perturber(Fixture::FixedName, &[PlanClass::TimeoutAfterCommit]).run().await.expect("run");
    assert!(twin.findings.is_empty(), "{}", twin.render());
}

#[tokio::test]
async fn a_cache_lagging_behind_its_own_creates_makes_a_counting_operator_create_again_and_its_twin_passes() {
    let classes = [PlanClass::IntermediateState, PlanClass::StaleState];
    let buggy = perturber(Fixture::CountChildrenInCache, &classes).run().await.expect("run");
    let found = buggy.found();
    assert!(found.contains(&(Some(PlanClass::StaleState), Oracle::Lifecycle)), "{}", buggy.render());
    assert!(
        !found.iter().any(|(class, _)| *class == Some(PlanClass::IntermediateState)),
        "a restart on a fresh cache is safe for it: only the stale one breaks it\n{}",
        buggy.render()
    );
    let twin = perturber(Fixture::NameChildrenByIndex, &classes).run().await.expect("run");
    assert!(twin.findings.is_empty(), "{}", twin.render());
}

#[tokio::test]
async fn an_operator_that_writes_on_every_reconcile_is_a_hot_loop_and_its_twin_converges() {
    let buggy = perturber(Fixture::StampEveryReconcile, &[]).run().await.expect("run");
    eprintln!("{}", buggy.render());
    let finding = buggy.findings.first().expect("a finding");
    assert_eq!((finding.plan.as_ref(), finding.oracle), (None, Oracle::Convergence), "{}", buggy.render());
    assert!(finding.diff.iter().any(|l| l.starts_with("patch configmaps/default/app:")), "{:?}", finding.diff);
    let changing = "keeps changing: ~ configmaps/app/metadata/annotations/fixture~1reconciled-at: ";
    assert!(finding.diff.iter().any(|l| l.starts_with(changing)), "the field is named: {:?}", finding.diff);
    let twin = perturber(Fixture::StampOnce, &[]).run().await.expect("run");
    assert!(twin.findings.is_empty(), "{}", twin.render());
}
