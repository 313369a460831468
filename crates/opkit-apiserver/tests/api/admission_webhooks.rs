//! Admission webhooks called by the API server (kube's MutatingAdmissionWebhook and
//! ValidatingAdmissionWebhook): a test webhook server on 127.0.0.1 (HTTPS, its
//! certificate signed by a CA given as `caBundle`) answers as each test says; kube-rs
//! and kubectl see allow, deny, mutate and warnings, failurePolicy with the webhook down,
//! timeouts, selectors, matchConditions, reinvocation, dryRun with sideEffects, DELETE,
//! a Service-backed webhook and a status-subresource rule.

use std::convert::Infallible;
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Namespace, Service};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use opkit_serve::tls::DevCa;
use opkit_testenv::TestEnv;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::common::{config_map, env, env_with_flights, expect_status, flight, within};
use crate::pod_streaming::run_kubectl;

/// How the test webhook answers one review: the `response` fields besides `uid`, or
/// None to never answer.
type Answer = Arc<dyn Fn(&str, &Value) -> Option<Value> + Send + Sync>;

/// A webhook server on 127.0.0.1 that records the AdmissionReviews it receives.
pub(crate) struct TestWebhook {
    /// `https://127.0.0.1:PORT`.
    base: String,
    /// The port it listens on.
    pub(crate) port: u16,
    /// Its CA (PEM), for `caBundle`.
    ca_pem: String,
    /// (path, AdmissionReview) of every call, in order.
    seen: Arc<Mutex<Vec<(String, Value)>>>,
    _task: tokio::task::JoinHandle<()>,
}

impl TestWebhook {
    /// Serves `answer` with a certificate for 127.0.0.1 and `names`.
    async fn start(names: &[&str], answer: impl Fn(&str, &Value) -> Option<Value> + Send + Sync + 'static) -> Self {
        let ca = DevCa::generate("test webhook CA").expect("ca");
        let mut hosts = vec!["127.0.0.1".to_owned()];
        hosts.extend(names.iter().map(|n| n.to_string()));
        let serving = ca.issue_serving_cert("webhook", &hosts).expect("serving cert");
        TestWebhook::serve(&serving.cert_pem, &serving.key_pem, ca.cert_pem(), answer).await
    }

    /// Serves `answer` with the certificate `cert_pem` (key `key_pem`); `ca_pem` is what
    /// [`TestWebhook::url`] gives as `caBundle`.
    pub(crate) async fn serve(
        cert_pem: &str,
        key_pem: &str,
        ca_pem: &str,
        answer: impl Fn(&str, &Value) -> Option<Value> + Send + Sync + 'static,
    ) -> Self {
        let answer: Answer = Arc::new(answer);
        let config = opkit_serve::tls::server_config(cert_pem, key_pem).expect("tls config");
        let mut config = (*config).clone();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else { return };
                    let (acceptor, seen, answer) = (acceptor.clone(), seen.clone(), answer.clone());
                    tokio::spawn(async move {
                        let Ok(tls) = acceptor.accept(tcp).await else { return };
                        let service = hyper::service::service_fn(move |req| {
                            let (seen, answer) = (seen.clone(), answer.clone());
                            async move { Ok::<_, Infallible>(reply(req, seen, answer).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tls), service)
                            .await;
                    });
                }
            }
        });
        TestWebhook { base: format!("https://127.0.0.1:{port}"), port, ca_pem: ca_pem.to_owned(), seen, _task: task }
    }

    /// A `clientConfig` calling `path` by URL.
    pub(crate) fn url(&self, path: &str) -> Value {
        json!({"url": format!("{}{path}", self.base), "caBundle": b64(&self.ca_pem)})
    }

    /// The reviews received on `path`.
    pub(crate) fn calls(&self, path: &str) -> Vec<Value> {
        self.seen.lock().iter().filter(|(p, _)| p == path).map(|(_, r)| r.clone()).collect()
    }
}

/// Answers one review as `answer` says.
async fn reply(
    req: Request<Incoming>,
    seen: Arc<Mutex<Vec<(String, Value)>>>,
    answer: Answer,
) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    seen.lock().push((path.clone(), review.clone()));
    let Some(mut response) = answer(&path, &review) else {
        std::future::pending::<()>().await;
        unreachable!("a pending future never completes");
    };
    if response.get("uid").is_none() {
        response["uid"] = review["request"]["uid"].clone();
    }
    let out = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
    let mut r = Response::new(Full::new(Bytes::from(serde_json::to_vec(&out).expect("json"))));
    r.headers_mut().insert("content-type", "application/json".parse().expect("content type"));
    r
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A JSONPatch answer.
fn patch_answer(ops: Value) -> Value {
    json!({"allowed": true, "patchType": "JSONPatch", "patch": b64(&ops.to_string())})
}

