//! Every reconcile runs inside a `reconcile` tracing span carrying the controller's name,
//! the object's namespace and name, and a `reconcileID` unique to that reconcile, as
//! controller-runtime's per-reconcile logger does. This binary installs a global
//! subscriber that captures those spans, so it holds this one test only.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use opkit::{Action, Context, Controller, Manager, ManagerOptions};
use opkit_testenv::TestEnv;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};
use tracing_subscriber::{Layer, Registry};

type Fields = BTreeMap<String, String>;

/// Records the fields of every span named `reconcile`.
#[derive(Clone, Default)]
struct ReconcileSpans(Arc<Mutex<Vec<Fields>>>);

struct FieldValues(Fields);

impl Visit for FieldValues {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber> Layer<S> for ReconcileSpans {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: LayerContext<'_, S>) {
        if attrs.metadata().name() == "reconcile" {
            let mut values = FieldValues(Fields::new());
            attrs.record(&mut values);
            self.0.lock().push(values.0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_reconcile_runs_in_a_span_with_its_object_and_a_unique_id() {
    let spans = ReconcileSpans::default();
    tracing::subscriber::set_global_default(Registry::default().with(spans.clone())).expect("first subscriber");

    let env = TestEnv::builder().without_controllers().start().await.expect("testenv");
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let calls = Arc::new(AtomicUsize::new(0));
    let inside_span = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(Notify::new());
    let (c, inside, d) = (calls.clone(), inside_span.clone(), done.clone());
    Controller::new(&mgr, move |ctx: Context<ConfigMap>| {
        let (c, inside, d) = (c.clone(), inside.clone(), d.clone());
        async move {
            if tracing::Span::current().metadata().map(|m| m.name()) == Some("reconcile") {
                inside.fetch_add(1, Ordering::SeqCst);
            }
            // Reconcile `traced` twice (a requeue), every other object once.
            let n = if ctx.request.name == "traced" { c.fetch_add(1, Ordering::SeqCst) + 1 } else { 0 };
            if n == 1 {
                return Ok(Action::requeue_after(Duration::from_millis(10)));
            }
            if n == 2 {
                d.notify_one();
            }
            Ok(Action::done())
        }
    })
    .named("traced-configmaps")
    .build()
    .expect("build");
    let stop = CancellationToken::new();
    let running = tokio::spawn(mgr.run_until(stop.clone()));

    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("traced".into());
    cms.create(&PostParams::default(), &cm).await.expect("create");
    tokio::time::timeout(Duration::from_secs(20), done.notified()).await.expect("two reconciles of traced");
    stop.cancel();
    running.await.expect("join").expect("manager");

    let traced: Vec<Fields> =
        spans.0.lock().iter().filter(|f| f.get("name").map(String::as_str) == Some("traced")).cloned().collect();
    assert_eq!(traced.len(), 2, "one span per reconcile: {traced:?}");
    for fields in &traced {
        assert_eq!(fields.get("controller").map(String::as_str), Some("traced-configmaps"), "{fields:?}");
        assert_eq!(fields.get("namespace").map(String::as_str), Some("default"), "{fields:?}");
        let id = fields.get("reconcileID").expect("reconcileID");
        assert_eq!((id.len(), id.matches('-').count()), (36, 4), "uuid-formatted reconcileID: {id}");
    }
    assert_ne!(traced[0]["reconcileID"], traced[1]["reconcileID"], "each reconcile has its own id");
    assert!(inside_span.load(Ordering::SeqCst) >= 2, "the reconcile future runs inside its span");
}
