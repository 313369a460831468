//! Error responses: each check asserts the HTTP code and the Status reason (and causes).

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, PostParams};
use serde_json::json;

use crate::common::{
    FlightTicket, client_without_retry, config_map, create_cm, env, env_with_flights, expect_status, flight, raw,
};

#[tokio::test]
async fn not_found_for_missing_object_and_unknown_resource() {
    let env = env().await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let s = expect_status(cms.get("missing").await, 404, "NotFound");
    assert_eq!(s.message, "configmaps \"missing\" not found");
    let details = s.details.expect("details");
    assert_eq!((details.name.as_str(), details.kind.as_str()), ("missing", "configmaps"));

    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("nowhere.example.com", "v1", "Widget"));
    let widgets: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &ar);
    expect_status(widgets.get("w").await, 404, "NotFound");
    expect_status(widgets.list(&ListParams::default()).await, 404, "NotFound");

    let core_unknown = raw(&env.client(), "GET", "/api/v1/namespaces/default/widgets", None, vec![]).await;
    assert_eq!(core_unknown.code, 404);
    assert_eq!(core_unknown.json["reason"], "NotFound", "{}", core_unknown.text);
}

#[tokio::test]
async fn unknown_routes_answer_kube_apiservers_404_status_with_empty_details() {
    let env = env().await;
    let client = env.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create_cm(&cms, "with-sub").await;
    for path in [
        "/api/v1/namespaces/default/pods/x/nonexistentsub",
        "/api/v1/namespaces/default/configmaps/with-sub/nonexistentsub",
        "/apis/unknown.group/v1/foos",
        "/apis/unknown.group/v1/namespaces/default/foos/a",
    ] {
        let res = raw(&client, "GET", path, None, vec![]).await;
        assert_eq!(res.code, 404, "{path}: {}", res.text);
        assert_eq!(
            res.json,
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "the server could not find the requested resource",
                "reason": "NotFound", "details": {}, "code": 404
            }),
            "{path}"
        );
    }
}

#[tokio::test]
async fn already_exists_on_duplicate_create() {
    let env = env().await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_cm(&cms, "dup").await;
    let s = expect_status(cms.create(&PostParams::default(), &config_map("dup", &[])).await, 409, "AlreadyExists");
    assert_eq!(s.message, "configmaps \"dup\" already exists");
}

#[tokio::test]
async fn conflict_on_stale_resource_version() {
    let env = env().await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let first = create_cm(&cms, "occ").await;
    let mut a = first.clone();
    a.data = Some([("k".to_string(), "a".to_string())].into());
    cms.replace("occ", &PostParams::default(), &a).await.expect("first replace");
    let mut stale = first.clone();
    stale.data = Some([("k".to_string(), "stale".to_string())].into());
    let s = expect_status(cms.replace("occ", &PostParams::default(), &stale).await, 409, "Conflict");
    assert!(
        s.message
            .contains("the object has been modified; please apply your changes to the latest version and try again"),
        "message: {}",
        s.message
    );
    assert_eq!(cms.get("occ").await.expect("get").data.and_then(|d| d.get("k").cloned()).as_deref(), Some("a"));
}

#[tokio::test]
async fn invalid_flight_ticket_number_names_the_field() {
    let env = env_with_flights().await;
    let api: Api<FlightTicket> = Api::namespaced(env.client(), "default");
    let s = expect_status(api.create(&PostParams::default(), &flight("too-many", "A", "B", 11)).await, 422, "Invalid");
    let details = s.details.expect("Invalid carries details");
    assert_eq!(details.kind, "FlightTicket");
    assert_eq!(details.group, "flights.com");
    assert_eq!(details.name, "too-many");
    let cause = details
        .causes
        .iter()
        .find(|c| c.field == "spec.number")
        .unwrap_or_else(|| panic!("no spec.number cause: {:?}", details.causes));
    assert_eq!(cause.reason, "FieldValueInvalid");
    assert!(s.message.starts_with("FlightTicket.flights.com \"too-many\" is invalid"), "message: {}", s.message);
    expect_status(api.get("too-many").await, 404, "NotFound");

    // The same rule holds on update.
    api.create(&PostParams::default(), &flight("ok", "A", "B", 10)).await.expect("number 10 is valid");
    let mut bad = api.get("ok").await.expect("get");
    bad.spec.number = 0;
    let s = expect_status(api.replace("ok", &PostParams::default(), &bad).await, 422, "Invalid");
    assert!(s.details.expect("details").causes.iter().any(|c| c.field == "spec.number"));
}

#[tokio::test]
async fn malformed_json_is_bad_request() {
    let env = env().await;
    let res = raw(
        &env.client(),
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"#.to_vec(),
    )
    .await;
    assert_eq!(res.code, 400, "{}", res.text);
    assert_eq!(res.json["kind"], "Status");
    assert_eq!(res.json["reason"], "BadRequest", "{}", res.text);
    assert_eq!(res.json["code"], 400);

    // The same through kube's request_text, which turns the Status into Error::Api.
    let req = http::Request::post("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/json")
        .body(b"not json at all".to_vec())
        .expect("request");
    expect_status(env.client().request_text(req).await, 400, "BadRequest");
}

