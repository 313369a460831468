//! Unit tests for label and field selectors.

use super::*;
use serde_json::json;

fn labels(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

#[test]
fn parse_and_match_set_based() {
    let s = LabelSelector::parse("app in (a,b),!legacy,tier!=db").unwrap();
    assert_eq!(s.to_string(), "app in (a,b),!legacy,tier!=db");
    assert!(s.matches(Some(&labels(json!({"app": "a", "tier": "web"})))));
    assert!(s.matches(Some(&labels(json!({"app": "b"})))));
    assert!(!s.matches(Some(&labels(json!({"app": "c"})))));
    assert!(!s.matches(Some(&labels(json!({"app": "a", "legacy": "x"})))));
    assert!(!s.matches(Some(&labels(json!({"app": "a", "tier": "db"})))));
    assert!(!s.matches(None));
}

#[test]
fn equality_exists_and_everything() {
    let s = LabelSelector::parse(" env = prod , team==x, owner ").unwrap();
    assert!(s.matches(Some(&labels(json!({"env": "prod", "team": "x", "owner": ""})))));
    assert!(!s.matches(Some(&labels(json!({"env": "prod", "team": "x"})))));
    let e = LabelSelector::parse("").unwrap();
    assert!(e.is_empty() && e.matches(None));
    assert!(LabelSelector::everything().matches(None));
    let n = LabelSelector::parse("x notin (in,notin)").unwrap();
    assert!(n.matches(Some(&labels(json!({"x": "y"})))));
    assert!(!n.matches(Some(&labels(json!({"x": "in"})))));
    let g = LabelSelector::parse("n>3").unwrap();
    assert!(g.matches(Some(&labels(json!({"n": "5"})))) && !g.matches(Some(&labels(json!({"n": "2"})))));
    assert!(LabelSelector::parse("a=").unwrap().matches(Some(&labels(json!({"a": ""})))));
}

#[test]
fn syntax_errors() {
    let e = |s: &str| LabelSelector::parse(s).unwrap_err().to_string();
    assert_eq!(e("a,"), "found '', expected: identifier after ','");
    assert_eq!(e("a b"), "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt");
    assert_eq!(e("a in b"), "unable to parse requirement: found 'b' expected: '('");
    assert_eq!(e("a=(b"), "unable to parse requirement: found '(', expected: identifier");
    assert_eq!(e(",a"), "found ',', expected: !, identifier, or 'end of string'");
    assert_eq!(e("a=b c"), "found 'c', expected: ',' or 'end of string'");
    assert!(
        e("a@b=c").starts_with("unable to parse requirement: <nil>: Invalid value: \"a@b\": name part must consist")
    );
    assert!(e("a=b@c").starts_with("unable to parse requirement: values[0][a]: Invalid value: \"b@c\": a valid label"));
    assert!(e("a>b").contains("the value must be an integer"));
    assert_eq!(e("a=!b"), "unable to parse requirement: found '!', expected: identifier");
}

#[test]
fn from_metav1_json() {
    let s = LabelSelector::from_label_selector_json(&json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["fe", "be"]},
            {"key": "legacy", "operator": "DoesNotExist"}
        ]
    }))
    .unwrap();
    assert_eq!(s.to_string(), "app=web,!legacy,tier in (be,fe)");
    assert!(s.matches(Some(&labels(json!({"app": "web", "tier": "fe"})))));
    assert!(!s.matches(Some(&labels(json!({"app": "web", "tier": "x"})))));
    assert!(LabelSelector::from_label_selector_json(&json!({})).unwrap().matches(None));
    assert!(!LabelSelector::from_label_selector_json(&Value::Null).unwrap().matches(None));
    let bad = LabelSelector::from_label_selector_json(&json!({"matchExpressions": [{"key": "a", "operator": "Foo"}]}));
    assert_eq!(bad.unwrap_err().to_string(), "\"Foo\" is not a valid label selector operator");
    let empty_in =
        LabelSelector::from_label_selector_json(&json!({"matchExpressions": [{"key": "a", "operator": "In"}]}));
    assert!(empty_in.unwrap_err().to_string().contains("values set can't be empty"));
}
fn pod() -> Value {
    json!({
        "metadata": {"name": "foo", "namespace": "ns"},
        "spec": {"nodeName": "n1", "restartPolicy": "Always"},
        "status": {"phase": "Pending", "podIPs": [{"ip": "10.0.0.9"}], "podIP": "10.0.0.9"}
    })
}

