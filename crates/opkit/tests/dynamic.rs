//! Controllers and the cache for kinds known only at run time (`DynamicObject` with an
//! `ApiResource`), on a real (in-process) API server.

use crate::common;

use common::{Log, configmap};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::Scope;
use kube::{CustomResourceExt, Resource, ResourceExt};
use opkit::{Action, Context, Controller, Manager, ManagerOptions, ReconcileError};
use opkit_testenv::TestEnv;
use tokio_util::sync::CancellationToken;

mod crd {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// Only used to install the CRD; the controller sees `DynamicObject`s.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(group = "dyn.opkit.dev", version = "v1", kind = "Thing", namespaced)]
    pub(super) struct ThingSpec {
        pub colour: String,
    }
}

fn thing(ar: &ApiResource, name: &str, colour: &str) -> DynamicObject {
    DynamicObject::new(name, ar).data(serde_json::json!({"spec": {"colour": colour}}))
}

#[tokio::test]
async fn reconciles_dynamic_objects_of_a_crd() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    env.install_crds([crd::Thing::crd()]).await.expect("crd");
    // What a declarative operator would learn at run time (from discovery or a CRD).
    let ar = ApiResource {
        group: "dyn.opkit.dev".into(),
        version: "v1".into(),
        api_version: "dyn.opkit.dev/v1".into(),
        kind: "Thing".into(),
        plural: "things".into(),
    };
    let things: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &ar);
    let red = things.create(&PostParams::default(), &thing(&ar, "red", "red")).await.expect("create red");

    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let log = Log::default();
    let l = log.clone();
    Controller::new_dynamic(&mgr, ar.clone(), Scope::Namespaced, move |ctx: Context<DynamicObject>| {
        let l = l.clone();
        async move {
            let Some(obj) = ctx.object.as_ref() else { return Ok(Action::done()) };
            let colour = obj.data["spec"]["colour"].as_str().unwrap_or_default().to_string();
            l.record(&ctx.request, colour.clone());
            if !obj.labels().contains_key("colour") {
                let patch = serde_json::json!({"metadata": {"labels": {"colour": colour}}});
                ctx.dynamic_api().patch(&ctx.request.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
            }
            Ok::<_, ReconcileError>(Action::done())
        }
    })
    .owns::<ConfigMap>()
    .build()
    .expect("build");
    let cache = mgr.cache().clone();
    let stop = CancellationToken::new();
    tokio::spawn(mgr.run_until(stop.clone()));
    let _stop = stop.drop_guard();

    log.wait_calls("red", 1).await;
    things.create(&PostParams::default(), &thing(&ar, "blue", "blue")).await.expect("create blue");
    log.wait_calls("blue", 1).await;
    assert_eq!(log.calls("blue")[0].1, "blue");
    // The patch through ctx.dynamic_api() lands, and the cache follows it.
    let labelled = kube::runtime::wait::await_condition(things.clone(), "blue", |o: Option<&DynamicObject>| {
        o.is_some_and(|o| o.labels().get("colour").map(String::as_str) == Some("blue"))
    });
    tokio::time::timeout(common::WAIT, labelled).await.expect("labelled in time").expect("watch");
    let informer = cache.dynamic_informer(&ar, Scope::Namespaced);
    assert!(std::ptr::eq(&*informer, &*cache.dynamic_informer(&ar, Scope::Namespaced)), "one informer per resource");
    log.wait("the cache to hold both things", |_| informer.list_in("default").len() == 2).await;

    // A typed child owned by a dynamic owner enqueues the owner.
    let before = log.calls("red").len();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut child = ConfigMap::default();
    child.metadata.name = Some("red-child".into());
    child.metadata.owner_references = Some(vec![red.controller_owner_ref(&ar).expect("owner ref")]);
    cms.create(&PostParams::default(), &child).await.expect("child");
    log.wait_calls("red", before + 1).await;
    configmap(&cms, "unrelated", &[]).await;
    assert!(log.calls("unrelated").is_empty() && log.calls("red-child").is_empty());
}
