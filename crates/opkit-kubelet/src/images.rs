//! The local cluster's image store: local executables registered as the entrypoint of an
//! image reference (`opkit cluster load IMAGE --binary PATH`, as `kind load
//! docker-image` loads an image). The kubelet runs a pod's container as a real process
//! when its image is loaded here or is one of the [`builtin`] images (a loaded reference
//! wins over a built-in one); other pods stay simulated.
//!
//! An image may also carry files (`--file SOURCE:TARGET`, as a Dockerfile's `COPY`): a
//! Helm operator's `watches.yaml` and charts at `/opt/helm`, say. A contained container
//! of the image sees each bound at its target, read-only ([`ImageTree`]).
//!
//! Layout, under the cluster's data directory (`<data-dir>/images`):
//! - `blobs/sha256-<hex>`: each loaded binary, copied, executable;
//! - `files/sha256-<hex>/`: each loaded file tree, as the image's root holds it (the
//!   digest of its paths and contents names it);
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
    /// A file to put in the image cannot be.
    #[error("--file {spec:?}: {reason}")]
    InvalidFile {
        /// The `SOURCE:TARGET` as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
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
    /// The directory under `files/` holding the image's files, when it carries any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<String>,
    /// Where in the image each of its files (or directories) is, as loaded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub file_targets: Vec<String>,
}

/// A loaded image's files: the tree they were copied into, and the paths in the image
/// that hold them (each bound there, read-only, in a contained root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageTree {
    /// The tree, laid out as the image's root (`<root>/opt/helm/watches.yaml`).
    pub root: PathBuf,
    /// The absolute paths in the image of the files and directories loaded.
    pub targets: Vec<PathBuf>,
}

/// Where no image file may go: the container root's system directories, bound from the
/// host, and what the kubelet puts there itself (the ServiceAccount under `/var/run`,
/// `/entrypoint`, `/opkit`).
const RESERVED_TARGETS: [&str; 14] = [
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/bin",
    "/sbin",
    "/etc",
    "/proc",
    "/dev",
    "/sys",
    "/var/run",
    "/run",
    "/entrypoint",
    "/opkit",
];

/// A file or directory put in a loaded image at an absolute path (`SOURCE:TARGET`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFile {
    /// The file or directory on this machine.
    pub source: PathBuf,
    /// Where the image holds it.
    pub target: PathBuf,
}

impl ImageFile {
    /// Parses `SOURCE:TARGET`: an existing file or directory, and an absolute path
    /// outside the root's system directories (`/usr`, `/etc`, `/proc`, …).
    pub fn parse(spec: &str) -> Result<ImageFile, ImageError> {
        let invalid = |reason: &str| ImageError::InvalidFile { spec: spec.to_string(), reason: reason.to_string() };
        let (source, target) = spec.rsplit_once(':').ok_or_else(|| invalid("expected SOURCE:TARGET"))?;
        let (source, target) = (PathBuf::from(source), PathBuf::from(target));
        if !source.exists() {
            return Err(invalid("the source does not exist"));
        }
        let normal = target.components().skip(1).all(|c| matches!(c, std::path::Component::Normal(_)));
        if !target.is_absolute() || !normal || target.components().count() < 2 {
            return Err(invalid("the target must be an absolute path below /, without `..`"));
        }
        if RESERVED_TARGETS.iter().any(|r| target.starts_with(r)) {
            return Err(invalid(&format!("the target may not be under {}", RESERVED_TARGETS.join(", "))));
        }
        Ok(ImageFile { source, target })
    }
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
        self.load_with_files(reference, binary, &[])
    }

    /// As [`ImageStore::load`], with `files` in the image at their targets.
    pub fn load_with_files(
        &self,
        reference: &str,
        binary: &Path,
        files: &[ImageFile],
    ) -> Result<LoadedImage, ImageError> {
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
        let file_targets = files.iter().map(|f| f.target.display().to_string()).collect();
        let files = match files {
            [] => None,
            files => Some(self.store_files(files)?),
        };
        let image = LoadedImage {
            reference: reference.clone(),
            digest: format!("sha256:{digest}"),
            size,
            loaded_at: jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            blob,
            files,
            file_targets,
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

    /// The executable and the files (when it carries any) of `reference`, if that image
    /// is loaded.
    pub fn contents(&self, reference: &str) -> Result<Option<(PathBuf, Option<ImageTree>)>, ImageError> {
        Ok(self.get(reference)?.map(|image| {
            let targets = image.file_targets.iter().map(PathBuf::from).collect();
            let files = image.files.map(|f| ImageTree { root: self.dir.join("files").join(f), targets });
            (self.dir.join("blobs").join(image.blob), files)
        }))
    }

    /// Copies `files` into a new tree under `files/`, named by its digest (an identical
    /// tree already there is reused); its directory name.
    fn store_files(&self, files: &[ImageFile]) -> Result<String, ImageError> {
        let root = self.dir.join("files");
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ImageError::Io { path, source }
        };
        let incoming = root.join(format!(".incoming-{}-{}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&incoming).map_err(io(&incoming))?;
        let copied = files.iter().try_for_each(|f| {
            let target = incoming.join(f.target.strip_prefix("/").unwrap_or(&f.target));
            copy_tree(&f.source, &target).map_err(io(&f.source))
        });
        let digest = copied.and_then(|()| tree_digest(&incoming).map_err(io(&incoming)));
        let name = match digest {
            Ok(digest) => format!("sha256-{digest}"),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&incoming);
                return Err(e);
            }
        };
        let target = root.join(&name);
        if target.is_dir() {
            std::fs::remove_dir_all(&incoming).map_err(io(&incoming))?;
        } else {
            std::fs::rename(&incoming, &target).map_err(io(&target))?;
        }
        Ok(name)
    }
}

