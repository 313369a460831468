//! A public Ansible-based operator run with its roles unchanged: OlafRadicke/hugo-operator
//! (`tests/fixtures/hugo-operator`, MIT, see its SOURCE.md), whose role creates a
//! Deployment and a Service for a Hugo site. Its sample, applied as published, is
//! reconciled by the generic Ansible operator on the in-process control plane.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use opkit_testenv::{TestEnv, wait_for, wait_for_with};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(120);

fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hugo-operator")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hugo_operator_runs_with_its_roles_unchanged() {
    let env = TestEnv::start().await.expect("testenv");
    let operator = support::start_operator(&env, &project(), "config/crd/bases/hugo.gohugo.io_hugoes.yaml").await;
    let sample = std::fs::read_to_string(project().join("config/samples/hugo_v1alpha1_hugo.yaml")).expect("sample");
    env.apply_yaml(&sample).await.expect("apply the published sample");

    let deployments: Api<Deployment> = Api::namespaced(env.client(), "default");
    let deployment = wait_for(&deployments, "hugo-sample", "to exist", |d: Option<&Deployment>| d.is_some(), WAIT)
        .await
        .expect("the role creates the Deployment")
        .expect("exists");
    let spec = deployment.spec.expect("spec");
    assert_eq!(spec.replicas, Some(1), "replicas_size from the sample");
    let init = spec.template.spec.and_then(|s| s.init_containers).unwrap_or_default();
    assert_eq!(init.first().map(|c| c.name.as_str()), Some("hugo-sample-init-container"));
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    wait_for(&services, "hugo-sample", "to exist", |s: Option<&Service>| s.is_some(), WAIT)
        .await
        .expect("the role creates the Service");

    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("hugo.gohugo.io", "v1alpha1", "Hugo"), "hugoes");
    let hugoes: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &resource);
    let successful = |o: Option<&DynamicObject>| {
        o.and_then(|o| o.data.pointer("/status/conditions"))
            .and_then(Value::as_array)
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Successful" && c["status"] == "True"))
    };
    wait_for_with(&hugoes, &resource, "hugo-sample", "to be Successful", successful, WAIT)
        .await
        .expect("the hugo role succeeds");
    let metrics = operator.metrics.encode();
    assert!(
        metrics.contains(
            "ansible_operator_reconcile_result{GVK=\"hugo.gohugo.io/v1alpha1, Kind=Hugo\",result=\"succeeded\"}"
        ),
        "{metrics}"
    );
}
