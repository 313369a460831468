//! End-to-end tests: real HTTPS calls (tokio-rustls client trusting the generated `ca.crt`,
//! hyper HTTP/1.1 and HTTP/2 client connections) against a running [`WebhookServer`].

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::ConfigMap;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_util::sync::CancellationToken;

use super::*;

/// Rejects ConfigMaps with a `forbidden` data key; forbids changing `immutable-key`.
struct ConfigMapPolicy;

impl Validator<ConfigMap> for ConfigMapPolicy {
    fn validate_create(&self, obj: &ConfigMap) -> Result<Vec<String>, String> {
        let data = obj.data.clone().unwrap_or_default();
        if data.contains_key("forbidden") {
            return Err("data key \"forbidden\" is not allowed".into());
        }
        Ok(if data.is_empty() { vec!["configmap has no data".into()] } else { Vec::new() })
    }
    fn validate_update(&self, old: &ConfigMap, new: &ConfigMap) -> Result<Vec<String>, String> {
        let get = |c: &ConfigMap| c.data.as_ref().and_then(|d| d.get("immutable-key").cloned());
        if get(old) != get(new) {
            return Err("immutable-key cannot change".into());
        }
        self.validate_create(new)
    }
    fn validate_delete(&self, obj: &ConfigMap) -> Result<Vec<String>, String> {
        match obj.metadata.name.as_deref() {
            Some("protected") => Err("protected cannot be deleted".into()),
            _ => Ok(Vec::new()),
        }
    }
}

/// Adds a label and a default data key.
struct ConfigMapDefaults;

impl Defaulter<ConfigMap> for ConfigMapDefaults {
    fn default(&self, obj: &mut ConfigMap) {
        obj.metadata.labels.get_or_insert_with(Default::default).insert("defaulted".into(), "true".into());
        obj.data.get_or_insert_with(Default::default).entry("mode".into()).or_insert_with(|| "standard".into());
    }
}

/// `example.com` Person: v1 `spec.name: "first last"` <-> v2 `spec.first`/`spec.last`.
fn convert_person(mut obj: Value, desired: &str) -> Result<Value, String> {
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let new_spec = match desired {
        "example.com/v2" => {
            let name = spec.get("name").and_then(Value::as_str).unwrap_or_default();
            let (first, last) = name.split_once(' ').unwrap_or((name, ""));
            json!({"first": first, "last": last})
        }
        "example.com/v1" => {
            let part = |k: &str| spec.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
            json!({"name": format!("{} {}", part("first"), part("last"))})
        }
        other => return Err(format!("unsupported version {other}")),
    };
    obj["spec"] = new_spec;
    obj["apiVersion"] = json!(desired);
    Ok(obj)
}

struct Running {
    addr: SocketAddr,
    dir: tempfile::TempDir,
    shutdown: CancellationToken,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Running {
    fn ca(&self) -> String {
        std::fs::read_to_string(self.dir.path().join(CA_FILE)).expect("ca.crt")
    }
}

async fn start() -> Running {
    let dir = tempfile::tempdir().expect("tempdir");
    let shutdown = CancellationToken::new();
    let addr = WebhookServer::new()
        .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .dev_certs(dir.path().to_owned(), vec!["localhost".into()])
        .validating::<ConfigMap, _>("/validate", ConfigMapPolicy)
        .mutating::<ConfigMap, _>("/mutate", ConfigMapDefaults)
        .conversion("/convert", convert_person)
        .admission("/raw", |req: &AdmissionRequest<DynamicObject>| {
            AdmissionResponse::from(req).forbid(format!("{} may not", req.user_info.username.as_deref().unwrap_or("")))
        })
        .start(shutdown.clone())
        .await
        .expect("start");
    Running { addr, dir, shutdown }
}

async fn connect(addr: SocketAddr, ca_pem: &str, alpn: &[u8]) -> TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.expect("ca pem")).expect("add root");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let tcp = TcpStream::connect(addr).await.expect("tcp connect");
    let name = ServerName::try_from("localhost").expect("name");
    TlsConnector::from(Arc::new(config)).connect(name, tcp).await.expect("tls handshake")
}

