//! Controller behaviour on a real (in-process) API server: Owns, Watches, predicates,
//! concurrency, requeue, backoff, terminal errors and panics.

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Log, configmap, env_without_root_ca, start};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{CustomResource, CustomResourceExt, Resource};
use opkit::controller::ratelimit::RateLimiter;
use opkit::predicate::GenerationChanged;
use opkit::{Action, Context, Controller, Manager, ManagerOptions, ReconcileError, Request};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A small custom resource with a status subresource.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(group = "test.opkit.dev", version = "v1", kind = "Widget", namespaced, status = "WidgetStatus")]
pub(crate) struct WidgetSpec {
    size: i64,
}

/// The status of the test's Widget kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub(crate) struct WidgetStatus {
    seen: i64,
}

#[tokio::test]
async fn owns_and_watches_enqueue_the_right_objects() {
    let env = env_without_root_ca().await;
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
    .owns::<Secret>()
    .watches::<Secret>(|s: &Secret| {
        s.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("for"))
            .map(|target| vec![Request::new(target.clone(), s.metadata.namespace.as_deref())])
            .unwrap_or_default()
    })
    .build()
    .expect("unique controller name");
    let _stop = start(mgr).drop_guard();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let owner = configmap(&cms, "owner", &[]).await;
    configmap(&cms, "mapped", &[]).await;
    log.wait_calls("owner", 1).await;
    log.wait_calls("mapped", 1).await;
    let before = (log.calls("owner").len(), log.calls("mapped").len());

    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    let mut child = Secret::default();
    child.metadata.name = Some("child".into());
    child.metadata.owner_references = Some(vec![owner.controller_owner_ref(&()).expect("owner ref")]);
    secrets.create(&PostParams::default(), &child).await.expect("child");
    log.wait_calls("owner", before.0 + 1).await;

    let mut labelled = Secret::default();
    labelled.metadata.name = Some("pointer".into());
    labelled.metadata.labels = Some([("for".to_string(), "mapped".to_string())].into());
    secrets.create(&PostParams::default(), &labelled).await.expect("labelled");
    log.wait_calls("mapped", before.1 + 1).await;
    assert!(log.calls("child").is_empty() && log.calls("pointer").is_empty(), "secrets themselves are not reconciled");
}

#[tokio::test]
async fn generation_changed_predicate_drops_status_only_updates() {
    let env = env_without_root_ca().await;
    env.install_crds([Widget::crd()]).await.expect("crd");
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let log = Log::default();
    let l = log.clone();
    Controller::new(&mgr, move |ctx: Context<Widget>| {
        let l = l.clone();
        async move {
            let generation = ctx.object.as_ref().and_then(|o| o.meta().generation).unwrap_or(0);
            l.record(&ctx.request, format!("gen={generation}"));
            Ok::<_, ReconcileError>(Action::done())
        }
    })
    .with_event_filter(GenerationChanged)
    .build()
    .expect("unique controller name");
    let _stop = start(mgr).drop_guard();
    let api: Api<Widget> = Api::namespaced(env.client(), "default");
    api.create(&PostParams::default(), &Widget::new("a", WidgetSpec { size: 1 })).await.expect("create a");
    log.wait_calls("a", 1).await;
    let status = serde_json::json!({"status": {"seen": 1}});
    api.patch_status("a", &PatchParams::default(), &Patch::Merge(&status)).await.expect("status");
    // Events arrive in order: once a later object is reconciled, the status event was seen.
    api.create(&PostParams::default(), &Widget::new("later", WidgetSpec { size: 1 })).await.expect("create later");
    log.wait_calls("later", 1).await;
    assert_eq!(log.calls("a").len(), 1, "a status-only update must not reconcile");
    api.patch("a", &PatchParams::default(), &Patch::Merge(&serde_json::json!({"spec": {"size": 2}})))
        .await
        .expect("spec");
    log.wait_calls("a", 2).await;
    assert_eq!(log.calls("a")[1].1, "gen=2");
}

