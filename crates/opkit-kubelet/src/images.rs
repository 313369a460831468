//! The local cluster's image store: local executables registered as the entrypoint of an
//! image reference (`opkit cluster load IMAGE --binary PATH`, as `kind load
//! docker-image` loads an image). The kubelet runs a pod's container as a real process
//! when its image is loaded here or is one of the [`builtin`] images (a loaded reference
//! wins over a built-in one); other pods stay simulated.
//!
//! Layout, under the cluster's data directory (`<data-dir>/images`):
//! - `blobs/sha256-<hex>`: each loaded binary, copied, executable;
//! - `index.json`: image reference (normalized as Docker does) → blob, digest, size and
//!   load time, rewritten atomically on every load.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod builtin;

/// Errors of the image store.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The reference is not a valid image reference.
    #[error("invalid image reference {reference:?}: {reason}")]
    InvalidReference {
        /// The reference as given.
        reference: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The binary to load cannot be used.
    #[error("{path}: {reason}")]
    InvalidBinary {
        /// The binary's path.
        path: PathBuf,
        /// Why it cannot be loaded.
        reason: String,
    },
    /// Reading or writing the store failed.
    #[error("image store {path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// `index.json` is not readable.
    #[error("image store index {path} is corrupt: {reason}")]
    CorruptIndex {
        /// The index file.
        path: PathBuf,
        /// The decoding error.
        reason: String,
    },
}

/// One loaded image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadedImage {
    /// The normalized reference (`docker.io/library/busybox:latest`).
    pub reference: String,
    /// `sha256:<hex>` of the binary.
    pub digest: String,
    /// The binary's size in bytes.
    pub size: u64,
    /// When it was loaded (RFC 3339).
    pub loaded_at: String,
    /// The blob's file name under `blobs/`.
    pub blob: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    images: BTreeMap<String, LoadedImage>,
}

/// The image store in one directory.
#[derive(Debug, Clone)]
pub struct ImageStore {
    dir: PathBuf,
}

impl ImageStore {
    /// The store in `dir` (made on the first load).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ImageStore { dir: dir.into() }
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn index_path(&self) -> PathBuf {
        self.dir.join("index.json")
    }

    fn read_index(&self) -> Result<Index, ImageError> {
        let path = self.index_path();
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| ImageError::CorruptIndex { path: path.clone(), reason: e.to_string() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Index::default()),
            Err(source) => Err(ImageError::Io { path, source }),
        }
    }

    /// Registers the executable `binary` as the entrypoint of `reference`, replacing what
    /// was loaded under that reference before.
    pub fn load(&self, reference: &str, binary: &Path) -> Result<LoadedImage, ImageError> {
        let reference = normalize(reference)?;
        let invalid = |reason: String| ImageError::InvalidBinary { path: binary.to_path_buf(), reason };
        let meta = std::fs::metadata(binary).map_err(|e| invalid(e.to_string()))?;
        if !meta.is_file() {
            return Err(invalid("not a regular file".into()));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            if meta.permissions().mode() & 0o111 == 0 {
                return Err(invalid("not executable".into()));
            }
        }
        let blobs = self.dir.join("blobs");
        std::fs::create_dir_all(&blobs).map_err(|source| ImageError::Io { path: blobs.clone(), source })?;
        // Copy to a temporary name while hashing, then rename: a half-copied blob is never
        // visible under its digest.
        let tmp = blobs.join(format!(".incoming-{}", std::process::id()));
        let (digest, size) =
            copy_hashing(binary, &tmp).map_err(|source| ImageError::Io { path: tmp.clone(), source })?;
        let blob = format!("sha256-{digest}");
        let target = blobs.join(&blob);
        std::fs::rename(&tmp, &target).map_err(|source| ImageError::Io { path: target.clone(), source })?;
        let image = LoadedImage {
            reference: reference.clone(),
            digest: format!("sha256:{digest}"),
            size,
            loaded_at: jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            blob,
        };
        let mut index = self.read_index()?;
        index.images.insert(reference, image.clone());
        let bytes = serde_json::to_vec_pretty(&index)
            .map_err(|e| ImageError::CorruptIndex { path: self.index_path(), reason: e.to_string() })?;
        let path = self.index_path();
        opkit_serve::files::write_atomic(&path, &bytes, opkit_serve::files::FileAccess::Public)
            .map_err(|e| ImageError::Io { path: path.clone(), source: std::io::Error::other(e.to_string()) })?;
        Ok(image)
    }

    /// Every loaded image, by reference.
    pub fn list(&self) -> Result<Vec<LoadedImage>, ImageError> {
        Ok(self.read_index()?.images.into_values().collect())
    }

    /// The loaded image `reference` names (normalized first), if any.
    pub fn get(&self, reference: &str) -> Result<Option<LoadedImage>, ImageError> {
        let reference = normalize(reference)?;
        Ok(self.read_index()?.images.remove(&reference))
    }

    /// The executable to run for `reference`, if that image is loaded.
    pub fn entrypoint(&self, reference: &str) -> Result<Option<PathBuf>, ImageError> {
        Ok(self.get(reference)?.map(|image| self.dir.join("blobs").join(image.blob)))
    }
}

