//! The field selector tests, against the field labels the built-in kinds' strategies
//! declare.

use super::*;
use serde_json::json;

/// The field labels of `group`/`resource` as the built-in kinds' strategies declare them.
fn labels(group: &str, resource: &str) -> FieldLabels {
    crate::kinds::STRATEGIES.builtin(group, resource).map_or(FieldLabels::NONE, |s| s.field_labels())
}

type FieldSelector = ResourceFieldSelector;

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
    assert!(fs.matches("", &labels("", "pods"), &pod(), &[]).unwrap());
    let mut running = pod();
    running["status"]["phase"] = json!("Running");
    assert!(!fs.matches("", &labels("", "pods"), &running, &[]).unwrap());
    let fs2 = FieldSelector::parse("spec.host==n1,spec.hostNetwork=false,status.podIP=10.0.0.9").unwrap();
    assert!(fs2.matches("", &labels("", "pods"), &pod(), &[]).unwrap());
    assert_eq!(fs2.requirements().count(), 3);
}

#[test]
fn field_selector_errors() {
    let fs = FieldSelector::parse("spec.foo=bar").unwrap();
    let err = fs.matches("", &labels("", "pods"), &pod(), &[]).unwrap_err();
    assert_eq!(err.to_string(), "field label not supported: spec.foo");
    let err = fs.validate_fields("", &labels("", "configmaps"), &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "\"spec.foo\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );
    let err = FieldSelector::parse("status.x=1")
        .unwrap()
        .validate_fields("batch", &labels("batch", "jobs"), &[])
        .unwrap_err();
    assert_eq!(err.to_string(), "field label \"status.x\" not supported for batchv1.Job");
    let ns = FieldSelector::parse("metadata.namespace=x").unwrap();
    assert!(ns.validate_fields("", &labels("", "nodes"), &[]).is_err());
    assert!(ns.validate_fields("", &labels("", "configmaps"), &[]).is_ok());
    assert!(ns.validate_fields_scoped("example.com", &labels("example.com", "widgets"), &[], false).is_err());
}

#[test]
fn field_selector_other_resources() {
    let ev = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
        "reportingComponent": "kubelet", "type": "Warning"});
    let fs = FieldSelector::parse("involvedObject.kind=Pod,source=kubelet,type=Warning").unwrap();
    assert!(fs.matches("", &labels("", "events"), &ev, &[]).unwrap());
    let ev2 = json!({"metadata": {"name": "e"}, "regarding": {"kind": "Pod"}, "reportingController": "x"});
    let fs2 = FieldSelector::parse("regarding.kind=Pod,reportingController=x").unwrap();
    assert!(fs2.matches("events.k8s.io", &labels("events.k8s.io", "events"), &ev2, &[]).unwrap());
    let job = json!({"metadata": {"name": "j"}, "status": {}});
    assert!(
        FieldSelector::parse("status.successful=0")
            .unwrap()
            .matches("batch", &labels("batch", "jobs"), &job, &[])
            .unwrap()
    );
    let node = json!({"metadata": {"name": "n"}, "spec": {}});
    assert_eq!(field_value(&labels("", "nodes"), &node, "spec.unschedulable").as_deref(), Some("false"));
    assert_eq!(field_value(&labels("", "configmaps"), &node, "data"), None);
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
            .matches("example.com", &labels("example.com", "widgets"), &w, &extra)
            .unwrap()
    );
    assert!(
        !FieldSelector::parse("spec.color=blue")
            .unwrap()
            .matches("example.com", &labels("example.com", "widgets"), &w, &extra)
            .unwrap()
    );
    let err = FieldSelector::parse("spec.shape=x")
        .unwrap()
        .matches("example.com", &labels("example.com", "widgets"), &w, &extra)
        .unwrap_err();
    assert_eq!(err.to_string(), "field label not supported: spec.shape");
}
