//! Watch history survives a restart of a durable server: a watch from a resourceVersion
//! inside the persisted window resumes with exactly the events since (no 410), a
//! resourceVersion older than the window gets 410 Gone, and a kube-rs `watcher` across a
//! restart does not relist.

use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use opkit_apiserver::{ApiServer, HistoryWindow, RunningServer, ServerConfig};

use crate::common::{client_for, config_map, create_cm, next_item, rv_num, wait_for_item, within};

async fn restart(server: RunningServer, cfg: &ServerConfig) -> RunningServer {
    within("shutdown", server.shutdown()).await;
    within("restart", ApiServer::start(cfg.clone())).await.expect("restart on the same data dir")
}

fn durable(dir: &std::path::Path, token: &str) -> ServerConfig {
    let mut cfg = ServerConfig::durable(dir);
    cfg.token = Some(token.into());
    cfg
}

fn describe(e: &WatchEvent<ConfigMap>) -> String {
    match e {
        WatchEvent::Added(o) => format!("ADDED {}", o.name_any()),
        WatchEvent::Modified(o) => format!("MODIFIED {}", o.name_any()),
        WatchEvent::Deleted(o) => format!("DELETED {}", o.name_any()),
        WatchEvent::Bookmark(_) => "BOOKMARK".into(),
        WatchEvent::Error(e) => format!("ERROR {} {}", e.code, e.message),
    }
}

#[tokio::test]
async fn a_watch_from_before_a_restart_gets_exactly_the_missed_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = durable(dir.path(), "history-token");
    let server = within("start", ApiServer::start(cfg.clone())).await.expect("start");
    cfg.bind = server.addr();
    let api: Api<ConfigMap> = Api::namespaced(client_for(&server).await, "default");
    let from = rv_num(&create_cm(&api, "a").await.metadata);
    create_cm(&api, "b").await;
    api.replace("a", &PostParams::default(), &{
        let mut a = api.get("a").await.expect("get a");
        a.data = Some([("k".to_string(), "changed".to_string())].into());
        a
    })
    .await
    .expect("update a");
    api.delete("b", &Default::default()).await.expect("delete b");

    let server = restart(server, &cfg).await;
    let api: Api<ConfigMap> = Api::namespaced(client_for(&server).await, "default");
    let mut events = api.watch(&WatchParams::default(), &from.to_string()).await.expect("watch").boxed();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(describe(&next_item("a missed event", &mut events).await.expect("event")));
    }
    assert_eq!(seen, ["ADDED b", "MODIFIED a", "DELETED b"], "exactly the events since {from}, no 410");
    create_cm(&api, "c").await;
    let next = describe(&next_item("a live event", &mut events).await.expect("event"));
    assert_eq!(next, "ADDED c");
    server.shutdown().await;
}

#[tokio::test]
async fn a_watch_from_before_the_persisted_window_gets_410() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = durable(dir.path(), "window-token");
    cfg.store.persisted_history = HistoryWindow { events: 4, bytes: usize::MAX };
    let server = within("start", ApiServer::start(cfg.clone())).await.expect("start");
    cfg.bind = server.addr();
    let api: Api<ConfigMap> = Api::namespaced(client_for(&server).await, "default");
    let old = rv_num(&create_cm(&api, "old").await.metadata);
    for i in 0..6 {
        create_cm(&api, &format!("n{i}")).await;
    }
    let recent = rv_num(&api.get("n2").await.expect("get").metadata);

    let server = restart(server, &cfg).await;
    let api: Api<ConfigMap> = Api::namespaced(client_for(&server).await, "default");
    let mut gone = api.watch(&WatchParams::default(), &old.to_string()).await.expect("watch").boxed();
    let first = next_item("the 410", &mut gone).await.expect("event");
    assert!(matches!(&first, WatchEvent::Error(e) if e.code == 410), "{}", describe(&first));
    let mut resumed = api.watch(&WatchParams::default(), &recent.to_string()).await.expect("watch").boxed();
    let seen: Vec<String> = resumed.by_ref().take(3).map_ok(|e| describe(&e)).try_collect().await.expect("events");
    assert_eq!(seen, ["ADDED n3", "ADDED n4", "ADDED n5"]);
    server.shutdown().await;
}

/// Runs a kube-rs `watcher` across a restart of a durable server keeping `window` of
/// history; returns how many times it listed (`Init` events) and the time from the
/// restart to it delivering a change made after it.
async fn watcher_across_a_restart(window: HistoryWindow, token: &str) -> (usize, std::time::Duration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = durable(dir.path(), token);
    cfg.store.persisted_history = window;
    let server = within("start", ApiServer::start(cfg.clone())).await.expect("start");
    cfg.bind = server.addr();
    let client = client_for(&server).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create_cm(&api, "before").await;
    let mut events = watcher::watcher(api.clone(), watcher::Config::default()).default_backoff().boxed();
    let mut inits = 0;
    wait_for_item("InitDone", &mut events, |e| {
        inits += usize::from(matches!(e, Ok(Event::Init)));
        matches!(e, Ok(Event::InitDone))
    })
    .await
    .expect("initial list");
    create_cm(&api, "live").await;
    wait_for_item("Apply(live)", &mut events, |e| matches!(e, Ok(Event::Apply(o)) if o.name_any() == "live"))
        .await
        .expect("live event");
    // Writes the watcher does not see move the revision past its resourceVersion, so a
    // server without that history answers its resumed watch with 410 and a relist.
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    for i in 0..3 {
        let s = Secret {
            metadata: kube::api::ObjectMeta { name: Some(format!("s{i}")), ..Default::default() },
            ..Default::default()
        };
        secrets.create(&PostParams::default(), &s).await.expect("create secret");
    }

    within("shutdown", server.shutdown()).await;
    let restarted = Instant::now();
    let server = within("restart", ApiServer::start(cfg.clone())).await.expect("restart");
    let api: Api<ConfigMap> = Api::namespaced(client_for(&server).await, "default");
    api.create(&PostParams::default(), &config_map("after", &[("k", "v")])).await.expect("create after restart");
    wait_for_item("the change after the restart", &mut events, |e| {
        inits += usize::from(matches!(e, Ok(Event::Init)));
        matches!(e, Ok(Event::Apply(o) | Event::InitApply(o)) if o.name_any() == "after")
    })
    .await
    .expect("event after restart");
    let elapsed = restarted.elapsed();
    server.shutdown().await;
    (inits, elapsed)
}

#[tokio::test]
async fn a_watcher_across_a_restart_resumes_without_relisting() {
    let (inits, elapsed) = watcher_across_a_restart(HistoryWindow::default(), "watcher-token").await;
    eprintln!("restart to the watcher acting on a change, resumed: {elapsed:?}");
    assert_eq!(inits, 1, "the watcher listed once, at the start, and resumed after the restart");
}

#[tokio::test]
async fn a_watcher_behind_the_persisted_window_relists_once() {
    let window = HistoryWindow { events: 1, bytes: usize::MAX };
    let (inits, elapsed) = watcher_across_a_restart(window, "relist-token").await;
    eprintln!("restart to the watcher acting on a change, after a 410 and a relist: {elapsed:?}");
    assert_eq!(inits, 2, "a resourceVersion older than the window gets 410, and the watcher relists");
}