/// Sends one request; returns the status and the body parsed as JSON (Null if not JSON).
async fn call(srv: &Running, method: &str, path: &str, body: &[u8], http2: bool) -> (StatusCode, Value) {
    let alpn: &[u8] = if http2 { b"h2" } else { b"http/1.1" };
    let tls = connect(srv.addr, &srv.ca(), alpn).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(alpn));
    let req = Request::builder()
        .method(method)
        .uri(format!("https://localhost:{}{path}", srv.addr.port()))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::copy_from_slice(body)))
        .expect("request");
    let resp = if http2 {
        let (mut sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await.expect("h2 handshake");
        tokio::spawn(conn);
        sender.send_request(req).await.expect("h2 response")
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.expect("h1 handshake");
        tokio::spawn(conn);
        sender.send_request(req).await.expect("h1 response")
    };
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn admission_review(op: &str, object: Value, old: Value) -> Vec<u8> {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": format!("uid-{op}"),
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "namespace": "default", "operation": op,
            "userInfo": {"username": "tester"},
            "object": object, "oldObject": old,
        }
    })
    .to_string()
    .into_bytes()
}

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default"}, "data": data})
}

async fn review(srv: &Running, path: &str, body: Vec<u8>) -> Value {
    let (status, out) = call(srv, "POST", path, &body, false).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["apiVersion"], json!("admission.k8s.io/v1"));
    assert_eq!(out["kind"], json!("AdmissionReview"));
    out["response"].clone()
}

#[tokio::test]
async fn validating_webhook_rejects_and_accepts() {
    let srv = start().await;
    let denied =
        review(&srv, "/validate", admission_review("CREATE", cm("a", json!({"forbidden": "x"})), Value::Null)).await;
    assert_eq!(denied["uid"], json!("uid-CREATE"));
    assert_eq!(denied["allowed"], json!(false));
    assert_eq!(denied["status"]["code"], json!(403));
    assert_eq!(denied["status"]["reason"], json!("Forbidden"));
    assert_eq!(denied["status"]["message"], json!("data key \"forbidden\" is not allowed"));

    let ok = review(&srv, "/validate", admission_review("CREATE", cm("a", json!({})), Value::Null)).await;
    assert_eq!(ok["allowed"], json!(true));
    assert_eq!(ok["warnings"], json!(["configmap has no data"]));

    let upd = review(
        &srv,
        "/validate",
        admission_review("UPDATE", cm("a", json!({"immutable-key": "2"})), cm("a", json!({"immutable-key": "1"}))),
    )
    .await;
    assert_eq!(upd["uid"], json!("uid-UPDATE"));
    assert_eq!(upd["allowed"], json!(false));
    let del = review(&srv, "/validate", admission_review("DELETE", Value::Null, cm("protected", json!({})))).await;
    assert_eq!(del["allowed"], json!(false));
    let del = review(&srv, "/validate", admission_review("DELETE", Value::Null, cm("other", json!({})))).await;
    assert_eq!(del["allowed"], json!(true));

    // Undecodable object: a 400 denial, not a crash; the server keeps serving.
    let bad =
        review(&srv, "/validate", admission_review("CREATE", json!({"metadata": {"name": 5}}), Value::Null)).await;
    assert_eq!(bad["allowed"], json!(false));
    assert_eq!(bad["status"]["code"], json!(400));
}

#[tokio::test]
async fn mutating_webhook_patch_yields_defaulted_object() {
    let srv = start().await;
    let original = cm("a", json!({"keep": "1"}));
    let resp = review(&srv, "/mutate", admission_review("CREATE", original.clone(), Value::Null)).await;
    assert_eq!(resp["allowed"], json!(true));
    assert_eq!(resp["patchType"], json!("JSONPatch"));
    let raw: k8s_openapi::ByteString = serde_json::from_value(resp["patch"].clone()).expect("base64 patch");
    let patch: json_patch::Patch = serde_json::from_slice(&raw.0).expect("json patch");
    let mut patched = original.clone();
    json_patch::patch(&mut patched, &patch).expect("apply");

    let mut expected: ConfigMap = serde_json::from_value(original).expect("cm");
    ConfigMapDefaults.default(&mut expected);
    assert_eq!(patched, serde_json::to_value(&expected).expect("encode"));

    // Fields the typed object drops (explicit nulls, unknown fields) are left alone.
    let mut with_nulls = cm("b", json!({"mode": "custom"}));
    with_nulls["metadata"]["creationTimestamp"] = Value::Null;
    with_nulls["extra"] = json!({"x": 1});
    let resp = review(&srv, "/mutate", admission_review("UPDATE", with_nulls.clone(), with_nulls.clone())).await;
    let raw: k8s_openapi::ByteString = serde_json::from_value(resp["patch"].clone()).expect("base64 patch");
    let patch: json_patch::Patch = serde_json::from_slice(&raw.0).expect("json patch");
    assert_eq!(
        serde_json::to_value(&patch).expect("encode"),
        json!([{"op": "add", "path": "/metadata/labels", "value": {"defaulted": "true"}}])
    );

    // Nothing to change: no patch at all.
    let mut done = cm("c", json!({"mode": "x"}));
    done["metadata"]["labels"] = json!({"defaulted": "true"});
    let resp = review(&srv, "/mutate", admission_review("CREATE", done, Value::Null)).await;
    assert_eq!(resp["allowed"], json!(true));
    assert!(resp.get("patch").is_none() && resp.get("patchType").is_none());

    let del = review(&srv, "/mutate", admission_review("DELETE", Value::Null, cm("a", json!({})))).await;
    assert_eq!(del["allowed"], json!(true));
    assert!(del.get("patch").is_none());
}

