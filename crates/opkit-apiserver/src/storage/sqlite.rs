//! The durable embedded backend: SQLite in WAL mode with `synchronous=FULL`, as k3s's
//! kine does. The store's commit thread calls [`Backend::persist`] with whole batches, so
//! each fsync covers every write that arrived meanwhile (group commit).
//!
//! Next to the objects, the `events` table keeps a bounded window of recent events
//! ([`HistoryWindow`]), written in the same transaction, so the store can refill its watch
//! log after a restart (kine likewise serves watches from its log table).
//!
//! At start the recorded revision (`meta.revision`) must be at least every stored one: a
//! rolled-back counter is refused rather than trusted.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use rusqlite::{Connection, ErrorCode, params};

use super::{Backend, Event, EventKind, LoadedObject, LoadedState, ResourceId, Revision, StorageError};

/// How many recent events a durable backend keeps for watches to resume from after a
/// restart: at most `events` events and `bytes` bytes of objects (the newest event always
/// stays). A watch from an older resourceVersion gets 410 Gone and relists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryWindow {
    /// The most events kept.
    pub events: usize,
    /// The most bytes of objects (after and before each write) kept.
    pub bytes: usize,
}

impl Default for HistoryWindow {
    /// 10 000 events or 64 MiB, whichever is reached first.
    fn default() -> Self {
        HistoryWindow { events: 10_000, bytes: 64 * 1024 * 1024 }
    }
}

/// Persists objects in a SQLite database file.
pub(crate) struct SqliteBackend {
    conn: Mutex<Connection>,
    window: HistoryWindow,
    /// The revision and size of every event in the `events` table, oldest first.
    kept: Mutex<Kept>,
}

/// Maps a SQLite error to the store's: a full disk is [`StorageError::NoSpace`].
fn db_err(e: rusqlite::Error) -> StorageError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => StorageError::NoSpace,
        _ => StorageError::Backend(e.to_string()),
    }
}

fn kind_code(kind: EventKind) -> i64 {
    match kind {
        EventKind::Added => 0,
        EventKind::Modified => 1,
        EventKind::Deleted => 2,
    }
}

/// The revisions and sizes of the events the database holds, oldest first, with their
/// total kept up to date (so a write's trimming does not sum the whole history).
#[derive(Default)]
struct Kept {
    events: VecDeque<(Revision, usize)>,
    bytes: usize,
}

impl Kept {
    fn new(events: VecDeque<(Revision, usize)>) -> Kept {
        let bytes = events.iter().map(|k| k.1).sum();
        Kept { events, bytes }
    }

    /// Records `batch` as held, then forgets the `trimmed` oldest events.
    fn advance(&mut self, batch: &[Arc<Event>], trimmed: usize) {
        for e in batch {
            let size = e.size();
            self.events.push_back((e.rev, size));
            self.bytes += size;
        }
        let trimmed = trimmed.min(self.events.len());
        for (_, size) in self.events.drain(..trimmed) {
            self.bytes -= size;
        }
    }
}

impl SqliteBackend {
    /// Opens (or creates) the database at `path`, keeping the default [`HistoryWindow`].
    pub(crate) fn open(path: &Path) -> Result<SqliteBackend, StorageError> {
        let conn = Connection::open(path).map_err(db_err)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=FULL;
             CREATE TABLE IF NOT EXISTS objects (
                 resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
                 rev INTEGER NOT NULL, value BLOB NOT NULL,
                 PRIMARY KEY (resource, namespace, name)) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS events (
                 rev INTEGER PRIMARY KEY, resource TEXT NOT NULL, namespace TEXT NOT NULL,
                 name TEXT NOT NULL, kind INTEGER NOT NULL, value BLOB NOT NULL,
                 prev BLOB, prev_rev INTEGER NOT NULL);",
        )
        .map_err(db_err)?;
        let kept = {
            let mut stmt = conn
                .prepare("SELECT rev, length(value) + coalesce(length(prev), 0) FROM events ORDER BY rev")
                .map_err(db_err)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as usize)))
                .map_err(db_err)?;
            Kept::new(rows.collect::<Result<VecDeque<_>, _>>().map_err(db_err)?)
        };
        Ok(SqliteBackend { conn: Mutex::new(conn), window: HistoryWindow::default(), kept: Mutex::new(kept) })
    }

    /// Keeps `window` of recent events (trimmed at the next write).
    pub(crate) fn with_history(mut self, window: HistoryWindow) -> SqliteBackend {
        self.window = window;
        self
    }

    /// How many of the oldest kept events must go once `batch` is added, and the newest
    /// revision among them.
    fn to_trim(&self, kept: &Kept, batch: &[Arc<Event>]) -> (usize, Option<Revision>) {
        let mut len = kept.events.len() + batch.len();
        let mut bytes: usize = kept.bytes + batch.iter().map(|e| e.size()).sum::<usize>();
        let sizes = kept.events.iter().copied().chain(batch.iter().map(|e| (e.rev, e.size())));
        let mut count = 0;
        let mut last = None;
        for (rev, size) in sizes {
            if len <= 1 || (len <= self.window.events && bytes <= self.window.bytes) {
                break;
            }
            len -= 1;
            bytes -= size;
            count += 1;
            last = Some(rev);
        }
        (count, last)
    }
}

