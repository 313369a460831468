//! The garbage collector against a real opkit API server: background, foreground and
//! orphan propagation, dangling owners, cluster-scoped owners, custom resources and
//! cross-namespace references.

use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::wait::{Condition, await_condition, conditions};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use opkit_testenv::TestEnv;
use serde_json::json;

type Error = Box<dyn std::error::Error + Send + Sync>;

const WAIT: Duration = Duration::from_secs(30);

async fn wait<K>(api: &Api<K>, name: &str, cond: impl Condition<K>) -> Result<Option<K>, Error>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    Ok(tokio::time::timeout(WAIT, await_condition(api.clone(), name, cond))
        .await
        .map_err(|_| format!("timed out waiting on {name}"))??)
}

async fn gone<K>(api: &Api<K>, obj: &K) -> Result<(), Error>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let uid = obj.meta().uid.clone().unwrap_or_default();
    wait(api, &obj.name_any(), conditions::is_deleted(&uid)).await?;
    Ok(())
}

fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K, block: bool) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.name_any(),
        uid: owner.meta().uid.clone().unwrap_or_default(),
        block_owner_deletion: block.then_some(true),
        controller: None,
    }
}

fn cm(name: &str, owners: Vec<OwnerReference>) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.owner_references = (!owners.is_empty()).then_some(owners);
    c
}

async fn namespace(env: &TestEnv, name: &str) -> Result<(), Error> {
    let api: Api<Namespace> = Api::all(env.client());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    api.create(&PostParams::default(), &ns).await?;
    Ok(())
}

fn widget_crd() -> Result<CustomResourceDefinition, Error> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))?)
}

fn widget_resource() -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

#[tokio::test]
async fn background_deletion_collects_dependents_and_grandchildren() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    env.install_crds([widget_crd()?]).await?;
    let pp = PostParams::default();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    let widgets: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &widget_resource());

    let owner = cms.create(&pp, &cm("owner", vec![])).await?;
    let child = cms.create(&pp, &cm("child", vec![owner_ref(&owner, false)])).await?;
    let grandchild = cms.create(&pp, &cm("grandchild", vec![owner_ref(&child, false)])).await?;
    let mut s = Secret::default();
    s.metadata.name = Some("dependent-secret".into());
    s.metadata.owner_references = Some(vec![owner_ref(&owner, false)]);
    let secret = secrets.create(&pp, &s).await?;
    let mut w = DynamicObject::new("dependent-widget", &widget_resource());
    w.metadata.owner_references = Some(vec![owner_ref(&owner, true)]);
    w.data = json!({"spec": {"size": 1}});
    let widget = widgets.create(&pp, &w).await?;
    let unrelated = cms.create(&pp, &cm("unrelated", vec![])).await?;

    cms.delete("owner", &DeleteParams::background()).await?;
    gone(&cms, &owner).await?;
    gone(&cms, &child).await?;
    gone(&cms, &grandchild).await?;
    gone(&secrets, &secret).await?;
    gone(&widgets, &widget).await?;
    assert!(cms.get_opt(&unrelated.name_any()).await?.is_some());
    Ok(())
}

#[tokio::test]
async fn foreground_deletion_keeps_owner_until_blocking_dependents_are_gone() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pp = PostParams::default();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let owner = cms.create(&pp, &cm("fg-owner", vec![])).await?;
    let mut held = cm("fg-held", vec![owner_ref(&owner, true)]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let held = cms.create(&pp, &held).await?;
    let free = cms.create(&pp, &cm("fg-free", vec![owner_ref(&owner, false)])).await?;

    cms.delete("fg-owner", &DeleteParams::foreground()).await?;
    // The collector deletes every dependent; the held one waits on its finalizer.
    gone(&cms, &free).await?;
    wait(&cms, "fg-held", |o: Option<&ConfigMap>| o.is_some_and(|c| c.metadata.deletion_timestamp.is_some())).await?;
    let still = cms.get("fg-owner").await?;
    assert!(still.metadata.deletion_timestamp.is_some());
    assert_eq!(still.metadata.finalizers, Some(vec!["foregroundDeletion".to_string()]));

    let release = json!({"metadata": {"finalizers": null}});
    cms.patch("fg-held", &PatchParams::default(), &Patch::Merge(&release)).await?;
    gone(&cms, &held).await?;
    gone(&cms, &owner).await?;
    Ok(())
}

#[tokio::test]
async fn orphan_deletion_leaves_dependents_without_the_reference() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pp = PostParams::default();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    let owner = cms.create(&pp, &cm("orphan-owner", vec![])).await?;
    let other = cms.create(&pp, &cm("other-owner", vec![])).await?;
    let mut s = Secret::default();
    s.metadata.name = Some("orphaned".into());
    s.metadata.owner_references = Some(vec![owner_ref(&owner, true), owner_ref(&other, false)]);
    secrets.create(&pp, &s).await?;
    let lone = cms.create(&pp, &cm("lone", vec![owner_ref(&owner, false)])).await?;

    cms.delete("orphan-owner", &DeleteParams::orphan()).await?;
    gone(&cms, &owner).await?;
    let s = secrets.get("orphaned").await?;
    let refs: Vec<String> = s.owner_references().iter().map(|r| r.name.clone()).collect();
    assert_eq!(refs, vec!["other-owner".to_string()]);
    let lone_now = cms.get("lone").await?;
    assert_eq!(lone_now.metadata.uid, lone.metadata.uid);
    assert!(lone_now.owner_references().is_empty());
    Ok(())
}

