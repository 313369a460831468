//! Watches: raw watch events, `kube::runtime::watcher` (list-watch and streaming lists),
//! 410 after compaction with recovery by relisting, bookmarks and `timeoutSeconds`.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event};
use opkit_apiserver::ServerConfig;
use opkit_apiserver::StoreOptions;
use opkit_testenv::TestEnv;
use serde_json::json;

use crate::common::{create_cm, env, next_item, wait_for_item, within};

fn name_of(ev: &Event<ConfigMap>) -> Option<String> {
    match ev {
        Event::Apply(o) | Event::Delete(o) | Event::InitApply(o) => Some(o.name_any()),
        _ => None,
    }
}

#[tokio::test]
async fn raw_watch_sees_added_modified_deleted() {
    let env = env().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let list = api.list(&ListParams::default()).await.expect("list");
    let rv = list.metadata.resource_version.expect("list rv");
    let mut stream = api.watch(&WatchParams::default(), &rv).await.expect("watch").boxed();

    create_cm(&api, "w").await;
    api.patch("w", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "2"}}))).await.expect("patch");
    api.delete("w", &DeleteParams::default()).await.expect("delete");

    match next_item("ADDED", &mut stream).await.expect("event") {
        WatchEvent::Added(cm) => assert_eq!(cm.name_any(), "w"),
        other => panic!("expected ADDED, got {other:?}"),
    }
    match next_item("MODIFIED", &mut stream).await.expect("event") {
        WatchEvent::Modified(cm) => assert_eq!(cm.data.and_then(|d| d.get("k").cloned()).as_deref(), Some("2")),
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    match next_item("DELETED", &mut stream).await.expect("event") {
        WatchEvent::Deleted(cm) => assert_eq!(cm.name_any(), "w"),
        other => panic!("expected DELETED, got {other:?}"),
    }
}

#[tokio::test]
async fn watcher_sees_apply_and_delete() {
    let env = env().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_cm(&api, "pre").await;
    let mut events = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    assert!(matches!(next_item("Init", &mut events).await, Ok(Event::Init)));
    let pre = next_item("InitApply", &mut events).await.expect("event");
    assert_eq!(name_of(&pre).as_deref(), Some("pre"));
    assert!(matches!(next_item("InitDone", &mut events).await, Ok(Event::InitDone)));

    create_cm(&api, "new").await;
    let ev = next_item("Apply(new)", &mut events).await.expect("event");
    assert!(matches!(&ev, Event::Apply(o) if o.name_any() == "new"), "{ev:?}");
    api.patch("new", &PatchParams::default(), &Patch::Merge(json!({"data": {"x": "y"}}))).await.expect("patch");
    let ev = next_item("Apply(modified)", &mut events).await.expect("event");
    assert!(matches!(&ev, Event::Apply(o) if o.data.as_ref().is_some_and(|d| d.contains_key("x"))), "{ev:?}");
    api.delete("new", &DeleteParams::default()).await.expect("delete");
    let ev = next_item("Delete", &mut events).await.expect("event");
    assert!(matches!(&ev, Event::Delete(o) if o.name_any() == "new"), "{ev:?}");
}

fn small_log_config() -> ServerConfig {
    ServerConfig { store: StoreOptions { log_capacity: 16, ..Default::default() }, ..ServerConfig::in_memory() }
}

async fn churn_secrets(env: &TestEnv, n: usize) {
    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    for i in 0..n {
        let s = Secret {
            metadata: ObjectMeta { name: Some(format!("churn-{i:03}")), ..Default::default() },
            ..Default::default()
        };
        secrets.create(&PostParams::default(), &s).await.expect("create secret");
    }
}

