//! CRD conversion with `strategy: Webhook`: a test conversion webhook (HTTPS on
//! 127.0.0.1, certificate from a CA made for the test and passed as `caBundle`) converts
//! `Trip` between `v1` (`spec.from`, `spec.to`) and `v2` (`spec.route: {from, to}`).
//! Reads, lists, watches and writes at either version go through it; failures are
//! reported as kube-apiserver reports them.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use http_body_util::{BodyExt, Full};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::core::WatchEvent;
use opkit_serve::RemoteAddr;
use opkit_serve::tls::DevCa;
use opkit_testenv::TestEnv;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::{env, next_item, status_of, within};
use crate::pod_streaming::run_kubectl;

const GROUP: &str = "conv.example.com";

/// How the test webhook answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Converts every object.
    Convert,
    /// Answers `result.status: Failure` with a message.
    Fail,
    /// Converts, but renames every object.
    Rename,
}

/// The test conversion webhook: its address, its CA, what it received, and how it answers.
struct Webhook {
    addr: SocketAddr,
    ca_pem: String,
    mode: Arc<Mutex<Mode>>,
    reviews: Arc<Mutex<Vec<Value>>>,
    /// The client address of each review's connection.
    peers: Arc<Mutex<Vec<SocketAddr>>>,
    stop: CancellationToken,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Webhook {
    /// The `clientConfig` of the webhook, by URL.
    fn client_config(&self) -> Value {
        json!({"url": format!("https://{}/convert", self.addr),
            "caBundle": base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)})
    }

    fn set_mode(&self, mode: Mode) {
        *self.mode.lock() = mode;
    }

    /// The reviews received so far.
    fn reviews(&self) -> Vec<Value> {
        self.reviews.lock().clone()
    }
}

/// `obj` at `desired`: v1 has `spec.from`/`spec.to`, v2 has `spec.route`; an object
/// converted to v2 is labelled `converted-to-v2: "true"`.
fn convert(obj: &Value, desired: &str) -> Value {
    let mut out = obj.clone();
    out["apiVersion"] = json!(desired);
    let spec = &obj["spec"];
    if desired.ends_with("/v2") {
        out["metadata"]["labels"]["converted-to-v2"] = json!("true");
    }
    if desired.ends_with("/v2") && spec.get("route").is_none() {
        out["spec"] = json!({"route": {"from": spec["from"], "to": spec["to"]}});
    } else if desired.ends_with("/v1") && spec.get("route").is_some() {
        out["spec"] = json!({"from": spec["route"]["from"], "to": spec["route"]["to"]});
    }
    out
}

/// The webhook's answer to `review`.
fn answer(review: &Value, mode: Mode) -> Value {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
    let response = match mode {
        Mode::Fail => {
            json!({"uid": request["uid"], "result": {"status": "Failure", "message": "cannot convert this trip"}})
        }
        Mode::Convert | Mode::Rename => {
            let objects: Vec<Value> = request["objects"]
                .as_array()
                .map(|objs| {
                    objs.iter()
                        .map(|o| {
                            let mut c = convert(o, desired);
                            if mode == Mode::Rename {
                                let renamed = format!("{}-renamed", o["metadata"]["name"].as_str().unwrap_or_default());
                                c["metadata"]["name"] = json!(renamed);
                            }
                            c
                        })
                        .collect()
                })
                .unwrap_or_default();
            json!({"uid": request["uid"], "result": {"status": "Success"}, "convertedObjects": objects})
        }
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response})
}

/// The name of the Service the webhook is also reachable through, in `default`.
const SERVICE: &str = "trip-converter";

