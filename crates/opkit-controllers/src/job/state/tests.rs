//! Unit tests of the job controller's pure decisions.

use super::*;
use serde_json::json;

fn job(spec: serde_json::Value, status: serde_json::Value) -> Job {
    let mut j: Job = serde_json::from_value(json!({
        "metadata": {"name": "pi", "namespace": "default", "uid": "job-uid"},
        "spec": {"template": {"spec": {"containers": [{"name": "c"}], "restartPolicy": "Never"}}},
    }))
    .unwrap_or_default();
    if let Some(s) = j.spec.as_mut() {
        let mut v = serde_json::to_value(&*s).unwrap_or_default();
        if let (Some(o), Some(extra)) = (v.as_object_mut(), spec.as_object()) {
            o.extend(extra.clone());
        }
        *s = serde_json::from_value(v).unwrap_or_default();
    }
    j.status = serde_json::from_value(status).ok();
    j
}

fn pod(name: &str, phase: &str, finalizer: bool, index: Option<i32>) -> Arc<Pod> {
    let mut p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "status": {"phase": phase}
    }))
    .unwrap_or_default();
    if finalizer {
        p.metadata.finalizers = Some(vec![TRACKING_FINALIZER.into()]);
    }
    if let Some(i) = index {
        p.metadata.annotations = Some([(super::super::pods::INDEX_KEY.to_string(), i.to_string())].into());
    }
    Arc::new(p)
}

fn has(st: &JobStatus, t: &str, reason: &str) -> bool {
    st.conditions.iter().flatten().any(|c| c.type_ == t && c.status == "True" && c.reason.as_deref() == Some(reason))
}

#[test]
fn creates_up_to_parallelism_and_remaining_completions() {
    let j = job(json!({"completions": 3, "parallelism": 2}), json!({"succeeded": 2}));
    let none = BTreeSet::new();
    let plan = View::new(&j, &[], &none, &none).plan(jiff::Timestamp::now());
    assert_eq!(plan.create.len(), 1);
    assert_eq!(plan.status.active, Some(1));
    assert!(plan.status.start_time.is_some());
}

#[test]
fn counts_finished_pods_then_completes() {
    let mut j = job(json!({"completions": 1}), json!({}));
    let pods = vec![pod("a", "Succeeded", true, None)];
    let none = BTreeSet::new();
    let view = View::new(&j, &pods, &none, &none);
    let newly = view.newly_finished();
    assert_eq!(newly.len(), 1);
    add_uncounted(&mut j, &newly);
    let untracked: BTreeSet<String> = ["uid-a".to_string()].into();
    let mut view = View::new(&j, &pods, &none, &untracked);
    assert!(view.newly_finished().is_empty());
    view.flush_uncounted();
    assert_eq!(view.status.succeeded, Some(1));
    let plan = view.plan(jiff::Timestamp::now());
    assert!(has(&plan.status, "Complete", "CompletionsReached"));
    assert!(has(&plan.status, "SuccessCriteriaMet", "CompletionsReached"));
    assert!(plan.status.completion_time.is_some());
    assert!(plan.create.is_empty());
}

#[test]
fn fails_past_backoff_limit() {
    let j = job(json!({"backoffLimit": 1}), json!({"failed": 2}));
    let pods = vec![pod("b", "Running", true, None)];
    let none = BTreeSet::new();
    let plan = View::new(&j, &pods, &none, &none).plan(jiff::Timestamp::now());
    assert!(has(&plan.status, "Failed", "BackoffLimitExceeded"));
    assert!(has(&plan.status, "FailureTarget", "BackoffLimitExceeded"));
    assert_eq!(plan.delete.len(), 1);
    assert!(plan.create.is_empty());
    let j = job(json!({"backoffLimit": 2}), json!({"failed": 2}));
    let plan = View::new(&j, &[], &none, &none).plan(jiff::Timestamp::now());
    assert!(!has(&plan.status, "Failed", "BackoffLimitExceeded"));
    assert_eq!(plan.create.len(), 1);
}

#[test]
fn deadline_fails_the_job() {
    let j = job(json!({"activeDeadlineSeconds": 5}), json!({"startTime": "2020-01-01T00:00:00Z"}));
    let none = BTreeSet::new();
    let plan = View::new(&j, &[], &none, &none).plan(jiff::Timestamp::now());
    assert!(has(&plan.status, "Failed", "DeadlineExceeded"));
}

#[test]
fn indexed_creates_missing_indexes() {
    let j =
        job(json!({"completions": 4, "parallelism": 3, "completionMode": "Indexed"}), json!({"completedIndexes": "0"}));
    let pods = vec![pod("x", "Running", true, Some(1))];
    let none = BTreeSet::new();
    let plan = View::new(&j, &pods, &none, &none).plan(jiff::Timestamp::now());
    assert_eq!(plan.create, vec![Some(2), Some(3)]);
    assert_eq!(plan.status.active, Some(3));
}

#[test]
fn ttl_after_finish() {
    let j = job(
        json!({"ttlSecondsAfterFinished": 0}),
        json!({"completionTime": "2020-01-01T00:00:00Z", "conditions": [{"type": "Complete", "status": "True"}]}),
    );
    let none = BTreeSet::new();
    let plan = View::new(&j, &[], &none, &none).plan(jiff::Timestamp::now());
    assert_eq!(plan.ttl_expired_in, Some(Duration::ZERO));
}
