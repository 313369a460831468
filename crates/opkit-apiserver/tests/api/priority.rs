//! PriorityClasses and kube's Priority admission: the system classes exist from the start,
//! `system-` names are reserved, values are bounded and immutable, one global default at
//! most; new pods get their priority from the class they name, from the default class,
//! or 0, and naming a missing class is Forbidden.

use serde_json::{Value, json};

use crate::common::{env, raw};

const CLASSES: &str = "/apis/scheduling.k8s.io/v1/priorityclasses";
const PODS: &str = "/api/v1/namespaces/default/pods";

fn class(name: &str, value: i64, global_default: bool) -> Vec<u8> {
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
        "value": value, "globalDefault": global_default})
    .to_string()
    .into_bytes()
}

fn pod(name: &str, class: Option<&str>) -> Vec<u8> {
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
    if let Some(class) = class {
        spec["priorityClassName"] = json!(class);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}).to_string().into_bytes()
}

fn priority(pod: &Value) -> (Value, Value, Value) {
    let spec = &pod["spec"];
    (spec["priorityClassName"].clone(), spec["priority"].clone(), spec["preemptionPolicy"].clone())
}

#[tokio::test]
async fn pods_get_their_priority_from_classes() {
    let env = env().await;
    let client = env.client();
    let json = Some("application/json");
    let system = raw(&client, "GET", &format!("{CLASSES}/system-cluster-critical"), None, vec![]).await;
    assert_eq!(system.code, 200, "{}", system.text);
    assert_eq!(system.json["value"], 2_000_000_000);
    assert_eq!(system.json["preemptionPolicy"], "PreemptLowerPriority");

    let res = raw(&client, "POST", PODS, json, pod("plain", None)).await;
    assert_eq!(res.code, 201, "{}", res.text);
    assert_eq!(priority(&res.json), (Value::Null, json!(0), json!("PreemptLowerPriority")));
    let res = raw(&client, "POST", PODS, json, pod("critical", Some("system-node-critical"))).await;
    assert_eq!(res.code, 201, "{}", res.text);
    assert_eq!(
        priority(&res.json),
        (json!("system-node-critical"), json!(2_000_001_000), json!("PreemptLowerPriority"))
    );

    let res = raw(&client, "POST", PODS, json, pod("lost", Some("nope"))).await;
    assert_eq!(res.code, 403, "{}", res.text);
    assert_eq!(res.json["reason"], "Forbidden");
    assert_eq!(res.json["message"], "pods \"lost\" is forbidden: no PriorityClass with name nope was found");

    let res = raw(&client, "POST", CLASSES, json, class("batch-low", 10, true)).await;
    assert_eq!(res.code, 201, "{}", res.text);
    let res = raw(&client, "POST", PODS, json, pod("defaulted", None)).await;
    assert_eq!(priority(&res.json), (json!("batch-low"), json!(10), json!("PreemptLowerPriority")), "{}", res.text);
    let res = raw(&client, "POST", CLASSES, json, class("batch-high", 20, true)).await;
    assert_eq!(res.code, 403, "{}", res.text);
    assert!(
        res.text.contains("PriorityClass batch-low is already marked as default. Only one default can exist"),
        "{}",
        res.text
    );
}

#[tokio::test]
async fn classes_follow_kubes_rules() {
    let env = env().await;
    let client = env.client();
    let json = Some("application/json");
    for (name, value, field) in [("system-mine", 5, "metadata.name"), ("too-high", 1_000_000_001, "value")] {
        let res = raw(&client, "POST", CLASSES, json, class(name, value, false)).await;
        assert_eq!(res.code, 422, "{}", res.text);
        assert_eq!(res.json["details"]["causes"][0]["field"], field, "{}", res.text);
        assert_eq!(res.json["details"]["causes"][0]["reason"], "FieldValueForbidden", "{}", res.text);
    }
    let res = raw(&client, "POST", CLASSES, json, class("mid", 100, false)).await;
    assert_eq!(res.code, 201, "{}", res.text);
    let merge = Some("application/merge-patch+json");
    let res = raw(&client, "PATCH", &format!("{CLASSES}/mid"), merge, br#"{"value": 200}"#.to_vec()).await;
    assert_eq!(res.code, 422, "{}", res.text);
    assert!(res.text.contains("field is immutable"), "{}", res.text);
}