/// Copies `from` to `to` (mode 0755), returning the hex SHA-256 and the size.
fn copy_hashing(from: &Path, to: &Path) -> std::io::Result<(String, u64)> {
    use std::io::Write;
    let mut input = std::fs::File::open(from)?;
    let mut output = std::fs::File::create(to)?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = input.read(&mut buf)?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
        output.write_all(&buf[..n])?;
        size += n as u64;
    }
    output.sync_all()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))?;
    }
    let hex: String = ctx.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect();
    Ok((hex, size))
}

/// Normalizes an image reference as Docker (and so the kubelet) does: a reference
/// without a registry is on `docker.io`, a one-part Docker Hub name is under `library/`,
/// and a reference without tag or digest is `:latest`.
pub fn normalize(reference: &str) -> Result<String, ImageError> {
    let invalid = |reason| ImageError::InvalidReference { reference: reference.to_string(), reason };
    if reference.is_empty() {
        return Err(invalid("it is empty"));
    }
    if reference.chars().any(|c| c.is_whitespace() || c.is_ascii_uppercase() && !reference.contains('@')) {
        // Docker refuses upper case in repository names (tags may have it, checked below).
        let (name, _) = split_tag(reference);
        if name.chars().any(|c| c.is_whitespace() || c.is_ascii_uppercase()) {
            return Err(invalid("repository names must be lowercase, without spaces"));
        }
    }
    let (name, suffix) = split_tag(reference);
    if name.is_empty() || name.starts_with('/') || name.ends_with('/') || name.contains("//") {
        return Err(invalid("the repository name is malformed"));
    }
    if suffix.as_deref() == Some(":") || suffix.as_deref() == Some("@") {
        return Err(invalid("the tag or digest is empty"));
    }
    let (domain, path) = match name.split_once('/') {
        Some((first, rest)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            (first.to_string(), rest.to_string())
        }
        _ => ("docker.io".to_string(), name.to_string()),
    };
    let path = if domain == "docker.io" && !path.contains('/') { format!("library/{path}") } else { path };
    Ok(format!("{domain}/{path}{}", suffix.unwrap_or_else(|| ":latest".to_string())))
}

/// Splits `name[:tag][@digest]` into the name and the `:tag`/`@digest` suffix.
fn split_tag(reference: &str) -> (&str, Option<String>) {
    if let Some(at) = reference.find('@') {
        return (&reference[..at], Some(reference[at..].to_string()));
    }
    let last_slash = reference.rfind('/').map_or(0, |i| i + 1);
    match reference[last_slash..].rfind(':') {
        Some(colon) => {
            let colon = last_slash + colon;
            (&reference[..colon], Some(reference[colon..].to_string()))
        }
        None => (reference, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_normalize_as_docker_does() {
        let n = |r: &str| normalize(r).unwrap_or_else(|e| e.to_string());
        assert_eq!(n("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(n("bitnami/redis:7"), "docker.io/bitnami/redis:7");
        assert_eq!(n("example.com/memcached-operator:v0.0.1"), "example.com/memcached-operator:v0.0.1");
        assert_eq!(n("localhost:5000/op"), "localhost:5000/op:latest");
        assert_eq!(n("quay.io/a/b@sha256:abc"), "quay.io/a/b@sha256:abc");
        assert!(normalize("").is_err());
        assert!(normalize("Upper/Case").is_err());
        assert!(normalize("a//b").is_err());
        assert!(normalize("a:").is_err());
    }

    #[test]
    fn loads_list_and_resolve_survive_a_new_store() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile_dir()?;
        let bin = dir.join("manager");
        std::fs::write(&bin, b"#!/bin/sh\necho hi\n")?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))?;
        }
        let store = ImageStore::new(dir.join("images"));
        let loaded = store.load("example.com/op:v1", &bin)?;
        assert!(loaded.digest.starts_with("sha256:"));
        let again = ImageStore::new(dir.join("images"));
        assert_eq!(again.list()?, vec![loaded.clone()]);
        let entry = again.entrypoint("example.com/op:v1")?.ok_or("not loaded")?;
        assert_eq!(std::fs::read(entry)?, b"#!/bin/sh\necho hi\n");
        assert_eq!(again.entrypoint("example.com/op:v2")?, None);
        std::fs::write(dir.join("plain"), b"x")?;
        assert!(matches!(store.load("x", &dir.join("plain")), Err(ImageError::InvalidBinary { .. })));
        assert!(matches!(store.load("x", &dir.join("missing")), Err(ImageError::InvalidBinary { .. })));
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    fn tempfile_dir() -> std::io::Result<PathBuf> {
        let dir = std::env::temp_dir().join(format!("opkit-images-{}-{}", std::process::id(), rand::random::<u64>()));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}
