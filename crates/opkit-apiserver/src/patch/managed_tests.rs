//! Tests of managedFields tracking and server-side apply.

use super::*;
use serde_json::json;

fn fm<'a>(manager: &'a str, time: &'a str) -> FieldManager<'a> {
    FieldManager { manager, api_version: "apps/v1", subresource: None, time }
}

fn sem() -> ListSemantics {
    ListSemantics::for_builtin("apps", "Deployment")
}

fn deployment(replicas: i64, labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": labels},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [
            {"name": "nginx", "image": "nginx:1"}]}}}})
}

fn entry<'v>(obj: &'v Value, manager: &str) -> Option<&'v Value> {
    obj["metadata"]["managedFields"].as_array()?.iter().find(|e| e["manager"] == manager)
}

/// Simulates storage adding server-set metadata on create.
fn stored(mut v: Value) -> Value {
    v["metadata"]["uid"] = json!("u-1");
    v["metadata"]["resourceVersion"] = json!("1");
    v["metadata"]["creationTimestamp"] = json!("2024-01-01T00:00:00Z");
    v
}

#[test]
fn apply_create_records_fields_v1_and_reapply_removes_dropped_label() {
    let applied = deployment(2, json!({"app": "web", "tier": "fe"}));
    let created = server_side_apply(None, &applied, &fm("mgr", "2024-01-01T00:00:00Z"), false, &sem()).unwrap();
    let e = entry(&created, "mgr").unwrap();
    assert_eq!(e["operation"], "Apply");
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(e["time"], "2024-01-01T00:00:00Z");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:app": {}, "f:tier": {}}},
            "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}})
    );
    assert_eq!(
        e["fieldsV1"].to_string(),
        r#"{"f:metadata":{"f:labels":{"f:app":{},"f:tier":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{}}}}}}}"#
    );
    let live = stored(created);
    let again = deployment(2, json!({"app": "web"}));
    let out = server_side_apply(Some(&live), &again, &fm("mgr", "2024-01-02T00:00:00Z"), false, &sem()).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(out["metadata"]["uid"], "u-1");
    assert_eq!(out["metadata"]["creationTimestamp"], "2024-01-01T00:00:00Z");
    assert_eq!(out["metadata"]["managedFields"].as_array().unwrap().len(), 1);
    assert!(entry(&out, "mgr").unwrap()["fieldsV1"]["f:metadata"]["f:labels"].get("f:tier").is_none());
    // Applying a partial object leaves the rest alone (fields owned by nobody else are kept only
    // if the applier never owned them).
    let partial = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": {"paused": true}});
    let out2 = server_side_apply(Some(&out), &partial, &fm("other", "t3"), false, &sem()).unwrap();
    assert_eq!(out2["spec"]["replicas"], 2);
    assert_eq!(out2["spec"]["paused"], true);
    assert_eq!(out2["metadata"]["labels"]["app"], "web");
}

#[test]
fn conflict_between_managers_and_force() {
    let a = server_side_apply(None, &deployment(2, json!({"app": "web"})), &fm("alice", "t1"), false, &sem()).unwrap();
    // Same value: no conflict, shared ownership.
    let same = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 2}});
    let shared = server_side_apply(Some(&a), &same, &fm("bob", "t2"), false, &sem()).unwrap();
    assert!(entry(&shared, "alice").unwrap()["fieldsV1"]["f:spec"].get("f:replicas").is_some());
    assert!(entry(&shared, "bob").unwrap()["fieldsV1"]["f:spec"].get("f:replicas").is_some());
    // Different value: conflict.
    let bob = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 5}});
    let err = server_side_apply(Some(&a), &bob, &fm("bob", "t2"), false, &sem()).unwrap_err();
    assert_eq!(err.status_code(), 409);
    let PatchError::Conflicts(cs) = &err else {
        panic!("expected conflicts, got {err:?}");
    };
    assert_eq!(cs.len(), 1);
    assert_eq!(cs[0].field, ".spec.replicas");
    assert_eq!(err.to_string(), "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas");
    // Force: bob wins and takes ownership.
    let forced = server_side_apply(Some(&a), &bob, &fm("bob", "t2"), true, &sem()).unwrap();
    assert_eq!(forced["spec"]["replicas"], 5);
    assert!(entry(&forced, "alice").unwrap()["fieldsV1"]["f:spec"].get("f:replicas").is_none());
    assert!(entry(&forced, "bob").unwrap()["fieldsV1"]["f:spec"].get("f:replicas").is_some());
    // Alice re-applying her old value now conflicts with bob.
    let err =
        server_side_apply(Some(&forced), &deployment(2, json!({"app": "web"})), &fm("alice", "t3"), false, &sem())
            .unwrap_err();
    assert!(err.to_string().contains("conflict with \"bob\": .spec.replicas"));
}

