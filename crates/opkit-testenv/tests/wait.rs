//! `opkit_testenv::wait_for` on a real (in-process) API server: it returns the object once
//! the condition holds, and on timeout fails with what it waited for and the last state
//! it saw (the object's status, or "not found"), also in the `Debug` form a failing
//! test prints.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use opkit_testenv::{TestEnv, wait_for};

const SHORT: Duration = Duration::from_millis(500);

#[tokio::test]
async fn a_timeout_names_what_was_awaited_and_the_last_status_seen() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let namespaces: Api<Namespace> = Api::all(env.client());
    let terminating = |ns: Option<&Namespace>| {
        ns.and_then(|n| n.status.as_ref()).and_then(|s| s.phase.as_deref()) == Some("Terminating")
    };
    let err = wait_for(&namespaces, "default", "to be Terminating", terminating, SHORT)
        .await
        .expect_err("default stays Active");
    let message = err.to_string();
    assert!(
        message.starts_with("timed out after 500ms waiting for Namespace default to be Terminating; last seen: "),
        "{message}"
    );
    assert!(message.contains(r#"status {"phase":"Active"}"#), "{message}");
    assert_eq!(format!("{err:?}"), message, "a failing test prints the message, not a struct");
    assert_eq!(err.last_seen().map(|s| s.contains("Active")), Some(true));
}

#[tokio::test]
async fn a_missing_object_is_reported_as_not_found_and_found_once_created() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let exists = |cm: Option<&ConfigMap>| cm.is_some();
    let err = wait_for(&cms, "settings", "to exist", exists, SHORT).await.expect_err("not created");
    assert_eq!(
        err.to_string(),
        "timed out after 500ms waiting for ConfigMap default/settings to exist; last seen: not found"
    );

    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("settings".into());
    cms.create(&PostParams::default(), &cm).await.expect("create");
    let found = wait_for(&cms, "settings", "to exist", exists, opkit_testenv::WAIT).await.expect("found");
    assert_eq!(found.and_then(|c| c.metadata.name).as_deref(), Some("settings"));
}