/// A webhook entry for `configmaps` CREATE (rules and other fields may be overridden).
pub(crate) fn hook(name: &str, client_config: Value, extra: Value) -> Value {
    let mut w = json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    if let (Some(w), Some(extra)) = (w.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            w.insert(k.clone(), v.clone());
        }
    }
    w
}

pub(crate) async fn validating(client: &Client, name: &str, webhooks: Vec<Value>) {
    let config: ValidatingWebhookConfiguration =
        serde_json::from_value(json!({"metadata": {"name": name}, "webhooks": webhooks})).expect("config");
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    within("create validating config", api.create(&PostParams::default(), &config)).await.expect("create config");
}

async fn mutating(client: &Client, name: &str, webhooks: Vec<Value>) {
    let config: MutatingWebhookConfiguration =
        serde_json::from_value(json!({"metadata": {"name": name}, "webhooks": webhooks})).expect("config");
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    within("create mutating config", api.create(&PostParams::default(), &config)).await.expect("create config");
}

fn cms(env: &TestEnv, ns: &str) -> Api<ConfigMap> {
    Api::namespaced(env.client(), ns)
}

async fn create(api: &Api<ConfigMap>, cm: &ConfigMap) -> Result<ConfigMap, kube::Error> {
    within("create configmap", api.create(&PostParams::default(), cm)).await
}

fn labelled(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut cm = config_map(name, &[("k", "v")]);
    cm.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    cm
}

/// A webhook that allows everything and one that denies everything.
pub(crate) fn allow_or_deny(path: &str, _: &Value) -> Option<Value> {
    Some(match path {
        "/deny" => json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": "no thanks"}}),
        _ => json!({"allowed": true}),
    })
}

#[tokio::test]
async fn an_allowing_webhook_receives_kubes_admission_review() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], allow_or_deny).await;
    validating(&env.client(), "allow", vec![hook("allow.test.opkit.dev", webhook.url("/allow"), json!({}))]).await;

    create(&cms(&env, "default"), &config_map("ok", &[("k", "v")])).await.expect("allowed");
    let calls = webhook.calls("/allow");
    assert_eq!(calls.len(), 1, "{calls:?}");
    let review = &calls[0];
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    let request = &review["request"];
    assert!(request["uid"].as_str().is_some_and(|u| !u.is_empty()), "{request}");
    assert_eq!(request["kind"], json!({"group": "", "version": "v1", "kind": "ConfigMap"}));
    assert_eq!(request["resource"], json!({"group": "", "version": "v1", "resource": "configmaps"}));
    assert_eq!(request["requestKind"], request["kind"]);
    assert_eq!(request["requestResource"], request["resource"]);
    assert_eq!((request["name"].as_str(), request["namespace"].as_str()), (Some("ok"), Some("default")));
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(request["userInfo"]["username"], "kubernetes-admin");
    assert!(request["userInfo"]["groups"].as_array().is_some_and(|g| g.contains(&json!("system:masters"))));
    assert_eq!(request["object"]["data"], json!({"k": "v"}));
    assert_eq!(request["oldObject"], Value::Null);
    assert_eq!(request["dryRun"], false);
    assert_eq!(request["options"]["kind"], "CreateOptions");
    assert_eq!(request["options"]["apiVersion"], "meta.k8s.io/v1");
}

#[tokio::test]
async fn a_denial_reaches_kubectl_as_kube_words_it() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], allow_or_deny).await;
    validating(&env.client(), "deny", vec![hook("deny.test.opkit.dev", webhook.url("/deny"), json!({}))]).await;

    let (ok, _, stderr) = run_kubectl("1.33", &env, &["create", "configmap", "refused", "--from-literal=a=b"]).await;
    assert!(!ok);
    assert_eq!(
        stderr.trim(),
        "error: failed to create configmap: admission webhook \"deny.test.opkit.dev\" denied the request: no thanks"
    );
    let status = expect_status(create(&cms(&env, "default"), &config_map("refused", &[])).await, 403, "Forbidden");
    assert_eq!(status.message, "admission webhook \"deny.test.opkit.dev\" denied the request: no thanks");
}