#[test]
fn update_takes_fields_from_applier_so_later_apply_conflicts() {
    let applied =
        server_side_apply(None, &deployment(2, json!({"app": "web"})), &fm("kubectl", "t1"), false, &sem()).unwrap();
    let live = stored(applied);
    let mut new = live.clone();
    new["spec"]["replicas"] = json!(3);
    track_update(Some(&live), &mut new, &fm("kube-controller-manager", "t2"), &sem());
    let upd = entry(&new, "kube-controller-manager").unwrap();
    assert_eq!(upd["operation"], "Update");
    assert_eq!(upd["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    assert!(entry(&new, "kubectl").unwrap()["fieldsV1"]["f:spec"].get("f:replicas").is_none());
    let err = server_side_apply(Some(&new), &deployment(2, json!({"app": "web"})), &fm("kubectl", "t3"), false, &sem())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"kube-controller-manager\" using apps/v1: .spec.replicas"
    );
    // Entries are sorted: Apply before Update.
    let ops: Vec<&str> =
        new["metadata"]["managedFields"].as_array().unwrap().iter().filter_map(|e| e["operation"].as_str()).collect();
    assert_eq!(ops, vec!["Apply", "Update"]);
}

#[test]
fn update_create_tracks_map_nodes_and_skips_untracked_objects() {
    let mut created = deployment(1, json!({"app": "web"}));
    track_update(None, &mut created, &fm("kubectl-create", "t1"), &sem());
    let e = entry(&created, "kubectl-create").unwrap();
    assert_eq!(e["fieldsV1"]["f:metadata"], json!({"f:labels": {".": {}, "f:app": {}}}));
    // Nothing changed: no new entry, time kept.
    let mut same = created.clone();
    track_update(Some(&created), &mut same, &fm("other", "t2"), &sem());
    assert!(entry(&same, "other").is_none());
    // Resetting managedFields with [] strips them, and later updates do not track.
    let mut reset = created.clone();
    reset["metadata"]["managedFields"] = json!([]);
    track_update(Some(&created), &mut reset, &fm("x", "t3"), &sem());
    assert!(reset["metadata"].get("managedFields").is_none());
    let mut next = reset.clone();
    next["spec"]["replicas"] = json!(4);
    track_update(Some(&reset), &mut next, &fm("x", "t4"), &sem());
    assert!(next["metadata"].get("managedFields").is_none());
}

#[test]
fn apply_to_untracked_object_creates_before_first_apply() {
    let live = stored(deployment(1, json!({"app": "web"})));
    let cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 4}});
    let err = server_side_apply(Some(&live), &cfg, &fm("mgr", "t1"), false, &sem()).unwrap_err();
    assert!(err.to_string().contains("\"before-first-apply\" using apps/v1"));
    let out = server_side_apply(Some(&live), &cfg, &fm("mgr", "t1"), true, &sem()).unwrap();
    let bfa = entry(&out, "before-first-apply").unwrap();
    assert!(bfa["fieldsV1"]["f:spec"].get("f:replicas").is_none());
    assert!(bfa["fieldsV1"]["f:metadata"].get("f:labels").is_some());
}