/// Starts the test webhook on 127.0.0.1 (its certificate also names the Service
/// [`SERVICE`]); it stops when the returned value is dropped.
async fn webhook() -> Webhook {
    let ca = DevCa::generate("conversion-webhook-ca").expect("CA");
    let hosts = ["127.0.0.1".to_string(), format!("{SERVICE}.default.svc")];
    let cert = ca.issue_serving_cert("127.0.0.1", &hosts).expect("serving certificate");
    let tls = opkit_serve::tls::server_config(&cert.cert_pem, &cert.key_pem).expect("TLS config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let server = opkit_serve::Server::new(listener).tls(tls);
    let addr = server.local_addr().expect("address");
    let mode = Arc::new(Mutex::new(Mode::Convert));
    let reviews = Arc::new(Mutex::new(Vec::new()));
    let peers = Arc::new(Mutex::new(Vec::new()));
    let (m, r, p) = (mode.clone(), reviews.clone(), peers.clone());
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let (mode, reviews, peers) = (m.clone(), r.clone(), p.clone());
        async move {
            if let Some(RemoteAddr(peer)) = req.extensions().get::<RemoteAddr>() {
                peers.lock().push(*peer);
            }
            let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            reviews.lock().push(review.clone());
            let out = answer(&review, *mode.lock()).to_string();
            let mut res = hyper::Response::new(Full::new(Bytes::from(out)));
            res.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
            Ok::<_, Infallible>(res)
        }
    });
    let stop = CancellationToken::new();
    tokio::spawn(server.serve(service, stop.clone()));
    Webhook { addr, ca_pem: ca.cert_pem().to_string(), mode, reviews, peers, stop }
}

/// The Trip CRD: v1 and v2 served, `storage` the storage version, converted by the
/// webhook `client_config` names.
fn trip_crd(storage: &str, client_config: Value) -> CustomResourceDefinition {
    let v1 = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "from": {"type": "string"}, "to": {"type": "string"}}}}});
    let v2 = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "route": {"type": "object", "properties": {"from": {"type": "string"}, "to": {"type": "string"}}}}}}});
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("trips.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": "trips", "singular": "trip", "kind": "Trip", "listKind": "TripList"},
            "versions": [
                {"name": "v1", "served": true, "storage": storage == "v1", "schema": {"openAPIV3Schema": v1}},
                {"name": "v2", "served": true, "storage": storage == "v2", "schema": {"openAPIV3Schema": v2},
                    "selectableFields": [{"jsonPath": ".spec.route.from"}]},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": client_config, "conversionReviewVersions": ["v1"]}}}
    }))
    .expect("CRD")
}

/// An environment with the Trip CRD converted by `webhook` (stored at v1).
async fn env_with_trips(webhook: &Webhook) -> TestEnv {
    let env = env().await;
    within("installing the Trip CRD", env.install_crds([trip_crd("v1", webhook.client_config())]))
        .await
        .expect("install the Trip CRD");
    env
}

/// The Trip API at `version` in `default`.
fn trips(env: &TestEnv, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, "Trip"), "trips");
    Api::namespaced_with(env.client(), "default", &ar)
}

/// A Trip named `name` at `version`, from `from` to `to`.
fn trip(name: &str, version: &str, from: &str, to: &str) -> DynamicObject {
    let spec =
        if version == "v1" { json!({"from": from, "to": to}) } else { json!({"route": {"from": from, "to": to}}) };
    serde_json::from_value(json!({"apiVersion": format!("{GROUP}/{version}"), "kind": "Trip",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec}))
    .expect("Trip")
}

fn spec(obj: &DynamicObject) -> &Value {
    &obj.data["spec"]
}