#[tokio::test]
async fn a_denial_without_a_status_is_a_400_without_explanation() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], |_, _| Some(json!({"allowed": false}))).await;
    validating(&env.client(), "deny", vec![hook("silent.test.opkit.dev", webhook.url("/"), json!({}))]).await;
    let status = expect_status(create(&cms(&env, "default"), &config_map("refused", &[])).await, 400, "");
    assert_eq!(status.message, "admission webhook \"silent.test.opkit.dev\" denied the request without explanation");
}

#[tokio::test]
async fn a_mutating_webhooks_patch_is_kept() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], |_, _| {
        Some(patch_answer(json!([
            {"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}},
            {"op": "replace", "path": "/data/k", "value": "patched"}
        ])))
    })
    .await;
    mutating(&env.client(), "mutate", vec![hook("mutate.test.opkit.dev", webhook.url("/mutate"), json!({}))]).await;

    let created = create(&cms(&env, "default"), &config_map("m", &[("k", "v")])).await.expect("created");
    assert_eq!(created.metadata.labels.unwrap_or_default().get("mutated").map(String::as_str), Some("yes"));
    let stored = within("get", cms(&env, "default").get("m")).await.expect("get");
    assert_eq!(stored.data.unwrap_or_default().get("k").map(String::as_str), Some("patched"));
}

#[tokio::test]
async fn warnings_are_printed_by_kubectl() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], |_, _| Some(json!({"allowed": true, "warnings": ["mind the gap"]}))).await;
    validating(&env.client(), "warn", vec![hook("warn.test.opkit.dev", webhook.url("/warn"), json!({}))]).await;
    let (ok, _, stderr) = run_kubectl("1.33", &env, &["create", "configmap", "warned", "--from-literal=a=b"]).await;
    assert!(ok, "{stderr}");
    assert!(stderr.contains("Warning: mind the gap"), "{stderr}");
}

/// A port on 127.0.0.1 nothing listens on.
async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    listener.local_addr().expect("addr").port()
}

#[tokio::test]
async fn failure_policy_fail_refuses_and_ignore_admits_when_the_webhook_is_down() {
    let env = env().await;
    let ca = DevCa::generate("unused").expect("ca");
    let port = closed_port().await;
    let down = |path: &str| json!({"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": b64(ca.cert_pem())});
    let fail_rule = json!({"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "scope": "Namespaced"}], "objectSelector": {"matchLabels": {"policy": "fail"}}});
    let ignore = json!({"failurePolicy": "Ignore", "objectSelector": {"matchLabels": {"policy": "ignore"}}});
    validating(
        &env.client(),
        "down",
        vec![
            hook("fail.test.opkit.dev", down("/fail"), fail_rule),
            hook("ignore.test.opkit.dev", down("/ignore"), ignore),
        ],
    )
    .await;

    let api = cms(&env, "default");
    let status = expect_status(create(&api, &labelled("f", &[("policy", "fail")])).await, 500, "InternalError");
    assert_eq!(
        status.message,
        format!(
            "Internal error occurred: failed calling webhook \"fail.test.opkit.dev\": failed to call webhook: Post \"https://127.0.0.1:{port}/fail?timeout=10s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
    create(&api, &labelled("i", &[("policy", "ignore")])).await.expect("failurePolicy Ignore admits");
}

#[tokio::test]
async fn a_webhook_that_does_not_answer_in_time_fails_the_request() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], |_, _| None).await;
    validating(
        &env.client(),
        "slow",
        vec![hook("slow.test.opkit.dev", webhook.url("/slow"), json!({"timeoutSeconds": 1}))],
    )
    .await;
    let status = expect_status(create(&cms(&env, "default"), &config_map("late", &[])).await, 500, "InternalError");
    assert_eq!(
        status.message,
        format!(
            "Internal error occurred: failed calling webhook \"slow.test.opkit.dev\": failed to call webhook: Post \"{}/slow?timeout=1s\": context deadline exceeded",
            webhook.base
        )
    );
}

#[tokio::test]
async fn namespace_selectors_match_the_namespaces_labels() {
    let env = env().await;
    let namespaces: Api<Namespace> = Api::all(env.client());
    for (name, labels) in [("guarded", json!({"webhooks": "on"})), ("open", json!({}))] {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).expect("ns");
        within("create ns", namespaces.create(&PostParams::default(), &ns)).await.expect("namespace");
    }
    let webhook = TestWebhook::start(&[], allow_or_deny).await;
    let selector = json!({"namespaceSelector": {"matchLabels": {"webhooks": "on"}}});
    validating(&env.client(), "deny", vec![hook("deny.test.opkit.dev", webhook.url("/deny"), selector)]).await;

    expect_status(create(&cms(&env, "guarded"), &config_map("a", &[])).await, 403, "Forbidden");
    create(&cms(&env, "open"), &config_map("a", &[])).await.expect("not selected");
}

