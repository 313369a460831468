//! kube-apiserver's serving limits: at most N read-only and M mutating requests at once,
//! more answered 429 with `Retry-After` (the admin's `system:masters` and watches are
//! exempt), and a client that does not finish sending its body gets 504.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, WatchParams};
use opkit_apiserver::{ServerConfig, ServingLimits};
use opkit_testenv::TestEnv;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::common::{raw, within};

const CM: &str = "/api/v1/namespaces/default/configmaps";

async fn env_with_limits(limits: ServingLimits) -> TestEnv {
    let cfg = ServerConfig { limits, ..ServerConfig::in_memory() };
    within("starting the test environment", TestEnv::builder().without_controllers().server(cfg).start())
        .await
        .expect("TestEnv::start")
}

/// A token and a non-retrying client for ServiceAccount default/sa, which RBAC makes a
/// cluster admin; it is not in `system:masters`, so the limits apply to it.
async fn limited_admin(env: &TestEnv) -> (String, Client) {
    let mut config = env.cluster_admin_service_account_config("default", "sa").await.expect("config");
    config.default_retry = false;
    let token = config.auth_info.token.as_ref().map(|t| secrecy::ExposeSecret::expose_secret(t).to_string());
    (token.expect("a token"), Client::try_from(config).expect("client"))
}

/// A POST of a ConfigMap whose body is sent in two parts; the request is in flight (and
/// holds its slot) until [`HeldRequest::finish`] sends the rest.
struct HeldRequest {
    rest: mpsc::Sender<Result<Frame<Bytes>, Infallible>>,
    response: tokio::task::JoinHandle<u16>,
}

impl HeldRequest {
    async fn start(env: &TestEnv, token: &str, name: &str) -> (HeldRequest, &'static str) {
        let mut roots = rustls::RootCertStore::empty();
        let ca = rustls_pki_types::pem::PemObject::from_pem_slice(env.server().ca_pem().as_bytes()).expect("ca");
        roots.add(ca).expect("root");
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let addr = env.server().addr();
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::IpAddress(addr.ip().into()), tcp)
            .await
            .expect("handshake");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.expect("http1");
        tokio::spawn(conn);
        let (tx, rx) = mpsc::channel(4);
        let body = format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"#);
        tx.send(Ok(Frame::data(Bytes::from(body)))).await.expect("first part");
        let request = http::Request::post(CM)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
            .expect("request");
        let response = tokio::spawn(async move {
            let response = sender.send_request(request).await.expect("response");
            let code = response.status().as_u16();
            let _ = response.into_body().collect().await;
            code
        });
        (HeldRequest { rest: tx, response }, r#""data":{"k":"v"}}"#)
    }

    async fn finish(self, rest: &'static str) -> u16 {
        self.rest.send(Ok(Frame::data(Bytes::from(rest)))).await.expect("rest of the body");
        drop(self.rest);
        within("the held request's answer", self.response).await.expect("response task")
    }
}

/// A create by `client` with a generated name: its status code and Retry-After header.
async fn create(client: &Client) -> (u16, Option<String>, serde_json::Value) {
    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"c-"}}"#.to_vec();
    let req = http::Request::post(CM)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(body))
        .expect("request");
    let res = within("a create", client.send(req)).await.expect("send");
    let code = res.status().as_u16();
    let retry = res.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
    let bytes = res.into_body().collect().await.expect("body").to_bytes();
    (code, retry, serde_json::from_slice(&bytes).unwrap_or_default())
}

#[tokio::test]
async fn requests_past_the_in_flight_limit_get_429_but_the_admin_and_watches_do_not() {
    let limits = ServingLimits { max_requests_inflight: 1, max_mutating_requests_inflight: 1, ..Default::default() };
    let env = env_with_limits(limits).await;
    let (token, sa) = limited_admin(&env).await;

    let (held, rest) = HeldRequest::start(&env, &token, "held").await;
    // Once the held create has its slot, the next mutating request of the account is refused.
    let (retry, status) = within("a create refused with 429", async {
        loop {
            match create(&sa).await {
                (429, retry, status) => break (retry, status),
                (code, _, status) => assert_eq!(code, 201, "{status}"),
            }
        }
    })
    .await;
    assert_eq!(retry.as_deref(), Some("1"), "Retry-After");
    assert_eq!(status["reason"], "TooManyRequests", "{status}");
    assert_eq!(status["details"]["retryAfterSeconds"], 1, "{status}");

    // Reads have their own pool; a watch takes no slot of it.
    let configmaps: Api<ConfigMap> = Api::namespaced(sa.clone(), "default");
    let mut watch = configmaps.watch(&WatchParams::default(), "0").await.expect("watch").boxed();
    assert_eq!(raw(&sa, "GET", CM, None, Vec::new()).await.code, 200, "a list beside the held create and a watch");
    // The admin is in system:masters, which kube exempts.
    assert_eq!(create(&env.client()).await.0, 201, "the admin's create");

    assert_eq!(held.finish(rest).await, 201, "the held create completes");
    assert!(
        within("the watch sees the held object", async {
            while let Some(event) = watch.next().await {
                if let Ok(kube::api::WatchEvent::Added(cm)) = event
                    && cm.metadata.name.as_deref() == Some("held")
                {
                    return true;
                }
            }
            false
        })
        .await
    );
    assert_eq!(create(&sa).await.0, 201, "the slot is free again");
}

#[tokio::test]
async fn a_body_not_sent_within_the_request_timeout_is_answered_504() {
    let limits = ServingLimits { request_timeout: Duration::from_secs(1), ..Default::default() };
    let env = env_with_limits(limits).await;
    let token = env.server().token().to_string();
    let (held, _) = HeldRequest::start(&env, &token, "slow").await;
    let code = within("the timeout", held.response).await.expect("response task");
    assert_eq!(code, 504);
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    assert!(configmaps.get_opt("slow").await.expect("get").is_none(), "nothing half-written");
}
