//! The persistence trait behind the store, and the in-memory implementation.

use std::sync::Arc;

use bytes::Bytes;

use super::{Event, Revision, StorageError};

/// One object as loaded from a backend at start-up.
#[derive(Debug, Clone)]
pub struct LoadedObject {
    /// `group/resource`, as in [`super::ResourceId`].
    pub resource: String,
    /// Namespace ("" for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The revision of the object's last write.
    pub rev: Revision,
    /// The object's JSON.
    pub value: Bytes,
}

/// Everything a backend holds: the latest state and the newest revision ever written.
#[derive(Debug, Default, Clone)]
pub struct LoadedState {
    /// The newest revision written (deletions included).
    pub rev: Revision,
    /// Every live object.
    pub objects: Vec<LoadedObject>,
}

/// Durable persistence for a [`super::Store`]. The store keeps everything in memory and
/// hands the backend batches of committed events; `persist` must return only once the
/// batch is durable. Implemented by [`super::SqliteBackend`]; an etcd backend is planned.
pub trait Backend: Send + 'static {
    /// Reads the whole persisted state at start-up.
    fn load(&self) -> Result<LoadedState, StorageError>;
    /// Durably applies a batch of events, in order, atomically.
    fn persist(&self, batch: &[Arc<Event>]) -> Result<(), StorageError>;
}