#[tokio::test]
async fn object_selectors_match_the_objects_labels() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], allow_or_deny).await;
    let selector =
        json!({"objectSelector": {"matchExpressions": [{"key": "checked", "operator": "In", "values": ["yes"]}]}});
    validating(&env.client(), "deny", vec![hook("deny.test.opkit.dev", webhook.url("/deny"), selector)]).await;
    let api = cms(&env, "default");
    expect_status(create(&api, &labelled("a", &[("checked", "yes")])).await, 403, "Forbidden");
    create(&api, &labelled("b", &[("checked", "no")])).await.expect("not selected");
    assert_eq!(webhook.calls("/deny").len(), 1);
}

#[tokio::test]
async fn match_conditions_select_requests_and_a_failing_condition_follows_the_failure_policy() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], allow_or_deny).await;
    let conditions = json!({"matchConditions": [
        {"name": "checked-only", "expression": "object.metadata.name.startsWith('checked-')"},
        {"name": "labelled-x", "expression": "object.metadata.labels.x == 'y' && request.userInfo.username != 'nobody'"},
    ]});
    validating(&env.client(), "deny", vec![hook("deny.test.opkit.dev", webhook.url("/deny"), conditions)]).await;
    let api = cms(&env, "default");
    let status = expect_status(create(&api, &labelled("checked-a", &[("x", "y")])).await, 403, "Forbidden");
    assert!(status.message.contains("denied the request: no thanks"), "{}", status.message);
    create(&api, &labelled("other", &[("x", "y")])).await.expect("condition false: not called");
    assert_eq!(webhook.calls("/deny").len(), 1);

    // A condition that cannot be evaluated (no labels to index) fails closed, as kube's 403.
    let status = expect_status(create(&api, &config_map("checked-b", &[])).await, 403, "Forbidden");
    assert!(status.message.starts_with("configmaps \"checked-b\" is forbidden: "), "{}", status.message);
    assert_eq!(webhook.calls("/deny").len(), 1, "a webhook whose condition fails is not called");
}

#[tokio::test]
async fn an_if_needed_webhook_is_reinvoked_after_a_later_webhook_changes_the_object() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], |path, review| {
        let labels = &review["request"]["object"]["metadata"]["labels"];
        Some(match path {
            // Adds its label once; reinvoked, it sees the second webhook's label.
            "/first" if labels.is_null() => {
                patch_answer(json!([{"op": "add", "path": "/metadata/labels", "value": {"first": "yes"}}]))
            }
            "/first" => json!({"allowed": true}),
            "/second" => patch_answer(json!([{"op": "add", "path": "/metadata/labels/second", "value": "yes"}])),
            _ => json!({"allowed": true}),
        })
    })
    .await;
    mutating(
        &env.client(),
        "a-first",
        vec![hook("first.test.opkit.dev", webhook.url("/first"), json!({"reinvocationPolicy": "IfNeeded"}))],
    )
    .await;
    mutating(&env.client(), "b-second", vec![hook("second.test.opkit.dev", webhook.url("/second"), json!({}))]).await;

    let created = create(&cms(&env, "default"), &config_map("r", &[])).await.expect("created");
    let labels = created.metadata.labels.unwrap_or_default();
    assert_eq!((labels.get("first"), labels.get("second")), (Some(&"yes".into()), Some(&"yes".into())));
    let first = webhook.calls("/first");
    assert_eq!(first.len(), 2, "reinvoked once");
    assert_eq!(first[1]["request"]["object"]["metadata"]["labels"]["second"], "yes", "reinvoked with the change");
    assert_eq!(webhook.calls("/second").len(), 1, "Never is not reinvoked");
}