#[tokio::test]
async fn dependents_of_missing_owners_are_collected() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pp = PostParams::default();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let ghost = OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "never-existed".into(),
        uid: "5b0c7ae9-2a3c-4b49-9f0e-000000000001".into(),
        ..OwnerReference::default()
    };
    let orphan = cms.create(&pp, &cm("ghost-child", vec![ghost])).await?;
    gone(&cms, &orphan).await?;

    // A same-named owner with another uid does not count either.
    let impostor = cms.create(&pp, &cm("impostor", vec![])).await?;
    let mut wrong = owner_ref(&impostor, false);
    wrong.uid = "5b0c7ae9-2a3c-4b49-9f0e-000000000002".into();
    let child = cms.create(&pp, &cm("impostor-child", vec![wrong])).await?;
    gone(&cms, &child).await?;
    assert!(cms.get_opt("impostor").await?.is_some());
    Ok(())
}

#[tokio::test]
async fn cluster_scoped_owner_collects_namespaced_dependents() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pp = PostParams::default();
    let roles: Api<ClusterRole> = Api::all(env.client());
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut r = ClusterRole::default();
    r.metadata.name = Some("gc-owner-role".into());
    let role = roles.create(&pp, &r).await?;
    let dep = cms.create(&pp, &cm("role-dependent", vec![owner_ref(&role, false)])).await?;
    // The owner exists: nothing happens to the dependent meanwhile.
    let kept = cms.get("role-dependent").await?;
    assert!(kept.metadata.deletion_timestamp.is_none());
    roles.delete("gc-owner-role", &DeleteParams::default()).await?;
    gone(&cms, &dep).await?;
    Ok(())
}

#[tokio::test]
async fn cross_namespace_owner_references_count_as_absent() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    namespace(&env, "ns-a").await?;
    namespace(&env, "ns-b").await?;
    let pp = PostParams::default();
    let in_a: Api<ConfigMap> = Api::namespaced(env.client(), "ns-a");
    let in_b: Api<ConfigMap> = Api::namespaced(env.client(), "ns-b");
    let owner_a = in_a.create(&pp, &cm("owner", vec![])).await?;
    let owner_b = in_b.create(&pp, &cm("local-owner", vec![])).await?;
    // Only a reference to another namespace's object: treated as absent, collected.
    let lone = in_b.create(&pp, &cm("cross-only", vec![owner_ref(&owner_a, false)])).await?;
    // A valid local owner too: the cross-namespace reference is dropped, the object kept.
    let mixed = in_b.create(&pp, &cm("mixed", vec![owner_ref(&owner_a, false), owner_ref(&owner_b, false)])).await?;
    gone(&in_b, &lone).await?;
    let cleaned = wait(&in_b, "mixed", |o: Option<&ConfigMap>| o.is_some_and(|c| c.owner_references().len() == 1))
        .await?
        .ok_or("mixed vanished")?;
    assert_eq!(cleaned.metadata.uid, mixed.metadata.uid);
    assert_eq!(cleaned.owner_references()[0].name, "local-owner");
    assert!(in_a.get_opt("owner").await?.is_some(), "the other namespace's object is untouched");
    // kube's warning event names the dependent.
    let events: Api<Event> = Api::namespaced(env.client(), "ns-b");
    let stream = watcher::watcher(events, watcher::Config::default()).applied_objects();
    let found = tokio::time::timeout(WAIT, async {
        futures::pin_mut!(stream);
        while let Some(e) = stream.try_next().await? {
            if e.reason.as_deref() == Some("OwnerRefInvalidNamespace") {
                return Ok::<_, Error>(e);
            }
        }
        Err("event stream ended".into())
    })
    .await
    .map_err(|_| "no OwnerRefInvalidNamespace event")??;
    let about = found.regarding.and_then(|r| r.name).unwrap_or_default();
    assert!(about == "mixed" || about == "cross-only", "event about {about}");
    assert_eq!(found.type_.as_deref(), Some("Warning"));
    Ok(())
}

#[tokio::test]
async fn foreground_deletion_cascades_in_the_foreground_through_a_chain() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pp = PostParams::default();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let owner = cms.create(&pp, &cm("top", vec![])).await?;
    let middle = cms.create(&pp, &cm("middle", vec![owner_ref(&owner, true)])).await?;
    let mut bottom = cm("bottom", vec![owner_ref(&middle, true)]);
    bottom.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let bottom = cms.create(&pp, &bottom).await?;

    // An async child process: the server runs on this test's runtime.
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(["delete", "configmap", "top", "-n", "default", "--cascade=foreground", "--wait=false"])
        .output()
        .await?;
    assert!(out.status.success(), "kubectl: {}", String::from_utf8_lossy(&out.stderr));

    // The middle object has dependents of its own, so it is deleted in the foreground too.
    let middle_now =
        wait(&cms, "middle", |o: Option<&ConfigMap>| o.is_some_and(|c| c.metadata.deletion_timestamp.is_some()))
            .await?
            .ok_or("middle vanished")?;
    assert_eq!(middle_now.metadata.finalizers, Some(vec!["foregroundDeletion".to_string()]));
    wait(&cms, "bottom", |o: Option<&ConfigMap>| o.is_some_and(|c| c.metadata.deletion_timestamp.is_some())).await?;
    assert!(cms.get("top").await?.metadata.deletion_timestamp.is_some());

    let release = json!({"metadata": {"finalizers": null}});
    cms.patch("bottom", &PatchParams::default(), &Patch::Merge(&release)).await?;
    gone(&cms, &bottom).await?;
    gone(&cms, &middle).await?;
    gone(&cms, &owner).await?;
    Ok(())
}
