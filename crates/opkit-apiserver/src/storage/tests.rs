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
