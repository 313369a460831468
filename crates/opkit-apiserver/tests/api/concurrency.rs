//! Optimistic concurrency: many writers doing read-modify-write on one object, retrying
//! on 409 Conflict, must never lose an update.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

use crate::common::{TIMEOUT, config_map, env, rv_num};

const TASKS: u64 = 20;
const INCREMENTS: u64 = 100;

fn counter(cm: &ConfigMap) -> u64 {
    cm.data.as_ref().and_then(|d| d.get("count")).and_then(|v| v.parse().ok()).expect("count is a number")
}

/// One read-modify-write increment, retried on 409; returns the resourceVersion written.
async fn increment(api: &Api<ConfigMap>) -> (u64, u32) {
    let mut conflicts = 0;
    loop {
        let mut cm = api.get("counter").await.expect("get counter");
        let next = counter(&cm) + 1;
        cm.data.get_or_insert_default().insert("count".into(), next.to_string());
        match api.replace("counter", &PostParams::default(), &cm).await {
            Ok(written) => {
                assert_eq!(counter(&written), next);
                return (rv_num(&written.metadata), conflicts);
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                assert_eq!(s.reason, "Conflict", "409 must be a Conflict: {s:?}");
                conflicts += 1;
            }
            Err(e) => panic!("unexpected error during increment: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_writers_increment_a_counter_exactly_2000_times() {
    let env = env().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    api.create(&PostParams::default(), &config_map("counter", &[("count", "0")])).await.expect("create counter");

    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..TASKS {
        let api = api.clone();
        tasks.spawn(async move {
            let mut rvs = Vec::with_capacity(INCREMENTS as usize);
            let mut conflicts = 0;
            for _ in 0..INCREMENTS {
                let (rv, c) = increment(&api).await;
                rvs.push(rv);
                conflicts += c;
            }
            (rvs, conflicts)
        });
    }
    let mut all_rvs = HashSet::new();
    let mut total_conflicts = 0;
    let deadline = TIMEOUT * 10; // generous: the machine may be shared
    let joined = tokio::time::timeout(deadline, async {
        while let Some(r) = tasks.join_next().await {
            let (rvs, conflicts) = r.expect("writer task");
            total_conflicts += conflicts;
            for rv in rvs {
                assert!(all_rvs.insert(rv), "two successful writes got resourceVersion {rv}");
            }
        }
    })
    .await;
    assert!(joined.is_ok(), "writers did not finish within {deadline:?}");

    let final_cm = api.get("counter").await.expect("final get");
    assert_eq!(counter(&final_cm), TASKS * INCREMENTS, "lost updates ({total_conflicts} conflicts retried)");
    assert_eq!(all_rvs.len() as u64, TASKS * INCREMENTS);
    assert_eq!(
        rv_num(&final_cm.metadata),
        *all_rvs.iter().max().expect("some writes"),
        "the last write is what is stored"
    );
}

/// Concurrent creates of NodePort Services never get the same node port or cluster IP,
/// and of many asking for one port exactly one gets it (kube's allocators are atomic).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_services_never_share_a_node_port_or_cluster_ip() {
    use k8s_openapi::api::core::v1::Service;
    let env = env().await;
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let service = |name: String, node_port: Option<i32>| -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": node_port}]},
        }))
        .expect("service")
    };
    let creates = (0..40).map(|i| {
        let services = services.clone();
        let svc = service(format!("auto-{i}"), None);
        tokio::spawn(async move { services.create(&PostParams::default(), &svc).await })
    });
    let contested = (0..10).map(|i| {
        let services = services.clone();
        let svc = service(format!("wants-31000-{i}"), Some(31000));
        tokio::spawn(async move { services.create(&PostParams::default(), &svc).await })
    });
    let created = futures::future::join_all(creates.chain(contested).collect::<Vec<_>>());
    let results = tokio::time::timeout(TIMEOUT, created).await.expect("creates answered");
    let mut ports = HashSet::new();
    let mut ips = HashSet::new();
    let mut got_31000 = 0;
    for result in results {
        match result.expect("task") {
            Ok(svc) => {
                let spec = svc.spec.expect("spec");
                let port = spec.ports.as_ref().and_then(|p| p[0].node_port).expect("a node port");
                assert!(ports.insert(port), "node port {port} handed out twice");
                assert!(ips.insert(spec.cluster_ip.clone().expect("a cluster IP")), "cluster IP handed out twice");
                got_31000 += usize::from(port == 31000);
            }
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422, "{s:?}");
                assert!(s.message.contains("provided port is already allocated"), "{s:?}");
            }
            Err(e) => panic!("create failed: {e}"),
        }
    }
    assert_eq!(got_31000, 1, "exactly one Service got the contested port");
    assert_eq!(ports.len(), 41, "40 automatic ports and the contested one");
}
