//! Faults injected into one identity's requests, and the trace of its requests, seen
//! through a real client: the ServiceAccount under test gets the fault, the admin does
//! not; a write that fails after commit has applied; a crash point never answers.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use opkit_testenv::{Fault, FaultAction, RequestFilter, TestEnv};

const NS: &str = "faults";

fn config_map(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm
}

/// The environment, and a client acting as ServiceAccount `faults:op` (allowed
/// everything) that does not retry 504s.
async fn setup() -> (TestEnv, Client, String) {
    let env = TestEnv::start().await.expect("env");
    let mut config = env.cluster_admin_service_account_config(NS, "op").await.expect("config");
    config.default_retry = false;
    (env, Client::try_from(config).expect("client"), format!("system:serviceaccount:{NS}:op"))
}

#[tokio::test]
async fn a_rejected_write_does_not_run_and_touches_only_its_identity() {
    let (env, op, user) = setup().await;
    let fault = env.inject_fault(Fault {
        filter: RequestFilter::user(&user).writes().resource("", "configmaps"),
        nth: 1,
        action: FaultAction::Reject { code: 409 },
    });
    let admin: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    admin.create(&PostParams::default(), &config_map("admins")).await.expect("the admin is not perturbed");
    let ops: Api<ConfigMap> = Api::namespaced(op, NS);
    let err = ops.create(&PostParams::default(), &config_map("a")).await.expect_err("the fault");
    let kube::Error::Api(status) = err else { panic!("not a Status: {err}") };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"), "{status:?}");
    assert!(fault.fired());
    assert!(admin.get_opt("a").await.expect("get").is_none(), "a rejected write does not run");
    ops.create(&PostParams::default(), &config_map("a")).await.expect("the fault fires once");
}

#[tokio::test]
async fn a_write_failed_after_commit_applied_and_the_trace_tells_writes_that_changed_nothing() {
    let (env, op, user) = setup().await;
    let trace = env.trace_requests(&user);
    let _fault = env.inject_fault(Fault {
        filter: RequestFilter::user(&user).verb("create"),
        nth: 1,
        action: FaultAction::FailAfterCommit,
    });
    let ops: Api<ConfigMap> = Api::namespaced(op, NS);
    let err = ops.create(&PostParams::default(), &config_map("b")).await.expect_err("the fault");
    let kube::Error::Api(status) = err else { panic!("not a Status: {err}") };
    assert_eq!((status.code, status.reason.as_str()), (504, "Timeout"), "{status:?}");
    ops.get("b").await.expect("the write applied");
    let patch = serde_json::json!({"data": {"k": "v"}});
    ops.patch("b", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patch");
    ops.patch("b", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("the same patch");
    let seen: Vec<(String, u16, bool, Option<FaultAction>)> =
        trace.requests().into_iter().map(|r| (r.verb, r.code, r.changed, r.fault)).collect();
    assert_eq!(
        seen,
        [
            ("create".into(), 504, true, Some(FaultAction::FailAfterCommit)),
            ("get".into(), 200, false, None),
            ("patch".into(), 200, true, None),
            ("patch".into(), 200, false, None),
        ]
    );
}

#[tokio::test]
async fn a_crash_point_commits_the_write_and_never_answers() {
    let (env, op, user) = setup().await;
    let fault = env.inject_fault(Fault {
        filter: RequestFilter::user(&user).writes(),
        nth: 1,
        action: FaultAction::CrashAfterCommit,
    });
    let ops: Api<ConfigMap> = Api::namespaced(op, NS);
    let pending = tokio::spawn(async move { ops.create(&PostParams::default(), &config_map("c")).await });
    tokio::time::timeout(Duration::from_secs(30), fault.wait_fired()).await.expect("the fault fires");
    let admin: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    admin.get("c").await.expect("the write committed");
    assert!(!pending.is_finished(), "the client got no answer");
    pending.abort();
}

#[tokio::test]
async fn after_a_stale_restart_lists_of_any_version_lag_until_the_identitys_next_write() {
    let (env, op, user) = setup().await;
    let ops: Api<ConfigMap> = Api::namespaced(op.clone(), NS);
    ops.create(&PostParams::default(), &config_map("before")).await.expect("create");
    let fault = env.inject_fault(Fault {
        filter: RequestFilter::user(&user).writes(),
        nth: 1,
        action: FaultAction::CrashWithStaleRestart,
    });
    let pending = tokio::spawn(async move { ops.create(&PostParams::default(), &config_map("after")).await });
    tokio::time::timeout(Duration::from_secs(30), fault.wait_fired()).await.expect("the fault fires");
    pending.abort();
    let names = |list: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        let mut n: Vec<String> = list.items.into_iter().filter_map(|c| c.metadata.name).collect();
        n.retain(|n| n != "kube-root-ca.crt");
        n.sort();
        n
    };
    let ops: Api<ConfigMap> = Api::namespaced(op, NS);
    let any = kube::api::ListParams::default().match_any();
    assert_eq!(names(ops.list(&any).await.expect("list")), ["before"], "served as of the write before the crash");
    let fresh = kube::api::ListParams::default();
    assert_eq!(names(ops.list(&fresh).await.expect("list")), ["after", "before"], "a quorum read is never stale");
    ops.create(&PostParams::default(), &config_map("third")).await.expect("create");
    assert_eq!(names(ops.list(&any).await.expect("list")), ["after", "before", "third"], "caught up at its write");
}