#[test]
fn field_selector_on_pods() {
    let fs = FieldSelector::parse("metadata.name=foo,status.phase!=Running").unwrap();
    assert_eq!(fs.to_string(), "metadata.name=foo,status.phase!=Running");
    assert!(fs.matches("", "pods", &pod(), &[]).unwrap());
    let mut running = pod();
    running["status"]["phase"] = json!("Running");
    assert!(!fs.matches("", "pods", &running, &[]).unwrap());
    let fs2 = FieldSelector::parse("spec.host==n1,spec.hostNetwork=false,status.podIP=10.0.0.9").unwrap();
    assert!(fs2.matches("", "pods", &pod(), &[]).unwrap());
    assert_eq!(fs2.requirements().count(), 3);
    assert!(FieldSelector::parse("").unwrap().is_empty());
}

#[test]
fn field_selector_errors() {
    let fs = FieldSelector::parse("spec.foo=bar").unwrap();
    let err = fs.matches("", "pods", &pod(), &[]).unwrap_err();
    assert_eq!(err.to_string(), "field label not supported: spec.foo");
    let err = fs.validate_fields("", "configmaps", &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "\"spec.foo\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );
    let err = FieldSelector::parse("status.x=1").unwrap().validate_fields("batch", "jobs", &[]).unwrap_err();
    assert_eq!(err.to_string(), "field label \"status.x\" not supported for batchv1.Job");
    let ns = FieldSelector::parse("metadata.namespace=x").unwrap();
    assert!(ns.validate_fields("", "nodes", &[]).is_err());
    assert!(ns.validate_fields("", "configmaps", &[]).is_ok());
    assert!(ns.validate_fields_scoped("example.com", "widgets", &[], false).is_err());
    assert_eq!(FieldSelector::parse("a").unwrap_err().to_string(), "invalid selector: 'a'; can't understand 'a'");
    assert_eq!(FieldSelector::parse(r"a=b\\q").unwrap().exact_value("a"), Some(r"b\q"));
    assert!(FieldSelector::parse(r"a=b\").is_err());
    assert_eq!(
        FieldSelector::parse("a=b\\x").unwrap_err().to_string(),
        "invalid field selector: invalid escape sequence: \\x"
    );
    assert_eq!(FieldSelector::parse("a=x\\,y").unwrap().exact_value("a"), Some("x,y"));
}

#[test]
fn field_selector_other_resources() {
    let ev = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
        "reportingComponent": "kubelet", "type": "Warning"});
    let fs = FieldSelector::parse("involvedObject.kind=Pod,source=kubelet,type=Warning").unwrap();
    assert!(fs.matches("", "events", &ev, &[]).unwrap());
    let ev2 = json!({"metadata": {"name": "e"}, "regarding": {"kind": "Pod"}, "reportingController": "x"});
    let fs2 = FieldSelector::parse("regarding.kind=Pod,reportingController=x").unwrap();
    assert!(fs2.matches("events.k8s.io", "events", &ev2, &[]).unwrap());
    let job = json!({"metadata": {"name": "j"}, "status": {}});
    assert!(FieldSelector::parse("status.successful=0").unwrap().matches("batch", "jobs", &job, &[]).unwrap());
    let node = json!({"metadata": {"name": "n"}, "spec": {}});
    assert_eq!(field_value("", "nodes", &node, "spec.unschedulable").as_deref(), Some("false"));
    assert_eq!(field_value("", "configmaps", &node, "data"), None);
}

#[test]
fn field_selector_crd_selectable_fields() {
    let extra = vec![
        ("spec.color".to_string(), ".spec.color".to_string()),
        ("spec.size".to_string(), ".spec.size".to_string()),
    ];
    let w = json!({"metadata": {"name": "w"}, "spec": {"color": "red", "size": 3}});
    assert!(
        FieldSelector::parse("spec.color=red,spec.size=3")
            .unwrap()
            .matches("example.com", "widgets", &w, &extra)
            .unwrap()
    );
    assert!(!FieldSelector::parse("spec.color=blue").unwrap().matches("example.com", "widgets", &w, &extra).unwrap());
    let err = FieldSelector::parse("spec.shape=x").unwrap().matches("example.com", "widgets", &w, &extra).unwrap_err();
    assert_eq!(err.to_string(), "field label not supported: spec.shape");
}