/// Copies the file or directory `from` to `to` (regular files and directories; modes
/// kept, links followed), making `to`'s parents.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if from.is_dir() {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else {
        std::fs::copy(from, to).map(|_| ())
    }
}

/// The hex SHA-256 of a tree: its relative paths in order, each file's mode bits and
/// contents.
fn tree_digest(root: &Path) -> std::io::Result<String> {
    fn walk(root: &Path, dir: &Path, ctx: &mut ring::digest::Context) -> std::io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
            ctx.update(relative.as_bytes());
            ctx.update(&[0]);
            if path.is_dir() {
                ctx.update(b"d");
                walk(root, &path, ctx)?;
            } else {
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    ctx.update(&entry.metadata()?.permissions().mode().to_le_bytes());
                }
                ctx.update(&std::fs::read(&path)?);
            }
        }
        Ok(())
    }
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    walk(root, root, &mut ctx)?;
    Ok(ctx.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect())
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

    #[test]
    fn files_are_copied_into_the_image_and_bad_targets_refused() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile_dir()?;
        let bin = dir.join("manager");
        std::fs::write(&bin, b"#!/bin/sh\n")?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))?;
        }
        std::fs::create_dir_all(dir.join("charts/web/templates"))?;
        std::fs::write(dir.join("charts/web/Chart.yaml"), b"name: web\n")?;
        std::fs::write(dir.join("watches.yaml"), b"- kind: Web\n")?;
        let files = [
            ImageFile::parse(&format!("{}:/opt/helm/watches.yaml", dir.join("watches.yaml").display()))?,
            ImageFile::parse(&format!("{}:/opt/helm/helm-charts", dir.join("charts").display()))?,
        ];
        let store = ImageStore::new(dir.join("images"));
        let loaded = store.load_with_files("example.com/op:v1", &bin, &files)?;
        let (_, tree) = store.contents("example.com/op:v1")?.ok_or("not loaded")?;
        let tree = tree.ok_or("no files")?;
        assert_eq!(tree.targets, [PathBuf::from("/opt/helm/watches.yaml"), PathBuf::from("/opt/helm/helm-charts")]);
        assert_eq!(std::fs::read(tree.root.join("opt/helm/watches.yaml"))?, b"- kind: Web\n");
        assert_eq!(std::fs::read(tree.root.join("opt/helm/helm-charts/web/Chart.yaml"))?, b"name: web\n");
        // The same files again: the same tree; a change: another one.
        assert_eq!(store.load_with_files("example.com/op:v2", &bin, &files)?.files, loaded.files);
        std::fs::write(dir.join("watches.yaml"), b"- kind: Other\n")?;
        assert_ne!(store.load_with_files("example.com/op:v3", &bin, &files)?.files, loaded.files);
        assert_eq!(store.contents("example.com/plain:v1")?, None);
        let refused = |spec: &str| ImageFile::parse(spec).is_err();
        let source = dir.join("watches.yaml").display().to_string();
        assert!(refused(&format!("{source}:/usr/share/x")) && refused(&format!("{source}:/etc/x")));
        assert!(refused(&format!("{source}:/var/run/secrets/x")) && refused(&format!("{source}:/run/x")));
        assert!(ImageFile::parse(&format!("{source}:/var/lib/app/x")).is_ok());
        assert!(refused(&format!("{source}:relative")) && refused(&format!("{source}:/opt/../usr")));
        assert!(refused(&format!("{source}:/")) && refused("/no/such/file:/opt/x") && refused("no-colon"));
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    fn tempfile_dir() -> std::io::Result<PathBuf> {
        let dir = std::env::temp_dir().join(format!("opkit-images-{}-{}", std::process::id(), rand::random::<u64>()));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}