#[tokio::test]
async fn body_over_three_mebibytes_is_rejected_with_413() {
    let env = env().await;
    let big = "x".repeat(3 * 1024 * 1024 + 1024);
    let body = serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"}, "data": {"blob": big}
    }))
    .expect("encode");
    let res = raw(&env.client(), "POST", "/api/v1/namespaces/default/configmaps", Some("application/json"), body).await;
    assert_eq!(res.code, 413, "{}", &res.text[..res.text.len().min(300)]);
    assert_eq!(res.json["reason"], "RequestEntityTooLarge");
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    expect_status(cms.get("huge").await, 404, "NotFound");
    // The connection pool still works afterwards.
    create_cm(&cms, "after-huge").await;
}

#[tokio::test]
async fn annotations_over_256_kibibytes_are_invalid() {
    let env = env().await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = config_map("annotated", &[]);
    // Keys count too: 1 + (256 KiB - 1) bytes is exactly the limit.
    cm.metadata.annotations = Some([("a".to_string(), "x".repeat(256 * 1024 - 1))].into());
    cms.create(&PostParams::default(), &cm).await.expect("annotations at the limit are accepted");

    let mut over = cms.get("annotated").await.expect("get");
    over.metadata.annotations.get_or_insert_default().insert("b".into(), String::new());
    let s = expect_status(cms.replace("annotated", &PostParams::default(), &over).await, 422, "Invalid");
    assert_eq!(
        s.message,
        "ConfigMap \"annotated\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"
    );
    let cause = &s.details.expect("details").causes[0];
    assert_eq!((cause.field.as_str(), cause.reason.as_str()), ("metadata.annotations", "FieldValueTooLong"));

    let mut fresh = config_map("annotated-2", &[]);
    fresh.metadata.annotations = Some([("a".to_string(), "x".repeat(256 * 1024))].into());
    expect_status(cms.create(&PostParams::default(), &fresh).await, 422, "Invalid");
    expect_status(cms.get("annotated-2").await, 404, "NotFound");
}

#[tokio::test]
async fn objects_over_the_storage_limit_are_rejected_with_413() {
    let env = env().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let pod = |name: &str, arg: String| Pod {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("busybox:1.36".into()),
                args: Some(vec![arg]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    // 2 MiB: under the 3 MiB request limit, over the 1.5 MiB storage limit.
    let big = "x".repeat(2 * 1024 * 1024);
    let s = expect_status(
        pods.create(&PostParams::default(), &pod("huge", big.clone())).await,
        413,
        "RequestEntityTooLarge",
    );
    assert!(s.message.contains("request is too large"), "{}", s.message);
    expect_status(pods.get("huge").await, 404, "NotFound");

    // The same on update: the stored object stays as it was.
    pods.create(&PostParams::default(), &pod("small", "x".into())).await.expect("create");
    let mut grown = pods.get("small").await.expect("get");
    if let Some(spec) = grown.spec.as_mut() {
        spec.containers[0].args = Some(vec![big]);
    }
    expect_status(pods.replace("small", &PostParams::default(), &grown).await, 413, "RequestEntityTooLarge");
    let kept = pods.get("small").await.expect("get");
    assert_eq!(kept.spec.expect("spec").containers[0].args, Some(vec!["x".to_string()]));
}

#[tokio::test]
async fn too_large_resource_version_is_a_504_timeout_with_retry_after() {
    let env = env().await;
    // kube-apiserver waits briefly for the revision, then answers 504 Timeout asking the
    // client to retry; kube's default client would retry, so use one that does not.
    let client = client_without_retry(&env).await;
    let res =
        raw(&client, "GET", "/api/v1/namespaces/default/configmaps?resourceVersion=99999999999", None, vec![]).await;
    assert_eq!(res.code, 504, "{}", res.text);
    assert_eq!(res.json["reason"], "Timeout", "{}", res.text);
    assert!(res.json["message"].as_str().is_some_and(|m| m.contains("Too large resource version")), "{}", res.text);
    assert!(res.json["details"]["retryAfterSeconds"].as_i64().is_some_and(|s| s > 0), "{}", res.text);
}

#[tokio::test]
async fn ill_typed_fields_of_builtin_kinds_are_rejected() {
    let env = env().await;
    let client = env.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create_cm(&cms, "typed").await;
    // ConfigMap.data is map[string]string: kube-apiserver refuses other value types.
    let bad_create = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ill"},"data":{"a":{"b":1}}}"#.to_vec(),
    )
    .await;
    assert!(
        matches!(bad_create.code, 400 | 422),
        "create with data.a an object: {} {}",
        bad_create.code,
        bad_create.text
    );
    let bad_patch = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/typed",
        Some("application/merge-patch+json"),
        br#"{"data":{"k":[1]}}"#.to_vec(),
    )
    .await;
    assert!(
        matches!(bad_patch.code, 400 | 422),
        "merge patch with data.k an array: {} {}",
        bad_patch.code,
        bad_patch.text
    );
    // What is stored still decodes as a ConfigMap.
    let typed = cms.get("typed").await.expect("stored ConfigMap still decodes");
    assert_eq!(typed.data.and_then(|d| d.get("k").cloned()).as_deref(), Some("v"));
}