/// The desired versions of the reviews received, in order.
fn desired_versions(webhook: &Webhook) -> Vec<String> {
    webhook
        .reviews()
        .iter()
        .map(|r| r["request"]["desiredAPIVersion"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn created_at_v1_is_read_at_v2_through_the_webhook_by_kube_rs_and_kubectl() {
    let webhook = webhook().await;
    let env = env_with_trips(&webhook).await;
    within("create", trips(&env, "v1").create(&PostParams::default(), &trip("a", "v1", "AMS", "LIS")))
        .await
        .expect("create");
    assert!(webhook.reviews().is_empty(), "a create at the storage version converts nothing");

    let at_v2 = within("get at v2", trips(&env, "v2").get("a")).await.expect("get at v2");
    assert_eq!(at_v2.types.as_ref().map(|t| t.api_version.as_str()), Some("conv.example.com/v2"));
    assert_eq!(spec(&at_v2), &json!({"route": {"from": "AMS", "to": "LIS"}}));
    let review = &webhook.reviews()[0];
    assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(review["kind"], "ConversionReview");
    assert_eq!(review["request"]["desiredAPIVersion"], "conv.example.com/v2");
    assert!(review["request"]["uid"].as_str().is_some_and(|u| !u.is_empty()));
    assert_eq!(review["request"]["objects"][0]["spec"], json!({"from": "AMS", "to": "LIS"}));

    let at_v1 = within("get at v1", trips(&env, "v1").get("a")).await.expect("get at v1");
    assert_eq!(spec(&at_v1), &json!({"from": "AMS", "to": "LIS"}));
    assert_eq!(webhook.reviews().len(), 1, "a read at the stored version converts nothing");

    let (ok, out, err) = run_kubectl("1.33", &env, &["get", "trips.v2.conv.example.com", "a", "-o", "json"]).await;
    assert!(ok, "kubectl get at v2: {err}");
    let obj: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    assert_eq!(obj["apiVersion"], "conv.example.com/v2");
    assert_eq!(obj["spec"], json!({"route": {"from": "AMS", "to": "LIS"}}));
}

#[tokio::test]
async fn created_at_v2_is_stored_at_v1_and_answered_at_v2() {
    let webhook = webhook().await;
    let env = env_with_trips(&webhook).await;
    let created =
        within("create at v2", trips(&env, "v2").create(&PostParams::default(), &trip("b", "v2", "OPO", "FAO")))
            .await
            .expect("create at v2");
    assert_eq!(spec(&created), &json!({"route": {"from": "OPO", "to": "FAO"}}));
    assert_eq!(created.types.as_ref().map(|t| t.api_version.as_str()), Some("conv.example.com/v2"));
    assert_eq!(desired_versions(&webhook), ["conv.example.com/v1", "conv.example.com/v2"], "to storage, then back");

    let before = webhook.reviews().len();
    let at_v1 = within("get at v1", trips(&env, "v1").get("b")).await.expect("get at v1");
    assert_eq!(spec(&at_v1), &json!({"from": "OPO", "to": "FAO"}));
    assert_eq!(webhook.reviews().len(), before, "the object is stored at v1");
    let (ok, out, err) = run_kubectl("1.33", &env, &["get", "trips.v1.conv.example.com", "b", "-o", "json"]).await;
    assert!(ok, "kubectl get at v1: {err}");
    let obj: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    assert_eq!(obj["spec"], json!({"from": "OPO", "to": "FAO"}));
}

#[tokio::test]
async fn lists_of_objects_stored_at_both_versions_convert_in_one_review() {
    let webhook = webhook().await;
    let env = env_with_trips(&webhook).await;
    let pp = PostParams::default();
    within("create a", trips(&env, "v1").create(&pp, &trip("a", "v1", "AMS", "LIS"))).await.expect("create a");
    within("create c", trips(&env, "v1").create(&pp, &trip("c", "v1", "BCN", "MAD"))).await.expect("create c");
    // The storage version becomes v2: a and c stay stored at v1, b is stored at v2.
    within("storage v2", env.install_crds([trip_crd("v2", webhook.client_config())])).await.expect("storage v2");
    within("create b", trips(&env, "v2").create(&pp, &trip("b", "v2", "OPO", "FAO"))).await.expect("create b");
    assert!(webhook.reviews().is_empty(), "writes at the storage version convert nothing");

    let listed = within("list at v1", trips(&env, "v1").list(&ListParams::default())).await.expect("list at v1");
    let specs: Vec<&Value> = listed.items.iter().map(spec).collect();
    assert_eq!(
        specs,
        [
            &json!({"from": "AMS", "to": "LIS"}),
            &json!({"from": "OPO", "to": "FAO"}),
            &json!({"from": "BCN", "to": "MAD"})
        ]
    );
    assert_eq!(webhook.reviews().len(), 1);
    assert_eq!(webhook.reviews()[0]["request"]["objects"].as_array().map(Vec::len), Some(1), "only b is sent");

    // At the storage version the stored bytes are served, but a and c are converted, together.
    let listed = within("list at v2", trips(&env, "v2").list(&ListParams::default())).await.expect("list at v2");
    let specs: Vec<&Value> = listed.items.iter().map(spec).collect();
    assert_eq!(
        specs,
        [
            &json!({"route": {"from": "AMS", "to": "LIS"}}),
            &json!({"route": {"from": "OPO", "to": "FAO"}}),
            &json!({"route": {"from": "BCN", "to": "MAD"}})
        ]
    );
    assert!(listed.items.iter().all(|i| i.types.as_ref().is_some_and(|t| t.api_version == "conv.example.com/v2")));
    assert_eq!(webhook.reviews().len(), 2);
    assert_eq!(webhook.reviews()[1]["request"]["objects"].as_array().map(Vec::len), Some(2), "a and c in one review");

    let (ok, out, err) = run_kubectl("1.33", &env, &["get", "trips.v1.conv.example.com", "-o", "json"]).await;
    assert!(ok, "kubectl list at v1: {err}");
    let list: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    let tos: Vec<&Value> = list["items"].as_array().expect("items").iter().map(|i| &i["spec"]["to"]).collect();
    assert_eq!(tos, ["LIS", "FAO", "MAD"]);
}

#[tokio::test]
async fn a_watch_at_v2_receives_converted_events() {
    let webhook = webhook().await;
    let env = env_with_trips(&webhook).await;
    let v1 = trips(&env, "v1");
    within("create a", v1.create(&PostParams::default(), &trip("a", "v1", "AMS", "LIS"))).await.expect("create a");
    let params = kube::api::WatchParams::default().timeout(60);
    let mut events = within("watch at v2", trips(&env, "v2").watch(&params, "0")).await.expect("watch").boxed();
    let route = |e: WatchEvent<DynamicObject>| match e {
        WatchEvent::Added(o) => ("ADDED", o.data["spec"]["route"].clone()),
        WatchEvent::Modified(o) => ("MODIFIED", o.data["spec"]["route"].clone()),
        other => panic!("unexpected event {other:?}"),
    };
    let first = next_item("the initial ADDED", &mut events).await.expect("event");
    assert_eq!(route(first), ("ADDED", json!({"from": "AMS", "to": "LIS"})));

    within("create b", v1.create(&PostParams::default(), &trip("b", "v1", "OPO", "FAO"))).await.expect("create b");
    let added = next_item("ADDED b", &mut events).await.expect("event");
    assert_eq!(route(added), ("ADDED", json!({"from": "OPO", "to": "FAO"})));

    let patch = json!({"spec": {"to": "PDL"}});
    within("patch b", v1.patch("b", &PatchParams::default(), &Patch::Merge(&patch))).await.expect("patch b");
    let modified = next_item("MODIFIED b", &mut events).await.expect("event");
    assert_eq!(route(modified), ("MODIFIED", json!({"from": "OPO", "to": "PDL"})));
}

#[tokio::test]
async fn updates_at_the_non_storage_version_are_converted_both_ways() {
    let webhook = webhook().await;
    let env = env_with_trips(&webhook).await;
    within("create", trips(&env, "v1").create(&PostParams::default(), &trip("a", "v1", "AMS", "LIS")))
        .await
        .expect("create");
    let v2 = trips(&env, "v2");
    let mut current = within("get at v2", v2.get("a")).await.expect("get at v2");
    current.data["spec"]["route"]["to"] = json!("FNC");
    let replaced = within("replace at v2", v2.replace("a", &PostParams::default(), &current)).await.expect("replace");
    assert_eq!(spec(&replaced), &json!({"route": {"from": "AMS", "to": "FNC"}}));
    assert_eq!(replaced.metadata.generation, Some(2));

    let patch = json!({"spec": {"route": {"from": "PXO"}}});
    let patched =
        within("patch at v2", v2.patch("a", &PatchParams::default(), &Patch::Merge(&patch))).await.expect("patch");
    assert_eq!(spec(&patched), &json!({"route": {"from": "PXO", "to": "FNC"}}));

    let at_v1 = within("get at v1", trips(&env, "v1").get("a")).await.expect("get at v1");
    assert_eq!(spec(&at_v1), &json!({"from": "PXO", "to": "FNC"}), "stored at v1 with both changes");
    assert_eq!(at_v1.metadata.generation, Some(3));

    let applied: DynamicObject = serde_json::from_value(json!({"apiVersion": "conv.example.com/v2", "kind": "Trip",
        "metadata": {"name": "a"}, "spec": {"route": {"from": "PXO", "to": "TER"}}}))
    .expect("Trip");
    let pp = PatchParams::apply("trip-planner").force();
    let out = within("apply at v2", v2.patch("a", &pp, &Patch::Apply(&applied))).await.expect("apply at v2");
    assert_eq!(spec(&out), &json!({"route": {"from": "PXO", "to": "TER"}}));
    let at_v1 = within("get at v1", trips(&env, "v1").get("a")).await.expect("get at v1");
    assert_eq!(spec(&at_v1), &json!({"from": "PXO", "to": "TER"}));
}

#[tokio::test]
async fn a_webhook_that_is_down_fails_the_read_with_kubes_message() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("address").port();
    let ca = DevCa::generate("unused-ca").expect("CA");
    let config = json!({"url": format!("https://127.0.0.1:{port}/convert"),
        "caBundle": base64::engine::general_purpose::STANDARD.encode(ca.cert_pem())});
    let env = env().await;
    within("install", env.install_crds([trip_crd("v1", config)])).await.expect("install the Trip CRD");
    within("create", trips(&env, "v1").create(&PostParams::default(), &trip("a", "v1", "AMS", "LIS")))
        .await
        .expect("a create at the storage version needs no webhook");

    let status = status_of(within("get at v2", trips(&env, "v2").get("a")).await);
    assert_eq!(status.code, 500, "{status:?}");
    assert_eq!(status.reason, "", "{status:?}");
    let prefix = format!(
        "conversion webhook for conv.example.com/v1, Kind=Trip failed: Post \"https://127.0.0.1:{port}/convert?timeout=30s\": "
    );
    assert_eq!(status.message, format!("{prefix}dial tcp 127.0.0.1:{port}: connect: connection refused"));

    let status = status_of(within("list at v2", trips(&env, "v2").list(&ListParams::default())).await);
    assert!(status.code == 500 && status.message.starts_with(&prefix), "{status:?}");

    let (ok, _, err) = run_kubectl("1.33", &env, &["get", "trips.v2.conv.example.com", "a"]).await;
    assert!(!ok);
    assert!(err.contains(&format!("Error from server: {prefix}")), "kubectl says: {err}");
}

#[tokio::test]
async fn a_failure_answer_fails_reads_writes_and_ends_watches_with_its_message() {
    let webhook = webhook().await;
    let env = env_with_trips(&webhook).await;
    within("create", trips(&env, "v1").create(&PostParams::default(), &trip("a", "v1", "AMS", "LIS")))
        .await
        .expect("create");
    let params = kube::api::WatchParams::default().timeout(60);
    let mut events = within("watch at v2", trips(&env, "v2").watch(&params, "0")).await.expect("watch").boxed();
    webhook.set_mode(Mode::Fail);
    let want = "conversion webhook for conv.example.com/v1, Kind=Trip failed: cannot convert this trip";

    let status = status_of(within("get at v2", trips(&env, "v2").get("a")).await);
    assert_eq!((status.code, status.message.as_str()), (500, want), "{status:?}");

    let created =
        within("create at v2", trips(&env, "v2").create(&PostParams::default(), &trip("b", "v2", "OPO", "FAO"))).await;
    let status = status_of(created);
    let to_storage = "conversion webhook for conv.example.com/v2, Kind=Trip failed: cannot convert this trip";
    assert_eq!((status.code, status.message.as_str()), (500, to_storage), "{status:?}");
    assert!(
        status_of(within("get b", trips(&env, "v1").get("b")).await).code == 404,
        "nothing is stored when the conversion to the storage version fails"
    );

    // A change written at the storage version needs no conversion, but its event at v2 does.
    let patch = json!({"spec": {"to": "PDL"}});
    within("patch at v1", trips(&env, "v1").patch("a", &PatchParams::default(), &Patch::Merge(&patch)))
        .await
        .expect("patch at v1");
    // The watch's initial event may have been converted before the failure.
    let mut error = None;
    while let Some(event) = within("a watch event", events.try_next()).await.expect("watch stream") {
        if let WatchEvent::Error(e) = event {
            error = Some(e);
            break;
        }
    }
    let error = error.expect("the watch ends with an ERROR event");
    assert_eq!((error.code, error.message.as_str()), (500, want), "{error:?}");
    assert!(within("the watch's end", events.next()).await.is_none(), "the watch ends after its ERROR event");
}

#[tokio::test]
async fn a_webhook_renaming_the_object_is_refused() {
    let webhook = webhook().await;
    let env = env_with_trips(&webhook).await;
    within("create", trips(&env, "v1").create(&PostParams::default(), &trip("a", "v1", "AMS", "LIS")))
        .await
        .expect("create");
    webhook.set_mode(Mode::Rename);
    let status = status_of(within("get at v2", trips(&env, "v2").get("a")).await);
    let want = "conversion webhook for conv.example.com/v1, Kind=Trip returned invalid object: must have the same name: a != a-renamed";
    assert_eq!((status.code, status.message.as_str()), (500, want), "{status:?}");
    let status = status_of(within("list at v2", trips(&env, "v2").list(&ListParams::default())).await);
    let want = "conversion webhook for conv.example.com/v1, Kind=Trip returned invalid converted object at index 1: must have the same name: a != a-renamed";
    assert_eq!((status.code, status.message.as_str()), (500, want), "{status:?}");
}

#[tokio::test]
async fn without_a_webhook_objects_are_stored_at_the_storage_version() {
    let env = env().await;
    let mut crd = serde_json::to_value(trip_crd("v1", json!({}))).expect("CRD JSON");
    crd["spec"]["conversion"] = json!({"strategy": "None"});
    let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("CRD");
    within("install", env.install_crds([crd])).await.expect("install the Trip CRD");
    within("create at v2", trips(&env, "v2").create(&PostParams::default(), &trip("b", "v2", "OPO", "FAO")))
        .await
        .expect("create at v2");
    // The stored bytes are served at the storage version: they must say v1.
    let listed = within("list at v1", trips(&env, "v1").list(&ListParams::default())).await.expect("list at v1");
    assert_eq!(listed.items[0].types.as_ref().map(|t| t.api_version.as_str()), Some("conv.example.com/v1"));
    let raw = within(
        "raw list",
        env.client().request_text(
            http::Request::get("/apis/conv.example.com/v1/namespaces/default/trips").body(Vec::new()).expect("request"),
        ),
    )
    .await
    .expect("raw list");
    let raw: Value = serde_json::from_str(&raw).expect("a JSON list");
    assert_eq!(raw["items"][0]["apiVersion"], "conv.example.com/v1", "{raw}");
}

#[tokio::test]
async fn reads_reuse_the_webhooks_connection() {
    let webhook = webhook().await;
    let env = env_with_trips(&webhook).await;
    within("create", trips(&env, "v1").create(&PostParams::default(), &trip("a", "v1", "AMS", "LIS")))
        .await
        .expect("create");
    let v2 = trips(&env, "v2");
    for _ in 0..5 {
        within("get at v2", v2.get("a")).await.expect("get at v2");
    }
    let peers = webhook.peers.lock().clone();
    assert_eq!(peers.len(), 5, "one review per read");
    assert!(peers.iter().all(|p| *p == peers[0]), "one connection for every review: {peers:?}");
}

#[tokio::test]
async fn a_webhook_named_by_its_service_is_reached_through_the_services_endpoints() {
    let webhook = webhook().await;
    let env = env().await;
    let objects = format!(
        r#"
apiVersion: v1
kind: Service
metadata: {{name: {SERVICE}, namespace: default}}
spec:
  ports: [{{port: 443}}]
---
apiVersion: v1
kind: Endpoints
metadata: {{name: {SERVICE}, namespace: default}}
subsets:
- addresses: [{{ip: 127.0.0.1}}]
  ports: [{{port: {port}}}]
"#,
        port = webhook.addr.port()
    );
    within("the Service and its Endpoints", env.apply_yaml(&objects)).await.expect("apply");
    let config = json!({"service": {"namespace": "default", "name": SERVICE, "path": "/convert", "port": 443},
        "caBundle": base64::engine::general_purpose::STANDARD.encode(&webhook.ca_pem)});
    within("install", env.install_crds([trip_crd("v1", config)])).await.expect("install the Trip CRD");
    within("create at v2", trips(&env, "v2").create(&PostParams::default(), &trip("a", "v2", "AMS", "LIS")))
        .await
        .expect("create at v2");
    let at_v1 = within("get at v1", trips(&env, "v1").get("a")).await.expect("get at v1");
    assert_eq!(spec(&at_v1), &json!({"from": "AMS", "to": "LIS"}));
    assert_eq!(desired_versions(&webhook), ["conv.example.com/v1", "conv.example.com/v2"]);
}

#[tokio::test]
async fn conversion_webhook_settings_are_validated_as_kube_validates_them() {
    let env = env().await;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let both = json!({"url": "https://127.0.0.1:9443/convert",
        "service": {"namespace": "default", "name": SERVICE, "port": 443}});
    let mut crd = serde_json::to_value(trip_crd("v1", both)).expect("CRD JSON");
    crd["spec"]["conversion"]["webhook"]["conversionReviewVersions"] = json!([]);
    let crd: CustomResourceDefinition = serde_json::from_value(crd.clone()).expect("CRD");
    let status = status_of(within("create", crds.create(&PostParams::default(), &crd)).await);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"), "{status:?}");
    assert!(
        status.message.ends_with(
            "is invalid: [spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required, \
             spec.conversion.conversionReviewVersions: Required value]"
        ),
        "{status:?}"
    );

    let mut crd =
        serde_json::to_value(trip_crd("v1", json!({"url": "https://127.0.0.1:9443/convert"}))).expect("CRD JSON");
    crd["spec"]["conversion"]["webhook"]["conversionReviewVersions"] = json!(["v2", "v2"]);
    let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("CRD");
    let status = status_of(within("create", crds.create(&PostParams::default(), &crd)).await);
    assert!(
        status.message.ends_with(
            "is invalid: [spec.conversion.conversionReviewVersions[1]: Invalid value: \"v2\": duplicate version, \
             spec.conversion.conversionReviewVersions: Invalid value: []string{\"v2\", \"v2\"}: must include at least one of v1, v1beta1]"
        ),
        "{status:?}"
    );
}

#[tokio::test]
async fn a_delete_at_the_non_storage_version_answers_the_converted_object() {
    let webhook = webhook().await;
    let env = env_with_trips(&webhook).await;
    within("create", trips(&env, "v1").create(&PostParams::default(), &trip("a", "v1", "AMS", "LIS")))
        .await
        .expect("create");
    let deleted = within("delete at v2", trips(&env, "v2").delete("a", &Default::default())).await.expect("delete");
    let deleted = deleted.left().expect("a custom resource's DELETE answers the object");
    assert_eq!(deleted.types.as_ref().map(|t| t.api_version.as_str()), Some("conv.example.com/v2"));
    assert_eq!(spec(&deleted), &json!({"route": {"from": "AMS", "to": "LIS"}}));
}

/// The names of a list's items.
fn names(list: &kube::core::ObjectList<DynamicObject>) -> Vec<String> {
    list.items.iter().map(|o| o.metadata.name.clone().unwrap_or_default()).collect()
}

#[tokio::test]
async fn selectors_match_objects_as_the_webhook_converted_them() {
    let webhook = webhook().await;
    let env = env_with_trips(&webhook).await;
    let pp = PostParams::default();
    within("create a", trips(&env, "v1").create(&pp, &trip("a", "v1", "AMS", "LIS"))).await.expect("create a");
    within("create c", trips(&env, "v1").create(&pp, &trip("c", "v1", "BCN", "MAD"))).await.expect("create c");
    let v2 = trips(&env, "v2");

    let labelled = ListParams::default().labels("converted-to-v2=true");
    let listed = within("list by label at v2", v2.list(&labelled)).await.expect("list");
    assert_eq!(names(&listed), ["a", "c"], "the webhook's labels are matched");
    let by_route = ListParams::default().fields("spec.route.from=AMS");
    let listed = within("list by field at v2", v2.list(&by_route)).await.expect("list");
    assert_eq!(names(&listed), ["a"], "a v2 selectable field is matched on the v2 object");

    let params = kube::api::WatchParams::default().fields("spec.route.from=BCN").timeout(60);
    let mut events = within("watch at v2", v2.watch(&params, "0")).await.expect("watch").boxed();
    match next_item("the initial ADDED", &mut events).await.expect("event") {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("c")),
        other => panic!("unexpected event {other:?}"),
    }

    // At the storage version the stored bytes are served; objects still stored at v1 are
    // converted, then matched.
    within("storage v2", env.install_crds([trip_crd("v2", webhook.client_config())])).await.expect("storage v2");
    let by_route = ListParams::default().fields("spec.route.from=BCN");
    let listed = within("list by field at the storage version", v2.list(&by_route)).await.expect("list");
    assert_eq!(names(&listed), ["c"]);
}
