//! Writing certificates, keys and kubeconfigs to disk: atomically (a temporary sibling,
//! synced, then renamed over the target, so a reader never sees half a file) and, for
//! secrets, readable by the owner only (0600 on Unix; elsewhere the platform default).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Who may read a file written by [`write_atomic`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileAccess {
    /// Owner only (0600): keys, tokens, kubeconfigs.
    Private,
    /// Everyone may read it (0644): certificates.
    Public,
}

/// Writes `data` to `path` atomically with `access`, creating the parent directory.
/// The error names the file that failed.
pub fn write_atomic(path: &Path, data: &[u8], access: FileAccess) -> Result<(), WriteError> {
    let failed = |p: &Path| {
        let path = p.to_path_buf();
        move |source| WriteError { path, source }
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(failed(parent))?;
    }
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(match access {
            FileAccess::Private => 0o600,
            FileAccess::Public => 0o644,
        });
    }
    #[cfg(not(unix))]
    let _ = access;
    let mut f = opts.open(&tmp).map_err(failed(&tmp))?;
    f.write_all(data).map_err(failed(&tmp))?;
    f.sync_all().map_err(failed(&tmp))?;
    fs::rename(&tmp, path).map_err(failed(path))
}

/// A file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("writing {}: {source}", path.display())]
pub struct WriteError {
    /// The file (or directory) that failed.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_atomically_with_the_requested_access() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = dir.path().join("sub/tls.key");
        write_atomic(&key, b"secret", FileAccess::Private).expect("write key");
        write_atomic(&key, b"rotated", FileAccess::Private).expect("overwrite key");
        assert_eq!(fs::read(&key).expect("read"), b"rotated");
        assert!(!dir.path().join("sub/tls.key.tmp").exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
            assert_eq!(mode(&key), 0o600);
            let crt = dir.path().join("tls.crt");
            write_atomic(&crt, b"cert", FileAccess::Public).expect("write cert");
            assert_eq!(mode(&crt), 0o644);
        }
    }

    #[test]
    fn names_the_file_that_failed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blocker = dir.path().join("file");
        fs::write(&blocker, b"x").expect("write");
        let err = write_atomic(&blocker.join("below"), b"x", FileAccess::Public).expect_err("parent is a file");
        assert!(err.to_string().contains("file"), "{err}");
    }
}
