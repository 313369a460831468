//! The data directory of a durable server: created owner-only (0700, as kubeadm keeps
//! its PKI and etcd directories), locked by one server at a time (an exclusive lock on
//! `DATA_DIR/lock`, held while the server runs and released by the operating system if
//! it dies), and refused when it held a cluster whose database is now missing or empty,
//! instead of silently starting an empty cluster with resourceVersions back at one.
//! [`DataDir::holder`] tells other processes (`opkit cluster status`, `stop`) who holds it.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// Why a data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// Another server holds the directory.
    #[error(
        "a cluster is already running from {} ({holder}); stop it first, or use another data directory",
        dir.display()
    )]
    InUse {
        /// The directory.
        dir: PathBuf,
        /// Who holds it, as its lock file says: `pid N, URL`.
        holder: String,
    },
    /// The directory held a cluster (it has its token), but its database is gone.
    #[error(
        "the data directory {} held a cluster but its database {} is missing or empty; restore the database, or delete the directory to start a new cluster",
        dir.display(), database.display()
    )]
    MissingDatabase {
        /// The directory.
        dir: PathBuf,
        /// The database file.
        database: PathBuf,
    },
    /// A file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> DataDirError {
    move |source| DataDirError::Io { context, source }
}

/// The server holding a data directory, as its lock file records it (`pid N, URL`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The holder's process id (None while it has not recorded it yet).
    pub pid: Option<u32>,
    /// The URL it serves at (None until it listens).
    pub url: Option<String>,
    /// The lock file's text, as the holder wrote it.
    pub record: String,
}

impl Holder {
    /// Parses the lock file's text: `pid N` or `pid N, URL`.
    fn parse(record: &str) -> Holder {
        let record = record.trim();
        let (pid, url) = match record.split_once(", ") {
            Some((pid, url)) => (pid, Some(url.to_string())),
            None => (record, None),
        };
        let pid = pid.strip_prefix("pid ").and_then(|p| p.parse().ok());
        Holder { pid, url: url.filter(|_| pid.is_some()), record: record.to_string() }
    }
}

/// A data directory this server holds: the lock is released when it is dropped.
#[derive(Debug)]
pub struct DataDir {
    lock: File,
}

impl DataDir {
    /// Creates (owner-only) and locks `dir`; with a `database` file, refuses a directory
    /// that held a cluster (its `token` file exists) whose database is missing or empty.
    pub fn open(dir: &Path, database: Option<&Path>) -> Result<DataDir, DataDirError> {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        owner_only(dir, 0o700)?;
        let lock_path = dir.join("lock");
        let mut lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&lock_path)
            .map_err(io(format!("opening {}", lock_path.display())))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&lock_path).unwrap_or_default().trim().to_string();
                let holder = if holder.is_empty() { "another process".to_string() } else { holder };
                return Err(DataDirError::InUse { dir: dir.to_path_buf(), holder });
            }
            Err(TryLockError::Error(e)) => return Err(io(format!("locking {}", lock_path.display()))(e)),
        }
        record_holder(&mut lock, &format!("pid {}", std::process::id()))
            .map_err(io(format!("writing {}", lock_path.display())))?;
        if let Some(database) = database {
            let held_a_cluster = dir.join("token").exists();
            let empty = std::fs::metadata(database).map_or(true, |m| m.len() == 0);
            if held_a_cluster && empty {
                return Err(DataDirError::MissingDatabase { dir: dir.to_path_buf(), database: database.to_path_buf() });
            }
        }
        Ok(DataDir { lock })
    }

    /// The server holding `dir` now, or None when no server runs from it. The lock is
    /// probed without waiting (a shared lock taken and released at once), so this never
    /// blocks; a missing directory or lock file holds no server.
    pub fn holder(dir: &Path) -> Result<Option<Holder>, DataDirError> {
        let lock_path = dir.join("lock");
        let lock = match File::open(&lock_path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(format!("opening {}", lock_path.display()))(e)),
        };
        match lock.try_lock_shared() {
            Ok(()) => {
                lock.unlock().map_err(io(format!("unlocking {}", lock_path.display())))?;
                Ok(None)
            }
            Err(TryLockError::WouldBlock) => {
                let record =
                    std::fs::read_to_string(&lock_path).map_err(io(format!("reading {}", lock_path.display())))?;
                Ok(Some(Holder::parse(&record)))
            }
            Err(TryLockError::Error(e)) => Err(io(format!("probing {}", lock_path.display()))(e)),
        }
    }

    /// Records the URL the holder serves at in the lock file, for the message another
    /// server on this directory gives.
    pub fn record_url(&mut self, url: &str) -> Result<(), DataDirError> {
        let holder = format!("pid {}, {url}", std::process::id());
        record_holder(&mut self.lock, &holder).map_err(io("writing the data directory's lock file".into()))
    }
}

/// Replaces the lock file's text with `holder`.
fn record_holder(lock: &mut File, holder: &str) -> std::io::Result<()> {
    use std::io::{Seek, Write};
    lock.set_len(0)?;
    lock.seek(std::io::SeekFrom::Start(0))?;
    lock.write_all(holder.as_bytes())?;
    lock.flush()
}

/// Makes `path` readable by its owner only (`mode`), on Unix.
pub(crate) fn owner_only(path: &Path, mode: u32) -> Result<(), DataDirError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if path.exists() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .map_err(io(format!("restricting {}", path.display())))?;
        }
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_released_on_drop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = DataDir::open(dir.path(), None).expect("first holder");
        let second = DataDir::open(dir.path(), None);
        assert!(matches!(second, Err(DataDirError::InUse { .. })), "{second:?}");
        drop(first);
        DataDir::open(dir.path(), None).expect("free again");
    }

    #[test]
    fn the_holder_is_read_while_held_and_gone_when_released() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(DataDir::holder(dir.path()).expect("probe"), None, "no lock file: no holder");
        let mut held = DataDir::open(dir.path(), None).expect("held");
        let holder = DataDir::holder(dir.path()).expect("probe").expect("a holder");
        assert_eq!(holder.pid, Some(std::process::id()));
        assert_eq!(holder.url, None);
        held.record_url("https://127.0.0.1:6443").expect("url");
        let holder = DataDir::holder(dir.path()).expect("probe").expect("a holder");
        assert_eq!(holder.url.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(holder.record, format!("pid {}, https://127.0.0.1:6443", std::process::id()));
        drop(held);
        assert_eq!(DataDir::holder(dir.path()).expect("probe"), None, "released");
        DataDir::open(dir.path(), None).expect("the probe left the directory free");
    }

    #[test]
    fn a_cluster_without_its_database_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("state.db");
        DataDir::open(dir.path(), Some(&db)).expect("a fresh directory");
        std::fs::write(dir.path().join("token"), "t").expect("token");
        let refused = DataDir::open(dir.path(), Some(&db));
        assert!(matches!(refused, Err(DataDirError::MissingDatabase { .. })), "{refused:?}");
        std::fs::write(&db, "").expect("an empty database");
        assert!(DataDir::open(dir.path(), Some(&db)).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn the_directory_is_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let _held = DataDir::open(&data, None).expect("opened");
        let mode = std::fs::metadata(&data).expect("metadata").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
}
