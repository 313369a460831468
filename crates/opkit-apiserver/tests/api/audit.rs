//! The audit log: one `audit.k8s.io/v1` Event per request, with the user (and the user
//! impersonated), verb, object, authorization decision and response status, so an
//! operator author can find the call their operator was forbidden to make.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions};
use kube::{Client, Config};
use opkit_apiserver::ServerConfig;
use opkit_testenv::TestEnv;
use serde_json::Value;

use crate::common::*;

async fn impersonating(env: &TestEnv, user: &str) -> Client {
    let mut config = Config::from_custom_kubeconfig(env.server().kubeconfig("opkit"), &KubeConfigOptions::default())
        .await
        .expect("config");
    config.auth_info = AuthInfo { impersonate: Some(user.into()), ..config.auth_info };
    Client::try_from(config).expect("client")
}

#[tokio::test]
async fn every_request_is_audited_with_its_user_decision_and_status() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("audit.log");
    let cfg = ServerConfig { audit_log: Some(path.clone()), ..ServerConfig::in_memory() };
    let env = TestEnv::builder().server(cfg).without_controllers().start().await.expect("env");
    Api::<ConfigMap>::namespaced(env.client(), "default")
        .create(&PostParams::default(), &config_map("audited", &[]))
        .await
        .expect("create");
    let sa = env.service_account_client("t", "op").await.expect("sa client");
    expect_status(Api::<Pod>::namespaced(sa, "t").list(&ListParams::default()).await, 403, "Forbidden");
    let as_sa = impersonating(&env, "system:serviceaccount:t:op").await;
    expect_status(Api::<Pod>::namespaced(as_sa, "t").list(&ListParams::default()).await, 403, "Forbidden");

    let log = std::fs::read_to_string(&path).expect("audit log");
    let events: Vec<Value> = log.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert!(events.iter().all(|e| e["apiVersion"] == "audit.k8s.io/v1" && e["level"] == "Metadata"));
    let created = events
        .iter()
        .find(|e| e["verb"] == "create" && e["objectRef"]["resource"] == "configmaps")
        .expect("the create is audited");
    assert_eq!(created["user"]["username"], "kubernetes-admin");
    assert_eq!(created["objectRef"]["resource"], "configmaps");
    assert_eq!(created["objectRef"]["namespace"], "default");
    assert_eq!(created["responseStatus"]["code"], 201);
    assert_eq!(created["annotations"]["authorization.k8s.io/decision"], "allow");
    assert_eq!(created["sourceIPs"][0], "127.0.0.1");
    assert!(created["auditID"].as_str().is_some_and(|id| id.len() == 36));

    let forbidden: Vec<&Value> = events
        .iter()
        .filter(|e| e["verb"] == "list" && e["objectRef"]["resource"] == "pods" && e["responseStatus"]["code"] == 403)
        .collect();
    assert_eq!(forbidden.len(), 2, "{forbidden:?}");
    let by_token = forbidden[0];
    assert_eq!(by_token["user"]["username"], "system:serviceaccount:t:op");
    assert_eq!(by_token["annotations"]["authorization.k8s.io/decision"], "forbid");
    assert_eq!(by_token["responseStatus"]["reason"], "Forbidden");
    assert!(by_token["impersonatedUser"].is_null());
    let impersonated = forbidden[1];
    assert_eq!(impersonated["user"]["username"], "kubernetes-admin");
    assert_eq!(impersonated["impersonatedUser"]["username"], "system:serviceaccount:t:op");
}
