//! Helpers shared by the kube-rs integration suites: the FlightTicket custom resource,
//! environment start-up, bounded waiting, Status extraction and raw HTTP requests.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use futures::{Stream, StreamExt};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::Status;
use kube::{Client, Config, CustomResource, CustomResourceExt};
use opkit_apiserver::RunningServer;
use opkit_testenv::TestEnv;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How long any single wait in a test may take before the test fails.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(30);

/// The seeds' FlightTicket: `flights.com/v1`, namespaced, short name `ft`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "flights.com",
    version = "v1",
    kind = "FlightTicket",
    namespaced,
    shortname = "ft",
    status = "FlightTicketStatus"
)]
pub(crate) struct FlightTicketSpec {
    /// Departure airport.
    pub from: String,
    /// Arrival airport.
    pub to: String,
    /// Number of seats, 1 to 10.
    #[schemars(range(min = 1, max = 10))]
    pub number: i64,
}

/// The FlightTicket status (served through the `/status` subresource).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub(crate) struct FlightTicketStatus {
    /// Booking state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// A FlightTicket named `name` in `default`.
pub(crate) fn flight(name: &str, from: &str, to: &str, number: i64) -> FlightTicket {
    let mut ft = FlightTicket::new(name, FlightTicketSpec { from: from.into(), to: to.into(), number });
    ft.metadata.namespace = Some("default".into());
    ft
}

/// A fresh in-memory environment: a bare API server without the cluster controllers,
/// since these suites test API semantics (controllers would write to the same objects).
pub(crate) async fn env() -> TestEnv {
    within("starting the test environment", TestEnv::builder().without_controllers().start())
        .await
        .expect("TestEnv::start")
}

/// A fresh environment with the FlightTicket CRD installed and established.
pub(crate) async fn env_with_flights() -> TestEnv {
    let env = env().await;
    within("installing the FlightTicket CRD", env.install_crds([FlightTicket::crd()]))
        .await
        .expect("install FlightTicket CRD");
    env
}

/// Awaits `fut`, failing the test if it takes longer than [`TIMEOUT`].
pub(crate) async fn within<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(TIMEOUT, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {TIMEOUT:?} waiting for {what}"),
    }
}

/// The next item of a stream, failing the test on timeout or end of stream.
pub(crate) async fn next_item<S: Stream + Unpin>(what: &str, stream: &mut S) -> S::Item {
    within(what, stream.next()).await.unwrap_or_else(|| panic!("stream ended while waiting for {what}"))
}

/// Takes items from `stream` until `pred` accepts one, returning it (bounded by [`TIMEOUT`]).
pub(crate) async fn wait_for_item<S, F>(what: &str, stream: &mut S, mut pred: F) -> S::Item
where
    S: Stream + Unpin,
    S::Item: std::fmt::Debug,
    F: FnMut(&S::Item) -> bool,
{
    within(what, async {
        while let Some(item) = stream.next().await {
            if pred(&item) {
                return item;
            }
        }
        panic!("stream ended while waiting for {what}");
    })
    .await
}

/// The Status of a failed API call; fails the test for any other outcome.
pub(crate) fn status_of<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Status {
    match result {
        Err(kube::Error::Api(s)) => *s,
        Err(other) => panic!("expected an API Status error, got client error: {other:?}"),
        Ok(v) => panic!("expected an API Status error, got success: {v:?}"),
    }
}

/// Asserts the call failed with this HTTP code and Status reason; returns the Status.
pub(crate) fn expect_status<T: std::fmt::Debug>(result: Result<T, kube::Error>, code: u16, reason: &str) -> Status {
    let s = status_of(result);
    assert_eq!((s.code, s.reason.as_str()), (code, reason), "unexpected Status: {s:?}");
    s
}

/// A ConfigMap named `name` with the given data.
pub(crate) fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        data: Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        ..Default::default()
    }
}

/// Creates a ConfigMap and returns the stored object.
pub(crate) async fn create_cm(api: &Api<ConfigMap>, name: &str) -> ConfigMap {
    api.create(&PostParams::default(), &config_map(name, &[("k", "v")]))
        .await
        .unwrap_or_else(|e| panic!("creating ConfigMap {name}: {e}"))
}

/// The resourceVersion of an object, parsed as the server's integer revision.
pub(crate) fn rv_num(meta: &ObjectMeta) -> u64 {
    let rv = meta.resource_version.as_deref().expect("object has a resourceVersion");
    rv.parse().unwrap_or_else(|_| panic!("resourceVersion {rv:?} is not an integer"))
}

/// A client for `server`, from its kubeconfig.
pub(crate) async fn client_for(server: &RunningServer) -> Client {
    client_from_kubeconfig(server.kubeconfig("opkit")).await
}

/// A client from kubeconfig YAML.
pub(crate) async fn client_from_kubeconfig_yaml(yaml: &str) -> Client {
    client_from_kubeconfig(Kubeconfig::from_yaml(yaml).expect("kubeconfig parses")).await
}

/// A client from a kubeconfig.
pub(crate) async fn client_from_kubeconfig(kubeconfig: Kubeconfig) -> Client {
    let config =
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.expect("kubeconfig is usable");
    Client::try_from(config).expect("client builds")
}

/// A client for `env` that does not retry 429/503/504 answers (kube retries them by
/// default), so tests see the server's first answer.
pub(crate) async fn client_without_retry(env: &TestEnv) -> Client {
    env.client_without_retry().await.expect("client builds")
}

/// The outcome of a raw request: HTTP status code and the body parsed as JSON (Null if not JSON).
#[derive(Debug)]
pub(crate) struct RawResponse {
    /// HTTP status code.
    pub code: u16,
    /// The body as JSON, or Null.
    pub json: serde_json::Value,
    /// The body as text.
    pub text: String,
}

/// Sends a raw request through the client's authenticated transport.
pub(crate) async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> RawResponse {
    let mut req = http::Request::builder().method(method).uri(path);
    if let Some(ct) = content_type {
        req = req.header(http::header::CONTENT_TYPE, ct);
    }
    let req = req.body(kube::client::Body::from(body)).expect("request builds");
    let res =
        within(&format!("{method} {path}"), client.send(req)).await.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let code = res.status().as_u16();
    let bytes = within(&format!("response body of {method} {path}"), res.into_body().collect())
        .await
        .expect("read body")
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    RawResponse { code, json, text }
}