async fn convert_via(srv: &Running, obj: Value, desired: &str, http2: bool) -> Value {
    let body = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "conv-1", "desiredAPIVersion": desired, "objects": [obj]}
    });
    let (status, out) = call(srv, "POST", "/convert", body.to_string().as_bytes(), http2).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["kind"], json!("ConversionReview"));
    assert_eq!(out["response"]["uid"], json!("conv-1"));
    out["response"].clone()
}

#[tokio::test]
async fn conversion_round_trips_over_http1_and_http2() {
    let srv = start().await;
    let v1 = json!({"apiVersion": "example.com/v1", "kind": "Person",
                    "metadata": {"name": "p", "namespace": "default"}, "spec": {"name": "a b"}});
    let resp = convert_via(&srv, v1.clone(), "example.com/v2", false).await;
    assert_eq!(resp["result"]["status"], json!("Success"));
    let v2 = resp["convertedObjects"][0].clone();
    assert_eq!(v2["apiVersion"], json!("example.com/v2"));
    assert_eq!(v2["spec"], json!({"first": "a", "last": "b"}));
    assert_eq!(v2["metadata"], v1["metadata"]);

    let back = convert_via(&srv, v2, "example.com/v1", true).await;
    assert_eq!(back["convertedObjects"][0], v1);

    let failed = convert_via(&srv, v1, "example.com/v9", false).await;
    assert_eq!(failed["result"]["status"], json!("Failure"));
    assert!(failed["result"]["message"].as_str().unwrap_or_default().contains("unsupported version"));
}

#[tokio::test]
async fn http_errors() {
    let srv = start().await;
    let (status, _) = call(&srv, "POST", "/nope", b"{}", false).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = call(&srv, "GET", "/validate", b"", true).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, body) = call(&srv, "POST", "/validate", b"{not json", false).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], json!(400));
    let (status, _) = call(&srv, "POST", "/convert", b"[1,2]", false).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let no_request = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"});
    let (status, _) = call(&srv, "POST", "/mutate", no_request.to_string().as_bytes(), false).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

fn served_cert(tls: &TlsStream<TcpStream>) -> CertificateDer<'static> {
    tls.get_ref().1.peer_certificates().and_then(|c| c.first()).expect("peer certificate").clone().into_owned()
}

fn pem_cert(path: &Path) -> CertificateDer<'static> {
    CertificateDer::from_pem_file(path).expect("cert pem")
}

#[tokio::test]
async fn new_connections_see_rotated_certificate() {
    let srv = start().await;
    let first = pem_cert(&srv.dir.path().join(CERT_FILE));
    let tls = connect(srv.addr, &srv.ca(), b"http/1.1").await;
    assert_eq!(served_cert(&tls), first);

    // Overwrite the files with a certificate from a new CA.
    let next = DevCerts::generate(&["localhost".into()]).expect("generate");
    std::fs::write(srv.dir.path().join(CERT_FILE), &next.cert_pem).expect("write cert");
    std::fs::write(srv.dir.path().join(KEY_FILE), &next.key_pem).expect("write key");
    std::fs::write(srv.dir.path().join(CA_FILE), &next.ca_pem).expect("write ca");

    let tls2 = connect(srv.addr, &next.ca_pem, b"http/1.1").await;
    let served = served_cert(&tls2);
    assert_ne!(served, first);
    assert_eq!(served, pem_cert(&srv.dir.path().join(CERT_FILE)));
    drop(tls);
}