#[tokio::test]
async fn watch_from_compacted_revision_is_410() {
    let env = within("start", TestEnv::builder().server(small_log_config()).without_controllers().start())
        .await
        .expect("start");
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let old = create_cm(&api, "old").await;
    let old_rv = old.metadata.resource_version.expect("rv");
    churn_secrets(&env, 40).await;

    match api.watch(&WatchParams::default(), &old_rv).await {
        // kube-apiserver answers 200 and then a single ERROR event.
        Ok(stream) => {
            let mut stream = stream.boxed();
            match next_item("ERROR event", &mut stream).await {
                Ok(WatchEvent::Error(s)) => {
                    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"), "{s:?}");
                }
                Err(kube::Error::Api(s)) => assert_eq!(s.code, 410, "{s:?}"),
                other => panic!("expected a 410 ERROR event, got {other:?}"),
            }
        }
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 410, "{s:?}"),
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// The history window is bounded in bytes too: with room for about 64 KiB of objects,
/// writing ten 16 KiB Secrets pushes an older resourceVersion out, though far fewer
/// events than the event cap were written.
#[tokio::test]
async fn watch_history_is_bounded_in_bytes() {
    let cfg = ServerConfig {
        store: StoreOptions { log_capacity: 100_000, log_bytes: 64 * 1024, ..Default::default() },
        ..ServerConfig::in_memory()
    };
    let env = within("start", TestEnv::builder().server(cfg).without_controllers().start()).await.expect("start");
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let old_rv = create_cm(&api, "old").await.metadata.resource_version.expect("rv");
    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    let payload = k8s_openapi::ByteString(vec![b'x'; 16 * 1024]);
    for i in 0..10 {
        let s = Secret {
            metadata: ObjectMeta { name: Some(format!("big-{i}")), ..Default::default() },
            data: Some([("blob".to_string(), payload.clone())].into()),
            ..Default::default()
        };
        secrets.create(&PostParams::default(), &s).await.expect("create secret");
    }
    let stream = api.watch(&WatchParams::default(), &old_rv).await.expect("watch answered");
    let mut stream = stream.boxed();
    match next_item("ERROR event", &mut stream).await {
        Ok(WatchEvent::Error(s)) => assert_eq!((s.code, s.reason.as_str()), (410, "Expired"), "{s:?}"),
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 410, "{s:?}"),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
}

#[tokio::test]
async fn watcher_recovers_from_410_by_relisting() {
    let env = within("start", TestEnv::builder().server(small_log_config()).without_controllers().start())
        .await
        .expect("start");
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_cm(&api, "a").await;
    // A 1-second server timeout makes the watcher resume from its last resourceVersion,
    // which the secret churn below pushes out of the 16-event log.
    let cfg = watcher::Config::default().timeout(1).disable_bookmarks();
    let mut events = watcher::watcher(api.clone(), cfg).boxed();
    wait_for_item("InitDone", &mut events, |e| matches!(e, Ok(Event::InitDone))).await.expect("InitDone");
    churn_secrets(&env, 40).await;

    let mut saw_410 = false;
    within("a 410 and a relist", async {
        let mut listed = Vec::new();
        while let Some(ev) = events.next().await {
            match ev {
                Err(watcher::Error::WatchError(s)) if s.code == 410 => saw_410 = true,
                Err(watcher::Error::WatchStartFailed(kube::Error::Api(s))) if s.code == 410 => {
                    panic!("410 must come as an ERROR watch event (HTTP 200), not a failed request: watcher cannot recover from {s:?}")
                }
                Err(e) => panic!("unexpected watcher error {e}"),
                Ok(Event::Init) => listed.clear(),
                Ok(Event::InitApply(o)) => listed.push(o.name_any()),
                Ok(Event::InitDone) if saw_410 => {
                    listed.sort();
                    assert_eq!(listed, ["a"]);
                    return;
                }
                Ok(_) => {}
            }
        }
        panic!("watcher ended");
    })
    .await;
    assert!(saw_410);
    create_cm(&api, "c").await;
    let ev = wait_for_item(
        "Apply(c) after relist",
        &mut events,
        |e| matches!(e, Ok(Event::Apply(o)) if o.name_any() == "c"),
    )
    .await;
    assert!(ev.is_ok());
}

#[tokio::test]
async fn streaming_list_watcher_uses_initial_events_bookmark() {
    let env = env().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for n in ["s1", "s2", "s3"] {
        create_cm(&api, n).await;
    }
    let mut events = watcher::watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    within("streaming initial list", async {
        loop {
            match events.next().await.expect("stream open") {
                Ok(Event::Init) => {}
                Ok(Event::InitApply(o)) => initial.push(o.name_any()),
                Ok(Event::InitDone) => break,
                other => panic!("unexpected during initial events: {other:?}"),
            }
        }
    })
    .await;
    initial.sort();
    assert_eq!(initial, ["s1", "s2", "s3"]);
    create_cm(&api, "s4").await;
    let ev = next_item("Apply(s4)", &mut events).await.expect("event");
    assert!(matches!(&ev, Event::Apply(o) if o.name_any() == "s4"), "{ev:?}");
}

#[tokio::test]
async fn raw_initial_events_end_with_annotated_bookmark() {
    let env = env().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_cm(&api, "b1").await;
    let last = create_cm(&api, "b2").await;
    let wp = WatchParams::default().initial_events();
    let mut stream = api.watch(&wp, "0").await.expect("watch").boxed();
    let mut added = Vec::new();
    let bookmark = within("initial-events-end bookmark", async {
        loop {
            match stream.next().await.expect("stream open").expect("event") {
                WatchEvent::Added(o) => added.push(o.name_any()),
                WatchEvent::Bookmark(b) => break b,
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await;
    added.sort();
    assert_eq!(added, ["b1", "b2"]);
    assert_eq!(bookmark.metadata.annotations.get("k8s.io/initial-events-end").map(String::as_str), Some("true"));
    let bm_rv: u64 = bookmark.metadata.resource_version.parse().expect("numeric bookmark rv");
    assert!(bm_rv >= crate::common::rv_num(&last.metadata), "bookmark rv covers the listed state");
}

#[tokio::test]
async fn timeout_seconds_ends_the_watch() {
    let env = env().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let rv = api.list(&ListParams::default()).await.expect("list").metadata.resource_version.expect("rv");
    // kube's WatchParams allow bookmarks by default; the deadline must hold either way.
    for (label, wp) in [
        ("with bookmarks", WatchParams::default().timeout(1)),
        ("without bookmarks", WatchParams::default().timeout(1).disable_bookmarks()),
    ] {
        let stream = api.watch(&wp, &rv).await.expect("watch");
        let started = std::time::Instant::now();
        let ended = tokio::time::timeout(std::time::Duration::from_secs(10), stream.try_collect::<Vec<_>>()).await;
        let collected =
            ended.unwrap_or_else(|_| panic!("timeoutSeconds=1 watch {label} still open after 10s")).expect("clean end");
        assert!(collected.is_empty(), "no events: {collected:?}");
        assert!(
            started.elapsed() >= std::time::Duration::from_millis(900),
            "{label}: ended too early: {:?}",
            started.elapsed()
        );
    }
}

/// A watcher whose client stops reading holds no history of its own: once the server's
/// buffers for it are full and the log window (16 events here) has moved past it, it is
/// ended with a 410 Expired ERROR event when the client reads again, after the events
/// that were already on their way, in order and without gaps (kube's watch cache ends
/// such watchers too; clients relist).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_stops_reading_is_ended_with_410_once_out_of_the_window() {
    let env = within("start", TestEnv::builder().server(small_log_config()).without_controllers().start())
        .await
        .expect("start");
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let rv = api.list(&ListParams::default()).await.expect("list").metadata.resource_version.expect("rv");
    let mut stream = api.watch(&WatchParams::default().disable_bookmarks(), &rv).await.expect("watch").boxed();
    // 30 MiB of events, more than the socket, HTTP and per-watch buffers hold, while the
    // watch is not read.
    let written = 300;
    let payload = "x".repeat(100 * 1024);
    for i in 0..written {
        let cm = crate::common::config_map(&format!("big-{i:03}"), &[("blob", &payload)]);
        within("create", api.create(&PostParams::default(), &cm)).await.expect("create");
    }
    let mut received = 0;
    within("the ERROR event and the end of the watch", async {
        loop {
            match stream.next().await {
                Some(Ok(WatchEvent::Added(cm))) => {
                    assert_eq!(cm.name_any(), format!("big-{received:03}"), "in order, without gaps");
                    received += 1;
                }
                Some(Ok(WatchEvent::Error(s))) => {
                    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"), "{s:?}");
                    break;
                }
                other => panic!("after {received} events: expected ADDED or a 410 ERROR, got {other:?}"),
            }
        }
        assert!(stream.next().await.is_none(), "the watch ends after the ERROR event");
    })
    .await;
    assert!(received < written, "the watcher fell behind: it got {received} of {written}");
}

/// A watch from resourceVersion 0 reads its initial list from the store a page at a time
/// (500 objects) as the client takes the events: every object comes once, in name order,
/// with selectors applied across pages, and the changes after the list follow it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_resource_version_0_sends_every_object_across_pages() {
    let env = env().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    const OBJECTS: usize = 1_203;
    let creates = futures::stream::iter(0..OBJECTS).map(|i| {
        let api = api.clone();
        async move {
            let mut cm = crate::common::config_map(&format!("page-{i:04}"), &[("k", "v")]);
            let parity = if i % 2 == 0 { "even" } else { "odd" };
            cm.metadata.labels = Some([("parity".to_string(), parity.to_string())].into());
            api.create(&PostParams::default(), &cm).await.map(|_| ())
        }
    });
    within("creating the ConfigMaps", creates.buffer_unordered(16).try_collect::<Vec<_>>())
        .await
        .expect("create ConfigMaps");
    for (selector, expected) in [(None, OBJECTS), (Some("parity=odd"), OBJECTS / 2)] {
        let mut wp = WatchParams::default().disable_bookmarks();
        if let Some(s) = selector {
            wp = wp.labels(s);
        }
        let mut stream = api.watch(&wp, "0").await.expect("watch").boxed();
        let mut names = Vec::new();
        while names.len() < expected {
            match next_item("an initial ADDED event", &mut stream).await.expect("event") {
                WatchEvent::Added(cm) => names.push(cm.name_any()),
                other => panic!("expected ADDED, got {other:?}"),
            }
        }
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted, "{selector:?}: once each, in name order");
        assert!(names.iter().all(|n| n.starts_with("page-")), "{selector:?}");
        if selector.is_some() {
            assert!(names.iter().all(|n| n[5..].parse::<usize>().is_ok_and(|i| i % 2 == 1)), "odd only");
        }
        let name = format!("after-{}", names.len());
        let mut cm = crate::common::config_map(&name, &[("k", "v")]);
        // Matches the selector, if any; the first one stays out of the second list.
        let parity = if selector.is_some() { "odd" } else { "none" };
        cm.metadata.labels = Some([("parity".to_string(), parity.to_string())].into());
        api.create(&PostParams::default(), &cm).await.expect("create after the list");
        match next_item("the ADDED event after the list", &mut stream).await.expect("event") {
            WatchEvent::Added(cm) => assert_eq!(cm.name_any(), name),
            other => panic!("expected ADDED {name}, got {other:?}"),
        }
    }
}

/// The server counts a watch as open from its start until its client goes away, so a
/// closed watch keeps nothing: the count returns to where it was.
#[tokio::test]
async fn a_closed_watch_is_no_longer_counted_as_open() {
    let env = env().await;
    let registry = env.server().registry().clone();
    let before = registry.open_watches();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_cm(&api, "counted").await;
    let mut streams = Vec::new();
    for _ in 0..3 {
        let mut s = api.watch(&WatchParams::default(), "0").await.expect("watch").boxed();
        assert!(matches!(next_item("ADDED", &mut s).await, Ok(WatchEvent::Added(_))));
        streams.push(s);
    }
    assert_eq!(registry.open_watches(), before + 3);
    drop(streams);
    within("the closed watches to end on the server", async {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(10));
        while registry.open_watches() != before {
            tick.tick().await;
        }
    })
    .await;
}
