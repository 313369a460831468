//! The official Python `kubernetes` client against a TestEnv: the admin through the
//! kubeconfig's client certificate, and a ServiceAccount through a token from the
//! TokenRequest API, whose RBAC the server enforces (a RoleBinding grants ConfigMaps;
//! Pods stay forbidden with kube's message).
//!
//! Needs `python3` with the `kubernetes` package (`pip install kubernetes`; `.ci/run`
//! installs it).

use std::process::Command;

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use opkit_testenv::TestEnv;

/// Prints, one per line: the admin's user name, the ServiceAccount's user name, the
/// ConfigMaps it lists, and the status and reason of its Pod list.
const SCRIPT: &str = r#"
import os
from kubernetes import client, config
from kubernetes.client.rest import ApiException

admin = config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
me = client.AuthenticationV1Api(admin).create_self_subject_review(client.V1SelfSubjectReview())
print(me.status.user_info.username)

cfg = client.Configuration()
cfg.host = os.environ["SERVER"]
cfg.ssl_ca_cert = os.environ["CA_FILE"]
cfg.api_key = {"authorization": os.environ["TOKEN"]}
cfg.api_key_prefix = {"authorization": "Bearer"}
sa = client.ApiClient(cfg)
me = client.AuthenticationV1Api(sa).create_self_subject_review(client.V1SelfSubjectReview())
print(me.status.user_info.username)
print(len(client.CoreV1Api(sa).list_namespaced_config_map("t").items))
try:
    client.CoreV1Api(sa).list_namespaced_pod("t")
    print("pods listed")
except ApiException as e:
    print(e.status, e.reason)
"#;

#[tokio::test]
async fn the_python_client_works_as_admin_and_as_a_service_account() -> Result<(), Box<dyn std::error::Error>> {
    let env = TestEnv::start().await?;
    let token = env.service_account_token("t", "op").await?;
    let rule = PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["configmaps".into()]),
        verbs: vec!["list".into()],
        ..Default::default()
    };
    let meta = |name: &str| ObjectMeta { name: Some(name.into()), namespace: Some("t".into()), ..Default::default() };
    Api::<Role>::namespaced(env.client(), "t")
        .create(&PostParams::default(), &Role { metadata: meta("reader"), rules: Some(vec![rule]) })
        .await?;
    let binding = RoleBinding {
        metadata: meta("op-reader"),
        role_ref: RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: "Role".into(), name: "reader".into() },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "op".into(),
            namespace: Some("t".into()),
            api_group: None,
        }]),
    };
    Api::<RoleBinding>::namespaced(env.client(), "t").create(&PostParams::default(), &binding).await?;

    let dir = tempfile::tempdir()?;
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, env.server().ca_pem())?;
    let mut python = Command::new("python3");
    python
        .arg("-c")
        .arg(SCRIPT)
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("SERVER", env.server().url())
        .env("CA_FILE", &ca_file)
        .env("TOKEN", &token);
    let out = tokio::task::spawn_blocking(move || python.output()).await??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python failed (is `pip install kubernetes` done?):\n{stdout}\n{stderr}");
    // t holds kube-root-ca.crt, published by the root CA controller.
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines, ["kubernetes-admin", "system:serviceaccount:t:op", "1", "403 Forbidden"], "{stderr}");
    Ok(())
}
