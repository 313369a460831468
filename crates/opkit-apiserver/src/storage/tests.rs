//! Tests of the revisioned store: writes, reads at a revision, watches, compaction, and
//! the durable backend under concurrency and across reopening.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::*;

fn rid() -> ResourceId {
    ResourceId::new("", "configmaps")
}

fn key(name: &str) -> ObjectName {
    ("default".into(), name.into())
}

async fn put(s: &Store, name: &str, v: &str) -> Revision {
    let body = Bytes::from(v.to_string());
    s.write(&rid(), &key(name), |_, _| Ok::<_, ()>(Write::Put(body))).await.expect("storage").expect("write").rev
}

#[tokio::test]
async fn revisions_grow_and_old_revisions_can_be_listed() {
    let s = Store::in_memory(StoreOptions::default());
    let r1 = put(&s, "a", "1").await;
    let r2 = put(&s, "b", "1").await;
    let r3 = put(&s, "a", "2").await;
    assert!(r1 < r2 && r2 < r3);
    let now = s.list(&rid(), &ListRange::default(), &mut |_| true).await.expect("list");
    assert_eq!(now.items, vec![Bytes::from("2"), Bytes::from("1")]);
    let then = s.list(&rid(), &ListRange { at: Some(r1), ..Default::default() }, &mut |_| true).await.expect("at r1");
    assert_eq!(then.items, vec![Bytes::from("1")], "only a existed, with its first value");
    let page = s.list(&rid(), &ListRange { limit: Some(1), ..Default::default() }, &mut |_| true).await.expect("page");
    assert_eq!(page.next, Some(key("a")));
    assert_eq!(page.remaining, Some(1));
}

