//! A `watcher` survives a restart of a durable server on the same data dir, port and token.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use opkit_apiserver::{ApiServer, ServerConfig};

use crate::common::{client_for, create_cm, rv_num, wait_for_item, within};

#[tokio::test]
async fn watcher_survives_durable_server_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = ServerConfig::durable(dir.path());
    cfg.token = Some("restart-test-token".into());
    let server = within("first start", ApiServer::start(cfg.clone())).await.expect("first start");
    // Restart on the port the first start picked.
    cfg.bind = server.addr();
    let client = client_for(&server).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let before = create_cm(&api, "before").await;

    // Errors while the server is down are retried with kube's default backoff.
    let mut events = watcher::watcher(api.clone(), watcher::Config::default()).default_backoff().boxed();
    wait_for_item("initial list", &mut events, |e| matches!(e, Ok(Event::InitDone))).await.expect("InitDone");
    create_cm(&api, "live").await;
    wait_for_item("Apply(live)", &mut events, |e| matches!(e, Ok(Event::Apply(o)) if o.name_any() == "live"))
        .await
        .expect("event");

    within("shutdown", server.shutdown()).await;
    let server =
        within("second start", ApiServer::start(cfg.clone())).await.expect("restart on the same dir, port and token");
    assert_eq!(server.addr(), cfg.bind);

    // Objects survived, with their resourceVersions.
    let kept = api.get("before").await.expect("object survives restart");
    assert_eq!(kept.metadata.resource_version, before.metadata.resource_version);
    assert_eq!(kept.metadata.uid, before.metadata.uid);

    let after = create_cm(&api, "after-restart").await;
    assert!(rv_num(&after.metadata) > rv_num(&before.metadata), "revisions keep growing across restarts");
    let delivered = wait_for_item(
        "the watcher to deliver a change made after the restart",
        &mut events,
        |e| matches!(e, Ok(Event::Apply(o) | Event::InitApply(o)) if o.name_any() == "after-restart"),
    )
    .await;
    assert!(delivered.is_ok());
    let names: Vec<String> =
        api.list(&ListParams::default()).await.expect("list").items.iter().map(|c| c.name_any()).collect();
    assert_eq!(names, ["after-restart", "before", "live"]);
    server.shutdown().await;
}

async fn concurrent_durable_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = opkit_testenv::TestEnv::builder()
        .server(ServerConfig::durable(dir.path()))
        .without_controllers()
        .start()
        .await
        .expect("start");
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..16 {
        let api = api.clone();
        writers.spawn(async move {
            for i in 0..10 {
                create_cm(&api, &format!("w{w}-{i}")).await;
                api.get(&format!("w{w}-{i}")).await.expect("read back");
            }
        });
    }
    while let Some(r) = writers.join_next().await {
        r.expect("writer");
    }
    assert_eq!(api.list(&ListParams::default()).await.expect("list").items.len(), 160);
}

/// 16 writers creating and reading back 160 ConfigMaps on the durable (SQLite) store.
/// Runs on its own runtime and thread: a deadlock in the server blocks every runtime
/// worker, so only a waiter outside the runtime can report it.
#[test]
fn durable_store_serves_concurrent_writers() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().expect("runtime");
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(concurrent_durable_writes())));
        let _ = done_tx.send(outcome.is_ok());
        // A deadlocked runtime cannot be shut down; leave it to process exit.
        #[allow(clippy::mem_forget)]
        std::mem::forget(rt);
    });
    match done_rx.recv_timeout(crate::common::TIMEOUT * 2) {
        Ok(true) => {}
        Ok(false) => panic!("concurrent durable writes failed (see the panic above)"),
        Err(_) => panic!(
            "160 concurrent creates on the durable store did not finish in {:?}: the server is stuck",
            crate::common::TIMEOUT * 2
        ),
    }
}