#[tokio::test]
async fn concurrency_is_bounded_and_never_twice_on_one_object() {
    let env = env_without_root_ca().await;
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let active: Arc<Mutex<HashSet<String>>> = Arc::default();
    let peak = Arc::new(AtomicUsize::new(0));
    let overlap = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let log = Log::default();
    let (a, p, o, g, l) = (active.clone(), peak.clone(), overlap.clone(), gate.clone(), log.clone());
    Controller::new(&mgr, move |ctx: Context<ConfigMap>| {
        let (a, p, o, g, l) = (a.clone(), p.clone(), o.clone(), g.clone(), l.clone());
        async move {
            let name = ctx.request.name.clone();
            {
                let mut set = a.lock();
                if !set.insert(name.clone()) {
                    o.fetch_add(1, Ordering::SeqCst);
                }
                p.fetch_max(set.len(), Ordering::SeqCst);
            }
            l.record(&ctx.request, "start");
            if let Ok(permit) = g.acquire().await {
                permit.forget(); // one permit lets exactly one reconcile finish
            }
            a.lock().remove(&name);
            l.record(&ctx.request, "end");
            Ok::<_, ReconcileError>(Action::done())
        }
    })
    .max_concurrent_reconciles(2)
    .build()
    .expect("unique controller name");
    let _stop = start(mgr).drop_guard();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for i in 0..20 {
        configmap(&cms, &format!("cm-{i:02}"), &[]).await;
    }
    // Touch every object while reconciles are held, so re-adds race with processing.
    for i in 0..20 {
        let patch = serde_json::json!({"metadata": {"labels": {"touched": "yes"}}});
        cms.patch(&format!("cm-{i:02}"), &PatchParams::default(), &Patch::Merge(&patch)).await.expect("touch");
    }
    let ended = |l: &Log| {
        l.counts().len() >= 20 && (0..20).all(|i| l.calls(&format!("cm-{i:02}")).iter().any(|(_, n)| n == "end"))
    };
    // The first two reconciles block on the gate, so exactly two are in flight; then let
    // them through one at a time until every object was reconciled.
    log.wait("two reconciles in flight", |_| active.lock().len() == 2).await;
    let ends = |l: &Log| {
        (0..20).map(|i| l.calls(&format!("cm-{i:02}")).iter().filter(|(_, n)| n == "end").count()).sum::<usize>()
    };
    while !ended(&log) {
        let before = ends(&log);
        gate.add_permits(1);
        log.wait("a reconcile to finish", |l| ends(l) > before).await;
    }
    gate.add_permits(1000);
    assert_eq!(peak.load(Ordering::SeqCst), 2, "at most (and at some point exactly) 2 at once");
    assert_eq!(overlap.load(Ordering::SeqCst), 0, "one object was reconciled twice at once");
}

#[tokio::test]
async fn requeue_backoff_terminal_errors_and_panics() {
    let env = env_without_root_ca().await;
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let log = Log::default();
    let l = log.clone();
    let base = Duration::from_millis(20);
    Controller::new(&mgr, move |ctx: Context<ConfigMap>| {
        let l = l.clone();
        async move {
            let n = l.calls(&ctx.request.name).len();
            l.record(&ctx.request, "");
            match (ctx.request.name.as_str(), n) {
                ("after", 0) => Ok(Action::requeue_after(Duration::from_millis(100))),
                ("flaky", 0..=3) => Err(ReconcileError::retry(std::io::Error::other("not yet"))),
                ("doomed", _) => Err(ReconcileError::terminal(std::io::Error::other("never"))),
                ("panicky", 0) => panic!("boom"),
                _ => Ok(Action::done()),
            }
        }
    })
    .rate_limiter(RateLimiter::exponential(base, Duration::from_secs(10)))
    .max_concurrent_reconciles(4)
    .build()
    .expect("unique controller name");
    let metrics = mgr.metrics().clone();
    let _stop = start(mgr).drop_guard();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for name in ["after", "flaky", "doomed", "panicky"] {
        configmap(&cms, name, &[]).await;
    }
    log.wait_calls("after", 2).await;
    log.wait_calls("panicky", 2).await;
    log.wait_calls("flaky", 5).await;
    let times: Vec<_> = log.calls("flaky").into_iter().map(|(t, _)| t).collect();
    for (i, w) in times.windows(2).enumerate() {
        let gap = w[1] - w[0];
        assert!(gap >= base * (1 << i), "retry {i} came after {gap:?}, before its backoff {:?}", base * (1 << i));
    }
    // By now the terminal error would have been retried many times over at 20 ms.
    assert_eq!(log.calls("doomed").len(), 1, "terminal errors are not retried");
    let text = metrics.encode();
    assert!(text.contains(r#"controller_runtime_reconcile_panics_total{controller="configmap"} 1"#), "{text}");
    assert!(text.contains(r#"controller_runtime_terminal_reconcile_errors_total{controller="configmap"} 1"#), "{text}");
}
