//! The durable embedded backend: SQLite in WAL mode with `synchronous=FULL`, as k3s's
//! kine does. The store's commit thread calls [`Backend::persist`] with whole batches, so
//! each fsync covers every write that arrived meanwhile (group commit).

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use rusqlite::{Connection, params};

use super::{Backend, Event, EventKind, LoadedObject, LoadedState, StorageError};

/// Persists objects in a SQLite database file.
pub struct SqliteBackend {
    conn: Mutex<Connection>,
}

fn db_err(e: rusqlite::Error) -> StorageError {
    StorageError::Backend(e.to_string())
}

impl SqliteBackend {
    /// Opens (or creates) the database at `path`.
    pub fn open(path: &Path) -> Result<SqliteBackend, StorageError> {
        let conn = Connection::open(path).map_err(db_err)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=FULL;
             CREATE TABLE IF NOT EXISTS objects (
                 resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
                 rev INTEGER NOT NULL, value BLOB NOT NULL,
                 PRIMARY KEY (resource, namespace, name)) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);",
        )
        .map_err(db_err)?;
        Ok(SqliteBackend { conn: Mutex::new(conn) })
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
        Ok(LoadedState { rev, objects })
    }

    fn persist(&self, batch: &[Arc<Event>]) -> Result<(), StorageError> {
        let Some(last) = batch.last() else {
            return Ok(());
        };
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
            }
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('revision', ?1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![last.rev as i64],
            )
            .map_err(db_err)?;
        }
        tx.commit().map_err(db_err)
    }
}
