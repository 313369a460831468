//! The persistence trait behind the store, and what a backend hands it at start-up.

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

/// An object a backend holds but could not read (e.g. encrypted with a key the server no
/// longer has). The store answers reads of it with [`StorageError::Unreadable`].
#[derive(Debug, Clone)]
pub struct UnreadableObject {
    /// `group/resource`.
    pub resource: String,
    /// Namespace ("" for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Why it could not be read.
    pub reason: String,
}

/// Everything a backend holds: the latest state and the newest revision ever written.
#[derive(Debug, Default, Clone)]
pub struct LoadedState {
    /// The newest revision written (deletions included).
    pub rev: Revision,
    /// Every live object.
    pub objects: Vec<LoadedObject>,
    /// The persisted window of recent events, oldest first, one per revision up to
    /// `rev` (empty when the backend keeps none).
    pub history: Vec<Event>,
    /// Objects that could not be read.
    pub unreadable: Vec<UnreadableObject>,
}

/// Durable persistence for a [`super::Store`]. The store keeps everything in memory and
/// hands the backend batches of committed events; `persist` must return only once the
/// batch is durable. Implemented by [`super::SqliteBackend`], and by
/// [`super::EncryptingBackend`] around another backend; an etcd backend is planned.
pub trait Backend: Send + 'static {
    /// Reads the whole persisted state at start-up.
    fn load(&self) -> Result<LoadedState, StorageError>;
    /// Durably applies a batch of events, in order, atomically. After a failure the store
    /// calls it again with the same batch, so a failed call must leave nothing applied.
    fn persist(&self, batch: &[Arc<Event>]) -> Result<(), StorageError>;
}
