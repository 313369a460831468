//! The built-in admission plugins besides Pod Security: LimitRanger (container defaults,
//! min/max/ratio bounds for containers and pods) and ResourceQuota (refusals with kube's
//! messages, required requests and limits, `status.used` charged as creates are admitted).

use k8s_openapi::api::core::v1::{ConfigMap, Pod, ResourceQuota};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::{config_map, env, expect_status};
use crate::pod_security::send;
use crate::pod_streaming::run_kubectl;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str, resources: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]}})
}

async fn limit_range(client: &Client, limits: Value) {
    let lr =
        json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits"}, "spec": {"limits": limits}});
    let res = send(client, "POST", "/api/v1/namespaces/default/limitranges", &lr).await;
    assert_eq!(res.code, 201, "{}", res.json);
}

#[tokio::test]
async fn limit_ranges_default_container_resources_and_bound_them() {
    let env = env().await;
    let client = env.client();
    limit_range(
        &client,
        json!([
            {"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m"},
                "max": {"cpu": "1"}, "min": {"cpu": "50m"}, "maxLimitRequestRatio": {"cpu": "10"}},
            {"type": "Pod", "max": {"memory": "1Gi"}},
        ]),
    )
    .await;

    let res = send(&client, "POST", PODS, &pod("defaulted", json!({}))).await;
    assert_eq!(res.code, 201, "{}", res.json);
    assert_eq!(
        res.json["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}})
    );
    // The LimitRange was stored with kube's defaults: the default limit is the default request.
    let stored = send(&client, "GET", "/api/v1/namespaces/default/limitranges/limits", &Value::Null).await;
    assert_eq!(stored.json["spec"]["limits"][0]["defaultRequest"], json!({"cpu": "100m", "memory": "256Mi"}));
    assert_eq!(
        res.json["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c"
    );

    // What a container states is kept; a limit alone stands for the request.
    let res = send(&client, "POST", PODS, &pod("own", json!({"limits": {"cpu": "800m"}}))).await;
    assert_eq!(res.code, 201, "{}", res.json);
    assert_eq!(
        res.json["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "800m", "memory": "256Mi"}, "limits": {"cpu": "800m", "memory": "256Mi"}})
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let big: Pod =
        serde_json::from_value(pod("big", json!({"limits": {"cpu": "2"}, "requests": {"cpu": "2000m"}}))).expect("pod");
    let status = expect_status(pods.create(&PostParams::default(), &big).await, 403, "Forbidden");
    assert_eq!(status.message, "pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 2");

    let res =
        send(&client, "POST", PODS, &pod("spiky", json!({"requests": {"cpu": "50m"}, "limits": {"cpu": "1"}}))).await;
    assert_eq!(res.code, 403, "{}", res.json);
    assert_eq!(
        res.json["message"],
        "pods \"spiky\" is forbidden: cpu max limit to request ratio per Container is 10, but provided ratio is 20.000000"
    );

    let res = send(
        &client,
        "POST",
        PODS,
        &pod("tiny", json!({"requests": {"cpu": "10m", "memory": "2Gi"}, "limits": {"cpu": "20m", "memory": "2Gi"}})),
    )
    .await;
    assert_eq!(res.code, 403, "{}", res.json);
    assert_eq!(
        res.json["message"],
        "pods \"tiny\" is forbidden: [minimum cpu usage per Container is 50m, but request is 10m, maximum memory usage per Pod is 1Gi, but limit is 2Gi]"
    );
}

/// Sets a quota's status as the quota controller does: `hard` from the spec, `used` zero.
async fn quota(client: &Client, name: &str, hard: Value) -> Api<ResourceQuota> {
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "default");
    let q = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": {"hard": hard}});
    let res = send(client, "POST", "/api/v1/namespaces/default/resourcequotas", &q).await;
    assert_eq!(res.code, 201, "{}", res.json);
    let used: serde_json::Map<String, Value> =
        hard.as_object().expect("hard").keys().map(|k| (k.clone(), json!("0"))).collect();
    let status = json!({"status": {"hard": hard, "used": used}});
    quotas.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.expect("quota status");
    quotas
}

#[tokio::test]
async fn quotas_refuse_creates_over_their_hard_limits_and_charge_what_they_admit() {
    let env = env().await;
    let client = env.client();
    let quotas = quota(&client, "compute", json!({"pods": "2", "requests.cpu": "1", "limits.memory": "1Gi"})).await;

    let res = send(&client, "POST", PODS, &pod("bare", json!({}))).await;
    assert_eq!(res.code, 403, "{}", res.json);
    assert_eq!(
        res.json["message"],
        "pods \"bare\" is forbidden: failed quota: compute: must specify limits.memory for: c; requests.cpu for: c"
    );

    let sized = json!({"requests": {"cpu": "600m"}, "limits": {"memory": "512Mi"}});
    let res = send(&client, "POST", PODS, &pod("first", sized.clone())).await;
    assert_eq!(res.code, 201, "{}", res.json);
    let used = quotas.get("compute").await.expect("quota").status.expect("status").used.expect("used");
    let used: Vec<(String, String)> = used.into_iter().map(|(k, v)| (k, v.0)).collect();
    assert_eq!(
        used,
        [("limits.memory".into(), "512Mi".into()), ("pods".into(), "1".into()), ("requests.cpu".into(), "600m".into())]
    );

    // A dry run is checked but not charged.
    let res = send(
        &client,
        "POST",
        &format!("{PODS}?dryRun=All"),
        &pod("dry", json!({"requests": {"cpu": "100m"}, "limits": {"memory": "1Mi"}})),
    )
    .await;
    assert_eq!(res.code, 201, "{}", res.json);
    let status = quotas.get("compute").await.expect("quota").status.expect("status");
    assert_eq!(status.used.expect("used")["requests.cpu"].0, "600m");

    let res = send(&client, "POST", PODS, &pod("second", sized)).await;
    assert_eq!(res.code, 403, "{}", res.json);
    assert_eq!(res.json["reason"], "Forbidden");
    assert_eq!(
        res.json["message"],
        "pods \"second\" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=600m, limited: requests.cpu=1"
    );
}

#[tokio::test]
async fn object_counts_are_limited_and_kubectl_prints_kubes_message() {
    let env = env().await;
    let client = env.client();
    quota(&client, "objects", json!({"count/configmaps": "1", "configmaps": "5"})).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // Only what is created after the quota counts (the controller counts what was there).
    configmaps.create(&PostParams::default(), &config_map("a", &[])).await.expect("first configmap");
    let status =
        expect_status(configmaps.create(&PostParams::default(), &config_map("b", &[])).await, 403, "Forbidden");
    assert_eq!(
        status.message,
        "configmaps \"b\" is forbidden: exceeded quota: objects, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1"
    );
    let (ok, _, stderr) = run_kubectl("1.33", &env, &["create", "configmap", "c", "-n", "default"]).await;
    assert!(!ok);
    assert!(
        stderr.contains(
            "configmaps \"c\" is forbidden: exceeded quota: objects, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1"
        ),
        "{stderr}"
    );
}

#[tokio::test]
async fn concurrent_creates_never_exceed_a_quota() {
    let env = env().await;
    let client = env.client();
    let quotas = quota(&client, "three", json!({"count/configmaps": "3"})).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let creates = (0..8).map(|i| {
        let configmaps = configmaps.clone();
        async move { configmaps.create(&PostParams::default(), &config_map(&format!("cm-{i}"), &[])).await }
    });
    let results = futures::future::join_all(creates).await;
    let admitted = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(admitted, 3, "{results:?}");
    for refused in results.into_iter().filter_map(Result::err) {
        let status = crate::common::status_of::<()>(Err(refused));
        assert_eq!(status.code, 403, "{}", status.message);
        assert!(status.message.contains("exceeded quota: three"), "{}", status.message);
    }
    let used = quotas.get("three").await.expect("quota").status.expect("status").used.expect("used");
    assert_eq!(used["count/configmaps"].0, "3");
}