#[tokio::test]
async fn dry_run_calls_webhooks_without_side_effects_and_refuses_the_others() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], allow_or_deny).await;
    let none = json!({"objectSelector": {"matchLabels": {"side": "none"}}});
    let some = json!({"sideEffects": "Some", "objectSelector": {"matchLabels": {"side": "some"}}});
    validating(
        &env.client(),
        "dry",
        vec![
            hook("none.test.opkit.dev", webhook.url("/none"), none),
            hook("some.test.opkit.dev", webhook.url("/some"), some),
        ],
    )
    .await;
    let api = cms(&env, "default");
    let dry = PostParams { dry_run: true, ..Default::default() };
    within("dry run", api.create(&dry, &labelled("a", &[("side", "none")]))).await.expect("sideEffects None");
    let calls = webhook.calls("/none");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["request"]["dryRun"], true);
    assert_eq!(calls[0]["request"]["options"]["dryRun"], json!(["All"]));

    let status = expect_status(
        within("dry run", api.create(&dry, &labelled("b", &[("side", "some")]))).await,
        400,
        "BadRequest",
    );
    assert_eq!(status.message, "admission webhook \"some.test.opkit.dev\" does not support dry run");
    assert!(webhook.calls("/some").is_empty());
    create(&api, &labelled("b", &[("side", "some")])).await.expect("no dry run: called");
    assert_eq!(webhook.calls("/some").len(), 1);
}