#[test]
fn status_subresource_and_validation() {
    let live = server_side_apply(None, &deployment(2, json!({"app": "web"})), &fm("mgr", "t1"), false, &sem()).unwrap();
    let st = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 9}, "status": {"readyReplicas": 2}});
    let f = FieldManager { subresource: Some("status"), ..fm("ctrl", "t2") };
    let out = server_side_apply(Some(&live), &st, &f, false, &sem()).unwrap();
    assert_eq!(out["spec"]["replicas"], 2);
    assert_eq!(out["status"]["readyReplicas"], 2);
    let e = entry(&out, "ctrl").unwrap();
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["fieldsV1"], json!({"f:status": {"f:readyReplicas": {}}}));

    let mut bad = deployment(1, json!({}));
    bad["metadata"]["managedFields"] = json!([]);
    let err = server_side_apply(None, &bad, &fm("m", "t"), false, &sem()).unwrap_err();
    assert_eq!(err.to_string(), "metadata.managedFields must be nil");
    let mut wrong = deployment(1, json!({}));
    wrong["apiVersion"] = json!("apps/v1beta1");
    assert_eq!(server_side_apply(None, &wrong, &fm("m", "t"), false, &sem()).unwrap_err().status_code(), 400);
}

#[test]
fn removing_a_container_only_removes_it_when_unowned() {
    let two = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a"}, {"name": "b", "image": "b"}]}}}});
    let live = server_side_apply(None, &two, &fm("mgr", "t1"), false, &sem()).unwrap();
    let one = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a"}]}}}});
    let out = server_side_apply(Some(&live), &one, &fm("mgr", "t2"), false, &sem()).unwrap();
    let cs = out["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    assert_eq!(cs.len(), 1);
    assert_eq!(cs[0]["name"], "a");
}

#[test]
fn cap_update_managers() {
    let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}});
    let sem = ListSemantics::for_builtin("", "ConfigMap");
    track_update(None, &mut obj, &fm("creator", "2024-01-01T00:00:00Z"), &sem);
    for i in 0..12 {
        let prev = obj.clone();
        obj["data"][format!("k{i}")] = json!("v");
        let t = format!("2024-01-01T00:00:{:02}Z", i + 1);
        let name = format!("m{i}");
        track_update(Some(&prev), &mut obj, &fm(&name, &t), &sem);
    }
    let mf = obj["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf.len(), 10);
    assert!(mf.iter().any(|e| e["manager"] == "ancient-changes"));
}

#[test]
fn kubectl_apply_syncs_last_applied_annotation() {
    let mut live = deployment(1, json!({"app": "web"}));
    live["metadata"]["annotations"] = json!({LAST_APPLIED: "{}"});
    let live = stored(live);
    let out = server_side_apply(Some(&live), &deployment(1, json!({"app": "web"})), &fm("kubectl", "t1"), true, &sem())
        .unwrap();
    let ann = out["metadata"]["annotations"][LAST_APPLIED].as_str().unwrap();
    assert!(ann.starts_with("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\""));
    assert!(ann.ends_with("}\n"));
}

#[test]
fn kubectl_upgrade_from_client_side_apply_takes_over_without_conflict() {
    // Created by client-side apply: Update manager plus the annotation.
    let mut obj = deployment(2, json!({"app": "web"}));
    let last = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 2}});
    obj["metadata"]["annotations"] = json!({LAST_APPLIED: last.to_string()});
    track_update(None, &mut obj, &fm("kubectl-client-side-apply", "t1"), &sem());
    let live = stored(obj);
    let cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 3}});
    // Another manager conflicts...
    let err = server_side_apply(Some(&live), &cfg, &fm("someone", "t2"), false, &sem()).unwrap_err();
    assert!(err.to_string().contains("kubectl-client-side-apply"));
    // ...but kubectl takes over the fields recorded in the annotation.
    let out = server_side_apply(Some(&live), &cfg, &fm("kubectl", "t2"), false, &sem()).unwrap();
    assert_eq!(out["spec"]["replicas"], 3);
}