#[tokio::test]
async fn start_errors() {
    let err = WebhookServer::new().bind(SocketAddr::from(([127, 0, 0, 1], 0))).start(CancellationToken::new()).await;
    assert!(matches!(err, Err(WebhookError::NoCertDir)));
    let dir = tempfile::tempdir().expect("tempdir");
    let err = WebhookServer::new()
        .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .dev_certs(dir.path().to_owned(), vec![])
        .conversion("/c", convert_person)
        .conversion("/c", convert_person)
        .start(CancellationToken::new())
        .await;
    assert!(matches!(err, Err(WebhookError::DuplicatePath(p)) if p == "/c"));
}

#[tokio::test]
async fn raw_handler_sees_request_context_and_uid_is_echoed() {
    let srv = start().await;
    let resp = review(&srv, "/raw", admission_review("CREATE", cm("a", json!({})), Value::Null)).await;
    assert_eq!(resp["uid"], json!("uid-CREATE"));
    assert_eq!(resp["status"]["message"], json!("tester may not"));
}

#[tokio::test]
async fn shutdown_stops_accepting() {
    let srv = start().await;
    let _ = connect(srv.addr, &srv.ca(), b"http/1.1").await;
    srv.shutdown.cancel();
    let refused = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            if TcpStream::connect(srv.addr).await.is_err() {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(refused.is_ok(), "listener still accepting after shutdown");
}

/// Async, typed validation that reads the cluster: a ConfigMap may name in `data.requires`
/// only a ConfigMap that exists; `data.from` and `data.to` must differ (a field error).
struct RequiresExisting;

impl CustomValidator<ConfigMap> for RequiresExisting {
    async fn validate_create(
        &self,
        ctx: &AdmissionContext<'_, ConfigMap>,
        obj: &ConfigMap,
    ) -> Result<Vec<String>, AdmissionError> {
        let data = obj.data.clone().unwrap_or_default();
        if data.contains_key("from") && data.get("from") == data.get("to") {
            let to = data.get("to").cloned().unwrap_or_default();
            return Err(AdmissionError::invalid(
                obj,
                vec![FieldError::invalid("data.to", to, "must differ from data.from")],
            ));
        }
        let Some(required) = data.get("requires") else { return Ok(vec!["nothing required".into()]) };
        let namespace = ctx.request.namespace.clone().unwrap_or_default();
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(ctx.client.clone(), &namespace);
        match api.get_opt(required).await {
            Ok(Some(_)) => Ok(Vec::new()),
            Ok(None) => Err(AdmissionError::Forbidden(format!("ConfigMap {required:?} does not exist"))),
            Err(e) => Err(AdmissionError::Internal(e.to_string())),
        }
    }

    async fn validate_update(
        &self,
        ctx: &AdmissionContext<'_, ConfigMap>,
        _old: &ConfigMap,
        new: &ConfigMap,
    ) -> Result<Vec<String>, AdmissionError> {
        self.validate_create(ctx, new).await
    }
}

/// Async defaulting that sees the request: labels the object with the requesting user.
struct LabelRequester;

impl CustomDefaulter<ConfigMap> for LabelRequester {
    async fn default(&self, ctx: &AdmissionContext<'_, ConfigMap>, obj: &mut ConfigMap) -> Result<(), AdmissionError> {
        let user = ctx.request.user_info.username.clone().unwrap_or_default();
        if user == "mallory" {
            return Err(AdmissionError::Forbidden("mallory may not".into()));
        }
        obj.metadata.labels.get_or_insert_with(Default::default).insert("requested-by".into(), user);
        Ok(())
    }
}

mod person_v1 {
    #[derive(kube::CustomResource, Clone, Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[kube(group = "example.com", version = "v1", kind = "Person", namespaced)]
    pub(super) struct PersonSpec {
        pub name: String,
    }
}

mod person_v2 {
    #[derive(kube::CustomResource, Clone, Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[kube(group = "example.com", version = "v2", kind = "Person", namespaced)]
    pub(super) struct PersonSpec {
        pub first: String,
        pub last: String,
    }
}

mod person_v3 {
    #[derive(kube::CustomResource, Clone, Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[kube(group = "example.com", version = "v3", kind = "Person", namespaced)]
    pub(super) struct PersonSpec {
        pub full_name: String,
    }
}

impl Hub for person_v1::Person {}

impl Convertible<person_v1::Person> for person_v2::Person {
    fn convert_to(&self) -> person_v1::Person {
        let name = format!("{} {}", self.spec.first, self.spec.last);
        person_v1::Person { metadata: self.metadata.clone(), spec: person_v1::PersonSpec { name } }
    }
    fn convert_from(hub: &person_v1::Person) -> Self {
        let (first, last) = hub.spec.name.split_once(' ').unwrap_or((&hub.spec.name, ""));
        let spec = person_v2::PersonSpec { first: first.into(), last: last.into() };
        person_v2::Person { metadata: hub.metadata.clone(), spec }
    }
}

impl Convertible<person_v1::Person> for person_v3::Person {
    fn convert_to(&self) -> person_v1::Person {
        person_v1::Person {
            metadata: self.metadata.clone(),
            spec: person_v1::PersonSpec { name: self.spec.full_name.clone() },
        }
    }
    fn convert_from(hub: &person_v1::Person) -> Self {
        person_v3::Person {
            metadata: hub.metadata.clone(),
            spec: person_v3::PersonSpec { full_name: hub.spec.name.clone() },
        }
    }
}

/// A server with the custom webhooks of ConfigMap and Person, registered through a manager.
async fn start_custom(env: &opkit_testenv::TestEnv) -> Running {
    let mgr = crate::Manager::new(env.client(), crate::ManagerOptions::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let shutdown = CancellationToken::new();
    let server = WebhookServer::new()
        .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .dev_certs(dir.path().to_owned(), vec!["localhost".into()]);
    let server =
        mgr.webhook_for::<ConfigMap>().with_defaulter(LabelRequester).with_validator(RequiresExisting).complete(server);
    let server = mgr
        .webhook_for::<person_v1::Person>()
        .with_spoke::<person_v2::Person>()
        .with_spoke::<person_v3::Person>()
        .complete(server);
    assert_eq!(server.paths(), ["/mutate--v1-configmap", "/validate--v1-configmap", "/convert"]);
    let addr = server.start(shutdown.clone()).await.expect("start");
    Running { addr, dir, shutdown }
}

fn review_by(user: &str, op: &str, object: Value) -> Vec<u8> {
    let mut body: Value = serde_json::from_slice(&admission_review(op, object, json!({}))).expect("json");
    body["request"]["userInfo"]["username"] = json!(user);
    body.to_string().into_bytes()
}

#[tokio::test]
async fn custom_validator_reads_the_cluster_and_reports_field_errors() {
    let env = opkit_testenv::TestEnv::builder().without_controllers().start().await.expect("env");
    let srv = start_custom(&env).await;
    let path = "/validate--v1-configmap";

    let missing =
        review(&srv, path, admission_review("CREATE", cm("a", json!({"requires": "base"})), Value::Null)).await;
    assert_eq!(missing["allowed"], json!(false));
    assert_eq!(missing["status"]["code"], json!(403));
    assert_eq!(missing["status"]["reason"], json!("Forbidden"));
    assert_eq!(missing["status"]["message"], json!("ConfigMap \"base\" does not exist"));

    let api: kube::Api<ConfigMap> = kube::Api::namespaced(env.client(), "default");
    let base: ConfigMap = serde_json::from_value(cm("base", json!({}))).expect("cm");
    api.create(&Default::default(), &base).await.expect("create base");
    let ok = review(&srv, path, admission_review("UPDATE", cm("a", json!({"requires": "base"})), json!({}))).await;
    assert_eq!(ok["allowed"], json!(true), "{ok}");
    let warned = review(&srv, path, admission_review("CREATE", cm("a", json!({})), Value::Null)).await;
    assert_eq!(warned["warnings"], json!(["nothing required"]));

    let invalid = review(
        &srv,
        path,
        admission_review("CREATE", cm("trip", json!({"from": "Mumbai", "to": "Mumbai"})), Value::Null),
    )
    .await;
    assert_eq!(invalid["allowed"], json!(false));
    assert_eq!(invalid["status"]["code"], json!(422));
    assert_eq!(invalid["status"]["reason"], json!("Invalid"));
    assert_eq!(
        invalid["status"]["message"],
        json!("ConfigMap \"trip\" is invalid: data.to: Invalid value: \"Mumbai\": must differ from data.from")
    );
    assert_eq!(invalid["status"]["details"]["kind"], json!("ConfigMap"));
    assert_eq!(
        invalid["status"]["details"]["causes"],
        json!([{"reason": "FieldValueInvalid", "message": "Invalid value: \"Mumbai\": must differ from data.from", "field": "data.to"}])
    );
    // DELETE is admitted by the trait's default.
    assert_eq!(
        review(&srv, path, admission_review("DELETE", Value::Null, cm("a", json!({})))).await["allowed"],
        json!(true)
    );
}

#[tokio::test]
async fn custom_defaulter_patches_with_the_requests_user() {
    let env = opkit_testenv::TestEnv::builder().without_controllers().start().await.expect("env");
    let srv = start_custom(&env).await;
    let path = "/mutate--v1-configmap";
    let object = cm("a", json!({"k": "v"}));
    let resp = review(&srv, path, review_by("alice", "CREATE", object.clone())).await;
    assert_eq!(resp["allowed"], json!(true));
    assert_eq!(resp["patchType"], json!("JSONPatch"));
    let patch_bytes = base64_decode(resp["patch"].as_str().expect("patch"));
    let patch: json_patch::Patch = serde_json::from_slice(&patch_bytes).expect("patch json");
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch).expect("applies");
    assert_eq!(patched["metadata"]["labels"], json!({"requested-by": "alice"}));
    assert_eq!(patched["data"], object["data"]);

    let denied = review(&srv, path, review_by("mallory", "CREATE", object)).await;
    assert_eq!(denied["allowed"], json!(false));
    assert_eq!(denied["status"]["message"], json!("mallory may not"));
}

fn base64_decode(s: &str) -> Vec<u8> {
    serde_json::from_value::<k8s_openapi::ByteString>(json!(s)).expect("base64").0
}

#[tokio::test]
async fn hub_and_spokes_convert_every_way_at_convert() {
    let env = opkit_testenv::TestEnv::builder().without_controllers().start().await.expect("env");
    let srv = start_custom(&env).await;
    let v2 = json!({"apiVersion": "example.com/v2", "kind": "Person",
                    "metadata": {"name": "ada", "namespace": "default"}, "spec": {"first": "Ada", "last": "Lovelace"}});
    let v1 = convert_via(&srv, v2.clone(), "example.com/v1", false).await["convertedObjects"][0].clone();
    assert_eq!(v1["apiVersion"], json!("example.com/v1"));
    assert_eq!(v1["spec"], json!({"name": "Ada Lovelace"}));
    assert_eq!(v1["metadata"]["name"], json!("ada"));
    let v3 = convert_via(&srv, v2.clone(), "example.com/v3", true).await["convertedObjects"][0].clone();
    assert_eq!(v3["spec"], json!({"full_name": "Ada Lovelace"}));
    let back = convert_via(&srv, v3, "example.com/v2", false).await["convertedObjects"][0].clone();
    assert_eq!(back["spec"], v2["spec"]);

    // An unknown version or kind fails the review.
    let body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "u", "desiredAPIVersion": "example.com/v9", "objects": [v2]}});
    let (status, out) = call(&srv, "POST", "/convert", body.to_string().as_bytes(), false).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(out["response"]["result"]["status"], json!("Failure"));
    let message = out["response"]["result"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("example.com/v9 is neither the hub example.com/v1 nor one of its spokes"), "{message}");
}

#[test]
fn webhook_args_build_a_server_unless_disabled() {
    use clap::Parser;
    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        webhooks: WebhookArgs,
    }
    let args = Args::try_parse_from(["op", "--webhook-bind-address", "127.0.0.1:9555", "--webhook-cert-dir", "/certs"])
        .expect("args");
    let server = args.webhooks.server().expect("server").expect("enabled");
    assert!(format!("{server:?}").contains("127.0.0.1:9555") && format!("{server:?}").contains("/certs"));
    let off = Args::try_parse_from(["op", "--enable-webhooks=false"]).expect("args");
    assert!(off.webhooks.server().expect("server").is_none());
    assert!(Args::try_parse_from(["op", "--webhook-bind-address", "nope"]).expect("args").webhooks.server().is_err());
}
