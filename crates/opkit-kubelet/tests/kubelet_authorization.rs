//! The kubelet server authorizes as kube's kubelet in `Webhook` mode: a client certificate
//! from the cluster CA for a user without rights on `nodes/proxy` is answered 403 with
//! kube's message at the kubelet itself (container logs and exec, whatever the pod), a
//! user allowed only `get` may read logs but not exec (`create`), the API server's kubelet
//! client identity is allowed by kube's `system:kubelet-api-admin` role (without
//! `system:masters`), and the API server keeps serving `kubectl logs` and `kubectl exec`.

use crate::common;
use crate::kubectl;

use common::real_pods::{load_script, real_env};
use common::{Error, wait};
use http_body_util::BodyExt;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, PostParams};
use opkit_testenv::TestEnv;
use serde_json::json;

/// A client of the kubelet server at `endpoint` presenting a cluster-CA certificate for
/// `user` in group `group`.
fn kubelet_client_as(env: &TestEnv, endpoint: &str, user: &str, group: &str) -> Result<kube::Client, Error> {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut cfg = kube::Config::new(format!("https://{endpoint}").parse()?);
    let ca = opkit_serve::tls::DevCa::from_pem(env.server().ca_pem(), env.server().ca_key_pem())?;
    let root = rustls_pki_types::pem::PemObject::from_pem_slice(env.server().ca_pem().as_bytes())
        .map(|der: rustls_pki_types::CertificateDer<'static>| der.to_vec())?;
    cfg.root_cert = Some(vec![root]);
    let cert = ca.issue_client_cert(user, group)?;
    cfg.auth_info.client_certificate_data = Some(b64(&cert.cert_pem));
    cfg.auth_info.client_key_data = Some(b64(&cert.key_pem).into());
    Ok(kube::Client::try_from(cfg)?)
}

/// The status and body of `method path` sent to the kubelet.
async fn call(client: &kube::Client, method: http::Method, path: &str) -> Result<(u16, String), Error> {
    let req = http::Request::builder().method(method).uri(path).body(kube::client::Body::empty())?;
    let resp = client.send(req).await?;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubelet_forbids_clients_without_rights_and_serves_the_api_server() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/greeter:v1", "echo hello from the pod\nexec sleep 3600")?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "greeter"},
        "spec": {"containers": [{"name": "main", "image": "example.com/greeter:v1"}]}
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let running = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.container_statuses.as_ref()?.first()?.state.as_ref()?.running.as_ref())
            .is_some()
    };
    wait(&pods, "greeter", running).await?;
    let nodes: Api<Node> = Api::all(env.client());
    let endpoint =
        |n: Option<&Node>| n.and_then(|n| n.metadata.annotations.as_ref()?.get("opkit.dev/kubelet-endpoint").cloned());
    let node = wait(&nodes, "opkit-worker-0", |n: Option<&Node>| endpoint(n).is_some()).await?;
    let endpoint = endpoint(Some(&node)).ok_or("no kubelet endpoint")?;

    // A reader: `get` on nodes/proxy only (granted before its first request).
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "kubelet-reader"},
        "rules": [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}]
    }))?;
    Api::<ClusterRole>::all(env.client()).create(&PostParams::default(), &role).await?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "kubelet-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubelet-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "reader"}]
    }))?;
    Api::<ClusterRoleBinding>::all(env.client()).create(&PostParams::default(), &binding).await?;

    let logs = "/containerLogs/default/greeter/main";
    let exec = "/exec/default/greeter/main?command=id&stdout=true";
    let nobody = kubelet_client_as(&env, &endpoint, "mallory", "dev")?;
    let forbidden =
        |verb: &str| format!("Forbidden (user=mallory, verb={verb}, resource=nodes, subresource(s)=[proxy])\n");
    assert_eq!(call(&nobody, http::Method::GET, logs).await?, (403, forbidden("get")));
    assert_eq!(call(&nobody, http::Method::POST, exec).await?, (403, forbidden("create")));
    assert_eq!(call(&nobody, http::Method::GET, exec).await?, (403, forbidden("get")));
    // Pods that do not exist are no different: authorization comes first.
    let (code, _) = call(&nobody, http::Method::GET, "/containerLogs/other/none/c").await?;
    assert_eq!(code, 403);

    let reader = kubelet_client_as(&env, &endpoint, "reader", "dev")?;
    let (code, body) = call(&reader, http::Method::GET, logs).await?;
    assert_eq!((code, body.as_str()), (200, "hello from the pod\n"));
    assert_eq!(
        call(&reader, http::Method::POST, exec).await?,
        (403, "Forbidden (user=reader, verb=create, resource=nodes, subresource(s)=[proxy])\n".to_owned())
    );

    // The API server's kubelet client identity is allowed through kube's
    // `system:kubelet-api-admin` ClusterRole, not only as a member of system:masters.
    let apiserver = kubelet_client_as(&env, &endpoint, "kube-apiserver-kubelet-client", "dev")?;
    let (code, body) = call(&apiserver, http::Method::GET, logs).await?;
    assert_eq!((code, body.as_str()), (200, "hello from the pod\n"));
    let review: SubjectAccessReview = serde_json::from_value(json!({"spec": {
        "user": "kube-apiserver-kubelet-client", "groups": ["system:authenticated"],
        "resourceAttributes": {"verb": "create", "resource": "nodes", "subresource": "proxy", "name": "opkit-worker-0"},
    }}))?;
    let answer = Api::<SubjectAccessReview>::all(env.client()).create(&PostParams::default(), &review).await?;
    let status = answer.status.ok_or("no status")?;
    assert!(status.allowed, "{status:?}");
    assert!(status.reason.unwrap_or_default().contains("system:kubelet-api-admin"), "allowed by the role");

    // Through the API server, as the admin: its kubelet client certificate is allowed.
    let kubectl = kubectl::Kubectl::new("1.33", &env);
    let (logs_out, exec_out) = tokio::task::spawn_blocking(move || {
        (
            kubectl.ok(&["logs", "greeter"], None),
            kubectl.ok(&["exec", "greeter", "--", "echo", "through the API"], None),
        )
    })
    .await?;
    assert_eq!(logs_out, "hello from the pod\n");
    assert_eq!(exec_out, "through the API\n");
    Ok(())
}
