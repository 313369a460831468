//! Namespace lifecycle against a real opkit API server: the default ServiceAccount, and
//! termination that deletes every kind of content, reports kube's conditions while
//! finalizers hold content, refuses new objects, and finally removes the namespace.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, NamespaceCondition, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::wait::{Condition, await_condition, conditions};
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

async fn create_namespace(env: &TestEnv, name: &str) -> Result<Namespace, Error> {
    let api: Api<Namespace> = Api::all(env.client());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    Ok(api.create(&PostParams::default(), &ns).await?)
}

fn condition<'a>(ns: &'a Namespace, type_: &str) -> Option<&'a NamespaceCondition> {
    ns.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

fn gadget_crd() -> Result<CustomResourceDefinition, Error> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))?)
}

fn gadget_resource() -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    }
}

fn deployment() -> Result<Deployment, Error> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}
            }
        }
    }))?)
}

#[tokio::test]
async fn default_service_account_is_created_and_recreated() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    create_namespace(&env, "team").await?;
    let sas: Api<ServiceAccount> = Api::namespaced(env.client(), "team");
    let first = wait(&sas, "default", |o: Option<&ServiceAccount>| o.is_some()).await?.ok_or("no account")?;
    sas.delete("default", &DeleteParams::default()).await?;
    let uid = first.metadata.uid.clone();
    let second = wait(&sas, "default", move |o: Option<&ServiceAccount>| o.is_some_and(|s| s.metadata.uid != uid))
        .await?
        .ok_or("not recreated")?;
    assert_ne!(second.metadata.uid, first.metadata.uid);
    Ok(())
}

#[tokio::test]
async fn terminating_namespace_deletes_content_and_waits_for_finalizers() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    env.install_crds([gadget_crd()?]).await?;
    let ns = create_namespace(&env, "doomed").await?;
    let pp = PostParams::default();
    let deployments: Api<Deployment> = Api::namespaced(env.client(), "doomed");
    let gadgets: Api<DynamicObject> = Api::namespaced_with(env.client(), "doomed", &gadget_resource());
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "doomed");
    let namespaces: Api<Namespace> = Api::all(env.client());

    let dep = deployments.create(&pp, &deployment()?).await?;
    let mut g = DynamicObject::new("thing", &gadget_resource());
    g.data = json!({"spec": {"size": 3}});
    let gadget = gadgets.create(&pp, &g).await?;
    let mut held = ConfigMap::default();
    held.metadata.name = Some("held".into());
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let held = cms.create(&pp, &held).await?;

    // An async child process: the server runs on this test's runtime.
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(["delete", "namespace", "doomed", "--wait=false"])
        .output()
        .await?;
    assert!(out.status.success(), "kubectl: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("namespace \"doomed\" deleted"));

    // Content without finalizers goes (pods after their kubelet confirms); the held
    // ConfigMap keeps the namespace.
    let only_configmap = "Some resources are remaining: configmaps. has 1 resource instances";
    wait(&deployments, "web", conditions::is_deleted(&dep.uid().unwrap_or_default())).await?;
    wait(&gadgets, "thing", conditions::is_deleted(&gadget.uid().unwrap_or_default())).await?;
    let stuck = wait(&namespaces, "doomed", |o: Option<&Namespace>| {
        o.is_some_and(|n| {
            let held_back = condition(n, "NamespaceFinalizersRemaining").is_some_and(|c| c.status == "True");
            let remaining = condition(n, "NamespaceContentRemaining")
                .is_some_and(|c| c.status == "True" && c.message.as_deref() == Some(only_configmap));
            held_back && remaining
        })
    })
    .await?
    .ok_or("namespace vanished early")?;
    assert_eq!(stuck.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Terminating"));
    let remaining = condition(&stuck, "NamespaceContentRemaining").ok_or("no condition")?;
    assert_eq!(remaining.reason.as_deref(), Some("SomeResourcesRemain"));
    assert_eq!(remaining.message.as_deref(), Some(only_configmap));
    let fins = condition(&stuck, "NamespaceFinalizersRemaining").ok_or("no condition")?;
    assert_eq!(fins.reason.as_deref(), Some("SomeFinalizersRemain"));
    assert_eq!(
        fins.message.as_deref(),
        Some("Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances")
    );
    let discovered = condition(&stuck, "NamespaceDeletionDiscoveryFailure").ok_or("no condition")?;
    assert_eq!((discovered.status.as_str(), discovered.reason.as_deref()), ("False", Some("ResourcesDiscovered")));
    let held_now = cms.get("held").await?;
    assert!(held_now.metadata.deletion_timestamp.is_some());

    // Nothing new may be created in a terminating namespace.
    let mut late = ConfigMap::default();
    late.metadata.name = Some("late".into());
    // kube's NamespaceLifecycle words it so, with the cause controllers look for.
    let refused = cms.create(&pp, &late).await.expect_err("a create in a terminating namespace");
    assert!(opkit::status::is_namespace_terminating(&refused), "{refused:?}");
    let kube::Error::Api(s) = &refused else { return Err(format!("expected a Status, got {refused:?}").into()) };
    assert_eq!(s.code, 403, "{s:?}");
    assert_eq!(
        s.message,
        "configmaps \"late\" is forbidden: unable to create new content in namespace doomed because it is being terminated"
    );
    let still = namespaces.get("doomed").await?;
    assert_eq!(still.spec.and_then(|s| s.finalizers), Some(vec!["kubernetes".to_string()]));

    // Release the finalizer: the ConfigMap, then the namespace, disappear.
    let release = json!({"metadata": {"finalizers": null}});
    cms.patch("held", &PatchParams::default(), &Patch::Merge(&release)).await?;
    wait(&cms, "held", conditions::is_deleted(&held.uid().unwrap_or_default())).await?;
    wait(&namespaces, "doomed", conditions::is_deleted(&ns.uid().unwrap_or_default())).await?;
    Ok(())
}

#[tokio::test]
async fn empty_namespace_is_removed_promptly() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let ns = create_namespace(&env, "brief").await?;
    let namespaces: Api<Namespace> = Api::all(env.client());
    namespaces.delete("brief", &DeleteParams::default()).await?;
    wait(&namespaces, "brief", conditions::is_deleted(&ns.uid().unwrap_or_default())).await?;
    Ok(())
}