impl Backend for SqliteBackend {
    fn load(&self) -> Result<LoadedState, StorageError> {
        let conn = self.conn.lock();
        let rev: u64 = conn
            .query_row("SELECT value FROM meta WHERE key = 'revision'", [], |r| r.get::<_, i64>(0))
            .map(|v| v as u64)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(0),
                e => Err(db_err(e)),
            })?;
        // The recorded revision is the newest ever written; a lower one (a database restored
        // from an older copy of `meta`, or edited) would hand out revisions clients have
        // already seen, so the server refuses to start on it, as it refuses an empty database.
        let stored: u64 = conn
            .query_row(
                "SELECT max(coalesce((SELECT max(rev) FROM objects), 0), coalesce((SELECT max(rev) FROM events), 0))",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|v| v as u64)
            .map_err(db_err)?;
        if stored > rev {
            return Err(StorageError::Backend(format!(
                "the database records revision {rev} as its newest, but holds writes up to revision {stored}; \
                 it was rolled back or damaged, and serving it would repeat resourceVersions clients have seen"
            )));
        }
        let mut stmt = conn.prepare("SELECT resource, namespace, name, rev, value FROM objects").map_err(db_err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(LoadedObject {
                    resource: r.get(0)?,
                    namespace: r.get(1)?,
                    name: r.get(2)?,
                    rev: r.get::<_, i64>(3)? as u64,
                    value: Bytes::from(r.get::<_, Vec<u8>>(4)?),
                })
            })
            .map_err(db_err)?;
        let objects = rows.collect::<Result<Vec<_>, _>>().map_err(db_err)?;
        let mut stmt = conn
            .prepare("SELECT rev, resource, namespace, name, kind, value, prev, prev_rev FROM events ORDER BY rev")
            .map_err(db_err)?;
        let rows = stmt
            .query_map([], |r| {
                let kind = match r.get::<_, i64>(4)? {
                    0 => EventKind::Added,
                    1 => EventKind::Modified,
                    _ => EventKind::Deleted,
                };
                Ok(Event {
                    rev: r.get::<_, i64>(0)? as u64,
                    resource: ResourceId(Arc::from(r.get::<_, String>(1)?.as_str())),
                    key: (r.get(2)?, r.get(3)?),
                    kind,
                    value: Bytes::from(r.get::<_, Vec<u8>>(5)?),
                    prev: r.get::<_, Option<Vec<u8>>>(6)?.map(Bytes::from),
                    prev_rev: r.get::<_, i64>(7)? as u64,
                })
            })
            .map_err(db_err)?;
        let mut history = rows.collect::<Result<Vec<_>, _>>().map_err(db_err)?;
        // Only a gap-free run ending at the newest revision can be resumed from.
        let contiguous_from = history.windows(2).rposition(|w| w[1].rev != w[0].rev + 1).map_or(0, |i| i + 1);
        history.drain(..contiguous_from);
        Ok(LoadedState { rev, objects, history, unreadable: Vec::new() })
    }

    fn persist(&self, batch: &[Arc<Event>]) -> Result<(), StorageError> {
        let Some(last) = batch.last() else {
            return Ok(());
        };
        let mut kept = self.kept.lock();
        let (trim, trim_to) = self.to_trim(&kept, batch);
        let mut conn = self.conn.lock();
        let tx = conn.transaction().map_err(db_err)?;
        {
            let mut put = tx
                .prepare_cached(
                    "INSERT INTO objects (resource, namespace, name, rev, value) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (resource, namespace, name) DO UPDATE SET rev = excluded.rev, value = excluded.value",
                )
                .map_err(db_err)?;
            let mut del = tx
                .prepare_cached("DELETE FROM objects WHERE resource = ?1 AND namespace = ?2 AND name = ?3")
                .map_err(db_err)?;
            let mut log = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO events (rev, resource, namespace, name, kind, value, prev, prev_rev)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .map_err(db_err)?;
            for e in batch {
                match e.kind {
                    EventKind::Added | EventKind::Modified => {
                        put.execute(params![e.resource.as_str(), e.key.0, e.key.1, e.rev as i64, &e.value[..]])
                            .map_err(db_err)?;
                    }
                    EventKind::Deleted => {
                        del.execute(params![e.resource.as_str(), e.key.0, e.key.1]).map_err(db_err)?;
                    }
                }
                log.execute(params![
                    e.rev as i64,
                    e.resource.as_str(),
                    e.key.0,
                    e.key.1,
                    kind_code(e.kind),
                    &e.value[..],
                    e.prev.as_deref(),
                    e.prev_rev as i64
                ])
                .map_err(db_err)?;
            }
            if let Some(upto) = trim_to {
                tx.execute("DELETE FROM events WHERE rev <= ?1", params![upto as i64]).map_err(db_err)?;
            }
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('revision', ?1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![last.rev as i64],
            )
            .map_err(db_err)?;
        }
        tx.commit().map_err(db_err)?;
        kept.advance(batch, trim);
        Ok(())
    }
}