#[tokio::test]
async fn watch_replays_from_a_revision_and_expires_after_compaction() {
    let s = Store::in_memory(StoreOptions { log_capacity: 16, ..Default::default() });
    let start = put(&s, "a", "0").await;
    for i in 1..=5 {
        put(&s, "a", &i.to_string()).await;
    }
    let mut sub = s.watch(&rid(), start).expect("watch");
    for i in 1..=5 {
        let e =
            tokio::time::timeout(Duration::from_secs(5), sub.next()).await.expect("event").expect("ok").expect("some");
        assert_eq!(e.value, Bytes::from(i.to_string()));
    }
    for i in 0..40 {
        put(&s, "b", &i.to_string()).await;
    }
    assert!(matches!(s.watch(&rid(), start), Err(StorageError::Expired { .. })));
    let err = s.list(&rid(), &ListRange { at: Some(start), ..Default::default() }, &mut |_| true).await;
    assert!(matches!(err, Err(StorageError::Expired { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_writes_under_concurrency_complete_and_survive_reopening() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("state.db");
    let s = Store::open(Box::new(SqliteBackend::open(&path).expect("open")), StoreOptions::default()).expect("store");
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..64 {
        let s = s.clone();
        tasks.spawn(async move {
            for i in 0..20 {
                put(&s, &format!("t{t}-{i}"), "{}").await;
                // Reads wait for durability too, interleaved with writes.
                s.get(&rid(), &key(&format!("t{t}-{i}"))).await.expect("get").expect("present");
            }
        });
    }
    let all = async {
        while let Some(r) = tasks.join_next().await {
            r.expect("task");
        }
    };
    tokio::time::timeout(Duration::from_secs(60), all).await.expect("64 concurrent durable writers finish");
    let last = s.revision();
    drop(s);
    let reopened =
        Store::open(Box::new(SqliteBackend::open(&path).expect("reopen")), StoreOptions::default()).expect("store");
    assert_eq!(reopened.count(&rid()), 64 * 20);
    assert_eq!(reopened.revision(), last);
    let next = put(&reopened, "after", "{}").await;
    assert!(next > last, "revisions continue after a restart");
    let _ = Arc::new(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_quarantines_rows_that_are_not_readable_objects() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("state.db");
    let s = Store::open(Box::new(SqliteBackend::open(&path).expect("open")), StoreOptions::default()).expect("store");
    put(&s, "good", "{}").await;
    drop(s);
    {
        let db = rusqlite::Connection::open(&path).expect("open the database");
        let too_deep = "[".repeat(200) + &"]".repeat(200);
        for (name, value) in [("garbage", "{oops"), ("scalar", "7"), ("deep", too_deep.as_str())] {
            db.execute(
                "INSERT INTO objects (resource, namespace, name, rev, value) VALUES ('/configmaps', 'default', ?1, 1, ?2)",
                rusqlite::params![name, value.as_bytes()],
            )
            .expect("insert a corrupt row");
        }
    }
    let reopened =
        Store::open(Box::new(SqliteBackend::open(&path).expect("reopen")), StoreOptions::default()).expect("store");
    assert_eq!(reopened.keys(&rid(), None), vec![key("good")], "only the readable object is served");
    assert!(reopened.get(&rid(), &key("garbage")).await.expect("get").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_revision_counter_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("state.db");
    let s = Store::open(Box::new(SqliteBackend::open(&path).expect("open")), StoreOptions::default()).expect("store");
    for i in 0..5 {
        put(&s, &format!("n{i}"), "{}").await;
    }
    let last = s.revision();
    drop(s);
    let db = rusqlite::Connection::open(&path).expect("open the database");
    db.execute("UPDATE meta SET value = ?1 WHERE key = 'revision'", rusqlite::params![(last - 2) as i64])
        .expect("roll the counter back");
    let refused = Store::open(Box::new(SqliteBackend::open(&path).expect("reopen")), StoreOptions::default());
    match refused {
        Err(StorageError::Backend(message)) => {
            assert!(message.contains(&format!("holds writes up to revision {last}")), "{message}")
        }
        Err(other) => panic!("refused with {other}"),
        Ok(_) => panic!("a rolled-back revision was trusted"),
    }
    // Once the counter is right again, the store opens and continues after it.
    db.execute("UPDATE meta SET value = ?1 WHERE key = 'revision'", rusqlite::params![last as i64]).expect("restore");
    let reopened =
        Store::open(Box::new(SqliteBackend::open(&path).expect("reopen")), StoreOptions::default()).expect("store");
    assert!(put(&reopened, "after", "{}").await > last);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_persisted_watch_event_is_quarantined_not_streamed() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("state.db");
    let open =
        || Store::open(Box::new(SqliteBackend::open(&path).expect("open")), StoreOptions::default()).expect("store");
    let s = open();
    let mut revs = Vec::new();
    for i in 0..6 {
        revs.push(put(&s, &format!("n{i}"), "{}").await);
    }
    drop(s);
    {
        let db = rusqlite::Connection::open(&path).expect("open the database");
        db.execute("UPDATE events SET value = ?1 WHERE rev = ?2", rusqlite::params![&b"{oops"[..], revs[3] as i64])
            .expect("corrupt one event");
    }
    let reopened = open();
    // From before the corrupt event: gone (410, the client relists), never its bytes.
    assert!(matches!(reopened.watch(&rid(), revs[1]), Err(StorageError::Expired { .. })));
    // From the corrupt event on: the events after it, all readable.
    let mut sub = reopened.watch(&rid(), revs[3]).expect("after the corrupt event");
    for want in &revs[4..] {
        let e =
            tokio::time::timeout(Duration::from_secs(5), sub.next()).await.expect("event").expect("ok").expect("some");
        assert_eq!(e.rev, *want);
        serde_json::from_slice::<serde_json::Value>(&e.value).expect("valid JSON");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopened_store_resumes_watches_from_the_persisted_window() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("state.db");
    let window = HistoryWindow { events: 8, bytes: usize::MAX };
    let open = || {
        let backend = SqliteBackend::open(&path).expect("open").with_history(window);
        Store::open(Box::new(backend), StoreOptions::default()).expect("store")
    };
    let s = open();
    let first = put(&s, "a", "{}").await;
    let mut revs = Vec::new();
    for i in 0..10 {
        revs.push(put(&s, &format!("n{i}"), "{}").await);
    }
    drop(s);
    let reopened = open();
    assert!(matches!(reopened.watch(&rid(), first), Err(StorageError::Expired { .. })), "older than the window");
    let from = revs[3];
    let mut sub = reopened.watch(&rid(), from).expect("inside the window");
    for (i, want) in revs[4..].iter().enumerate() {
        let e =
            tokio::time::timeout(Duration::from_secs(5), sub.next()).await.expect("event").expect("ok").expect("some");
        assert_eq!((e.rev, e.key.1.clone()), (*want, format!("n{}", i + 4)));
    }
}

async fn put_labelled(s: &Store, name: &str, tier: &str) -> Revision {
    put(s, name, &format!(r#"{{"metadata":{{"name":"{name}","labels":{{"tier":"{tier}"}}}}}}"#)).await
}

async fn names_with_tier(s: &Store, at: Option<Revision>, tier: &'static str) -> Vec<String> {
    let mut keep = move |item: ListItem<'_>| item.labels().and_then(|l| l.get("tier")) == Some(tier);
    let page = s.list(&rid(), &ListRange { at, ..Default::default() }, &mut keep).await.expect("list");
    page.items
        .iter()
        .map(|b| {
            let v: serde_json::Value = serde_json::from_slice(b).expect("json");
            v["metadata"]["name"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

/// Labels are read once per stored value: a relabelled object matches by its new labels
/// now, and by its old ones in a list at an older revision (rolled back from the log).
#[tokio::test]
async fn lists_match_the_labels_of_the_value_they_read() {
    let s = Store::in_memory(StoreOptions::default());
    put_labelled(&s, "a", "web").await;
    let before = put_labelled(&s, "b", "web").await;
    assert_eq!(names_with_tier(&s, None, "web").await, ["a", "b"]);
    put_labelled(&s, "a", "db").await;
    put(&s, "c", "{oops").await;
    assert_eq!(names_with_tier(&s, None, "web").await, ["b"]);
    assert_eq!(names_with_tier(&s, None, "db").await, ["a"]);
    assert_eq!(names_with_tier(&s, Some(before), "web").await, ["a", "b"]);
    assert!(names_with_tier(&s, Some(before), "db").await.is_empty());
}

/// A list filters a snapshot without the store lock: a write made while the list's filter
/// runs completes at once, and the list still returns the state it started from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_complete_while_a_list_is_filtering() {
    let s = Store::in_memory(StoreOptions::default());
    // More objects than are filtered inline, so the filter runs off the async workers.
    let objects = INLINE_LIST_OBJECTS + 10;
    for i in 0..objects {
        put(&s, &format!("o{i:04}"), "{}").await;
    }
    let before = s.revision();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let lister = s.clone();
    let list = tokio::spawn(async move {
        let mut first = true;
        let mut keep = move |_: ListItem<'_>| {
            if std::mem::take(&mut first) {
                let _ = entered_tx.send(());
                // Held until the write below is done (or the test gave up on it).
                let _ = release_rx.recv_timeout(Duration::from_secs(30));
            }
            true
        };
        lister.list(&rid(), &ListRange::default(), &mut keep).await
    });
    let entered = tokio::task::spawn_blocking(move || entered_rx.recv_timeout(Duration::from_secs(30)).is_ok());
    assert!(entered.await.expect("join"), "the list started filtering");
    // The write runs in its own task and reports through a thread-safe channel: if it
    // blocked on the store lock, it would block its worker thread, not this wait.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let writer = s.clone();
    tokio::spawn(async move {
        put(&writer, "during", "{}").await;
        let _ = done_tx.send(());
    });
    let wrote = tokio::task::spawn_blocking(move || done_rx.recv_timeout(Duration::from_secs(10)).is_ok());
    let wrote = wrote.await.expect("join");
    let _ = release_tx.send(());
    let page = list.await.expect("list task").expect("list");
    assert!(wrote, "a write waited for a list's filter: the store lock was held while filtering");
    assert_eq!(page.rev, before);
    assert_eq!(page.items.len(), objects, "the list returns the snapshot it started from");
    assert_eq!(s.count(&rid()), objects + 1);
}

async fn next_event(sub: &mut WatchSubscription) -> Result<Option<Arc<Event>>, StorageError> {
    tokio::time::timeout(Duration::from_secs(5), sub.next()).await.expect("the subscription answers")
}

/// A watcher holds no history of its own: one that stops reading while the log window
/// moves past it gets Expired when it reads again (the client then relists), while one
/// that keeps up reads every event though many more than the window were written.
#[tokio::test]
async fn a_watch_that_falls_out_of_the_window_expires() {
    let s = Store::in_memory(StoreOptions { log_capacity: 16, ..Default::default() });
    let start = put(&s, "a", "0").await;
    let mut slow = s.watch(&rid(), start).expect("watch");
    let mut keeping_up = s.watch(&rid(), start).expect("watch");
    for round in 0..4 {
        for i in 0..10 {
            put(&s, "b", &format!("{round}-{i}")).await;
        }
        for i in 0..10 {
            let e = next_event(&mut keeping_up).await.expect("still in the window").expect("an event");
            assert_eq!(e.value, Bytes::from(format!("{round}-{i}")));
        }
    }
    match next_event(&mut slow).await {
        Err(StorageError::Expired { requested, oldest }) => {
            assert_eq!(requested, start, "names the last revision the watcher saw");
            assert!(oldest > start + 1, "the window moved past it: {oldest}");
        }
        other => panic!("expected Expired, got {other:?}"),
    }
}