#[tokio::test]
async fn delete_webhooks_see_the_old_object_and_may_refuse() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], |_, review| {
        Some(if review["request"]["oldObject"]["metadata"]["labels"]["keep"] == "yes" {
            json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": "kept"}})
        } else {
            json!({"allowed": true})
        })
    })
    .await;
    let rules = json!({"rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]});
    validating(&env.client(), "del", vec![hook("delete.test.opkit.dev", webhook.url("/delete"), rules)]).await;
    let api = cms(&env, "default");
    create(&api, &labelled("kept", &[("keep", "yes")])).await.expect("create is not matched");
    create(&api, &labelled("gone", &[])).await.expect("create");
    assert!(webhook.calls("/delete").is_empty());

    let (ok, _, stderr) = run_kubectl("1.33", &env, &["delete", "configmap", "kept"]).await;
    assert!(!ok);
    assert_eq!(
        stderr.trim(),
        "Error from server (Forbidden): admission webhook \"delete.test.opkit.dev\" denied the request: kept"
    );
    within("delete", api.delete("gone", &DeleteParams::default())).await.expect("allowed delete");
    let calls = webhook.calls("/delete");
    assert_eq!(calls.len(), 2);
    let request = &calls[1]["request"];
    assert_eq!((request["operation"].as_str(), request["name"].as_str()), (Some("DELETE"), Some("gone")));
    assert_eq!(request["object"], Value::Null);
    assert_eq!(request["oldObject"]["metadata"]["name"], "gone");
    assert_eq!(request["options"]["kind"], "DeleteOptions");
    within("get", api.get("kept")).await.expect("still there");
}

#[tokio::test]
async fn a_webhook_is_reached_through_a_service_whose_endpoints_are_loopback() {
    let env = env().await;
    let webhook = TestWebhook::start(&["hooks.default.svc"], allow_or_deny).await;
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let service: Service = serde_json::from_value(json!({"metadata": {"name": "hooks"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": webhook.port}]}}))
    .expect("service");
    within("service", services.create(&PostParams::default(), &service)).await.expect("create service");
    let endpoints: Api<Endpoints> = Api::namespaced(env.client(), "default");
    let ep: Endpoints = serde_json::from_value(json!({"metadata": {"name": "hooks"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": webhook.port}]}]}))
    .expect("endpoints");
    within("endpoints", endpoints.create(&PostParams::default(), &ep)).await.expect("create endpoints");
    let by_service = json!({"service": {"namespace": "default", "name": "hooks", "path": "/deny", "port": 443},
        "caBundle": b64(&webhook.ca_pem)});
    validating(&env.client(), "svc", vec![hook("svc.test.opkit.dev", by_service, json!({}))]).await;

    let status = expect_status(create(&cms(&env, "default"), &config_map("x", &[])).await, 403, "Forbidden");
    assert_eq!(status.message, "admission webhook \"svc.test.opkit.dev\" denied the request: no thanks");
    assert_eq!(webhook.calls("/deny").len(), 1);
}

#[tokio::test]
async fn a_status_subresource_rule_matches_status_updates_only() {
    let env = env_with_flights().await;
    let webhook = TestWebhook::start(&[], allow_or_deny).await;
    let rules = json!({"rules": [{"operations": ["UPDATE"], "apiGroups": ["flights.com"], "apiVersions": ["*"], "resources": ["flighttickets/status"]}]});
    validating(&env.client(), "status", vec![hook("status.test.opkit.dev", webhook.url("/deny"), rules)]).await;
    let api: Api<crate::common::FlightTicket> = Api::namespaced(env.client(), "default");
    within("create", api.create(&PostParams::default(), &flight("f", "AMS", "LIS", 2))).await.expect("create");
    let params = PatchParams::default();
    within("patch spec", api.patch("f", &params, &Patch::Merge(json!({"spec": {"number": 3}}))))
        .await
        .expect("the main resource is not matched");
    let status = expect_status(
        within("patch status", api.patch_status("f", &params, &Patch::Merge(json!({"status": {"state": "booked"}}))))
            .await,
        403,
        "Forbidden",
    );
    assert_eq!(status.message, "admission webhook \"status.test.opkit.dev\" denied the request: no thanks");
    let calls = webhook.calls("/deny");
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0]["request"]["subResource"].as_str(), calls[0]["request"]["operation"].as_str()),
        (Some("status"), Some("UPDATE"))
    );
}

#[tokio::test]
async fn webhook_configurations_are_never_sent_to_webhooks() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], allow_or_deny).await;
    let everything =
        json!({"rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}]});
    validating(&env.client(), "deny-all", vec![hook("all.test.opkit.dev", webhook.url("/deny"), everything)]).await;
    validating(&env.client(), "another", vec![hook("x.test.opkit.dev", webhook.url("/allow"), json!({}))]).await;
    expect_status(create(&cms(&env, "default"), &config_map("c", &[])).await, 403, "Forbidden");
    let api: Api<ValidatingWebhookConfiguration> = Api::all(env.client());
    within("delete", api.delete("deny-all", &DeleteParams::default())).await.expect("configurations are exempt");
    create(&cms(&env, "default"), &config_map("c", &[])).await.expect("the deny-all webhook is gone at once");
}

#[tokio::test]
async fn review_versions_and_the_response_uid_are_checked() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], |path, _| {
        Some(match path {
            "/liar" => json!({"uid": "not-the-request", "allowed": true}),
            _ => json!({"allowed": true}),
        })
    })
    .await;
    let only = |label: &str| json!({"matchLabels": {"hook": label}});
    validating(
        &env.client(),
        "versions",
        vec![
            hook(
                "beta.test.opkit.dev",
                webhook.url("/beta"),
                json!({"admissionReviewVersions": ["v1beta1"], "objectSelector": only("beta")}),
            ),
            hook(
                "v9.test.opkit.dev",
                webhook.url("/v9"),
                json!({"admissionReviewVersions": ["v9"], "objectSelector": only("v9")}),
            ),
            hook("liar.test.opkit.dev", webhook.url("/liar"), json!({"objectSelector": only("liar")})),
        ],
    )
    .await;
    let api = cms(&env, "default");
    create(&api, &labelled("b", &[("hook", "beta")])).await.expect("a v1beta1 webhook is sent v1beta1");
    assert_eq!(webhook.calls("/beta")[0]["apiVersion"], "admission.k8s.io/v1beta1");

    let status = expect_status(create(&api, &labelled("c", &[("hook", "v9")])).await, 500, "InternalError");
    assert_eq!(
        status.message,
        "Internal error occurred: failed calling webhook \"v9.test.opkit.dev\": could not create admission objects: webhook does not accept known AdmissionReview versions"
    );
    assert!(webhook.calls("/v9").is_empty());

    let status = expect_status(create(&api, &labelled("d", &[("hook", "liar")])).await, 500, "InternalError");
    let uid = webhook.calls("/liar")[0]["request"]["uid"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        status.message,
        format!(
            "Internal error occurred: failed calling webhook \"liar.test.opkit.dev\": received invalid webhook response: expected response.uid=\"{uid}\", got \"not-the-request\""
        )
    );
}

#[tokio::test]
async fn equivalent_match_policy_sends_the_object_at_the_webhooks_version() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], |path, _| {
        Some(match path {
            "/mutate" => patch_answer(json!([{"op": "add", "path": "/metadata/labels", "value": {"seen-at": "v2"}}])),
            _ => json!({"allowed": true}),
        })
    })
    .await;
    let v2_only = |policy: &str| json!({"matchPolicy": policy, "rules": [{"operations": ["CREATE"], "apiGroups": ["autoscaling"], "apiVersions": ["v2"], "resources": ["horizontalpodautoscalers"]}]});
    mutating(
        &env.client(),
        "at-v2",
        vec![hook("mutate.test.opkit.dev", webhook.url("/mutate"), v2_only("Equivalent"))],
    )
    .await;
    validating(
        &env.client(),
        "at-v2",
        vec![
            hook("equivalent.test.opkit.dev", webhook.url("/equivalent"), v2_only("Equivalent")),
            hook("exact.test.opkit.dev", webhook.url("/exact"), v2_only("Exact")),
        ],
    )
    .await;

    let hpa = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}});
    let path = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
    let res =
        crate::common::raw(&env.client(), "POST", path, Some("application/json"), hpa.to_string().into_bytes()).await;
    assert_eq!(res.code, 201, "{}", res.text);
    assert_eq!(res.json["apiVersion"], "autoscaling/v1");
    assert_eq!(res.json["metadata"]["labels"]["seen-at"], "v2", "the patch made at v2 is kept at v1");
    assert_eq!(res.json["spec"]["targetCPUUtilizationPercentage"], 50);

    assert!(webhook.calls("/exact").is_empty(), "matchPolicy Exact does not match v1");
    let calls = webhook.calls("/equivalent");
    assert_eq!(calls.len(), 1);
    let request = &calls[0]["request"];
    assert_eq!(request["kind"], json!({"group": "autoscaling", "version": "v2", "kind": "HorizontalPodAutoscaler"}));
    assert_eq!(request["requestKind"]["version"], "v1");
    assert_eq!(request["resource"]["version"], "v2");
    assert_eq!(request["requestResource"]["version"], "v1");
    assert_eq!(request["object"]["apiVersion"], "autoscaling/v2");
    assert_eq!(request["object"]["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 50, "{request}");
    assert_eq!(request["object"]["metadata"]["labels"]["seen-at"], "v2");
}

#[tokio::test]
async fn a_denials_code_reason_and_causes_reach_the_client() {
    let env = env().await;
    let webhook = TestWebhook::start(&[], |_, _| {
        Some(json!({"allowed": false, "status": {"code": 422, "reason": "Invalid", "message": "data.k: must be upper case",
            "details": {"name": "lower", "kind": "ConfigMap",
                "causes": [{"reason": "FieldValueInvalid", "message": "must be upper case", "field": "data.k"}]}}}))
    })
    .await;
    validating(&env.client(), "invalid", vec![hook("upper.test.opkit.dev", webhook.url("/"), json!({}))]).await;
    let status =
        expect_status(create(&cms(&env, "default"), &config_map("lower", &[("k", "v")])).await, 422, "Invalid");
    assert_eq!(
        status.message,
        "admission webhook \"upper.test.opkit.dev\" denied the request: data.k: must be upper case"
    );
    let details = status.details.expect("details");
    assert_eq!((details.name.as_str(), details.kind.as_str()), ("lower", "ConfigMap"));
    assert_eq!(details.causes.len(), 1);
    assert_eq!((details.causes[0].field.as_str(), details.causes[0].reason.as_str()), ("data.k", "FieldValueInvalid"));
}

#[tokio::test]
async fn a_webhooks_audit_annotations_reach_the_audit_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("audit.log");
    let cfg =
        opkit_apiserver::ServerConfig { audit_log: Some(path.clone()), ..opkit_apiserver::ServerConfig::in_memory() };
    let env = TestEnv::builder().server(cfg).without_controllers().start().await.expect("env");
    let webhook =
        TestWebhook::start(&[], |_, _| Some(json!({"allowed": true, "auditAnnotations": {"checked": "quota"}}))).await;
    validating(&env.client(), "auditing", vec![hook("audit.test.opkit.dev", webhook.url("/audit"), json!({}))]).await;
    create(&cms(&env, "default"), &config_map("audited", &[])).await.expect("allowed");

    let log = std::fs::read_to_string(&path).expect("audit log");
    let created = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["verb"] == "create" && e["objectRef"]["resource"] == "configmaps")
        .expect("the create's event");
    assert_eq!(created["annotations"]["audit.test.opkit.dev/checked"], "quota", "{created}");
}
