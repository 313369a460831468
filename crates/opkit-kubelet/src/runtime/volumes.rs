//! A real pod's volumes, as the kubelet's volume plugins set them up: `secret` and
//! `configMap` volumes (their keys, or the `items` chosen, as files with `defaultMode`
//! or the item's `mode`; a missing source fails the mount unless `optional`),
//! `projected` volumes of secrets and ConfigMaps, `emptyDir` (a directory of the pod's
//! own) and `hostPath` (the host's path itself). Each lives in `<pod dir>/volumes/<name>`
//! and is refreshed while the pod runs, as the kubelet syncs Secret and ConfigMap
//! volumes, so a reissued certificate reaches the container. A pod's `fsGroup` owns its
//! volumes (hostPath excepted), as the kubelet's volume ownership does. The container's
//! `volumeMounts` are bound into its own mount namespace (`process.rs`).
//!
//! `downwardAPI` volumes, projected ServiceAccount tokens other than the automounted
//! one, and `subPath` mounts are not set up: the container starts without them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Container, KeyToPath, Pod, Secret, Volume};
use kube::api::Api;
use opkit_serve::files::{FileAccess, write_atomic};

/// The ServiceAccount mount the runtime makes itself (`identity.rs`).
const SERVICE_ACCOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// kube's default file mode of Secret and ConfigMap volumes (0644).
const DEFAULT_MODE: i32 = 0o644;

/// Why a volume could not be set up, in the kubelet's words (the text of a
/// `FailedMount` event: `MountVolume.SetUp failed for volume "NAME" : WHY`).
#[derive(Debug, thiserror::Error)]
#[error("MountVolume.SetUp failed for volume \"{volume}\" : {why}")]
pub(crate) struct VolumeError {
    /// The volume.
    pub volume: String,
    /// What failed.
    pub why: String,
}

/// A directory bound into a container's mount namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BindMount {
    /// The directory on the host.
    pub source: PathBuf,
    /// Where the container sees it.
    pub target: PathBuf,
    /// Whether it is mounted read-only.
    pub read_only: bool,
}

/// The directory of `volume` of the pod whose directory is `pod_dir`.
fn volume_dir(pod_dir: &Path, volume: &Volume) -> PathBuf {
    match volume.host_path.as_ref() {
        Some(host) => PathBuf::from(&host.path),
        None => pod_dir.join("volumes").join(&volume.name),
    }
}

/// The files of a Secret or ConfigMap volume: key → (content, mode).
type VolumeFiles = BTreeMap<String, (Vec<u8>, i32)>;

/// The files `items` (or every key) of `data` give, with `mode` by default.
fn select(
    volume: &str,
    source: &str,
    data: BTreeMap<String, Vec<u8>>,
    items: Option<&Vec<KeyToPath>>,
    mode: i32,
) -> Result<VolumeFiles, VolumeError> {
    let Some(items) = items else {
        return Ok(data.into_iter().map(|(k, v)| (k, (v, mode))).collect());
    };
    let mut files = VolumeFiles::new();
    for item in items {
        let Some(content) = data.get(&item.key) else {
            let why = format!("configmap or secret \"{source}\" has no key \"{}\"", item.key);
            return Err(VolumeError { volume: volume.to_string(), why });
        };
        files.insert(item.path.clone(), (content.clone(), item.mode.unwrap_or(mode)));
    }
    Ok(files)
}

/// Reads what a pod's volumes are made of.
struct Sources<'a> {
    client: &'a kube::Client,
    namespace: &'a str,
}

impl Sources<'_> {
    /// A Secret's data, None when it does not exist.
    async fn secret(&self, volume: &str, name: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>, VolumeError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), self.namespace);
        let got = api.get_opt(name).await.map_err(|e| VolumeError { volume: volume.into(), why: e.to_string() })?;
        Ok(got.map(|s| s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect()))
    }

    /// A ConfigMap's data and binary data, None when it does not exist.
    async fn config_map(&self, volume: &str, name: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>, VolumeError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), self.namespace);
        let got = api.get_opt(name).await.map_err(|e| VolumeError { volume: volume.into(), why: e.to_string() })?;
        Ok(got.map(|c| {
            let text = c.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.into_bytes()));
            text.chain(c.binary_data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0))).collect()
        }))
    }

    /// The files of `volume`; None for a volume whose content the runtime does not make
    /// (emptyDir, hostPath, or a kind it does not set up).
    async fn files(&self, volume: &Volume) -> Result<Option<VolumeFiles>, VolumeError> {
        let name = volume.name.as_str();
        let missing = |kind: &str, source: &str| VolumeError {
            volume: name.into(),
            why: format!("{kind} \"{source}\" not found"),
        };
        if let Some(s) = &volume.secret {
            let source = s.secret_name.clone().unwrap_or_default();
            let mode = s.default_mode.unwrap_or(DEFAULT_MODE);
            return match self.secret(name, &source).await? {
                Some(data) => select(name, &source, data, s.items.as_ref(), mode).map(Some),
                None if s.optional == Some(true) => Ok(Some(VolumeFiles::new())),
                None => Err(missing("secret", &source)),
            };
        }
        if let Some(c) = &volume.config_map {
            let source = c.name.clone();
            let mode = c.default_mode.unwrap_or(DEFAULT_MODE);
            return match self.config_map(name, &source).await? {
                Some(data) => select(name, &source, data, c.items.as_ref(), mode).map(Some),
                None if c.optional == Some(true) => Ok(Some(VolumeFiles::new())),
                None => Err(missing("configmap", &source)),
            };
        }
        if let Some(p) = &volume.projected {
            let mode = p.default_mode.unwrap_or(DEFAULT_MODE);
            let mut files = VolumeFiles::new();
            for source in p.sources.iter().flatten() {
                if let Some(s) = &source.secret {
                    match self.secret(name, &s.name).await? {
                        Some(data) => files.extend(select(name, &s.name, data, s.items.as_ref(), mode)?),
                        None if s.optional == Some(true) => {}
                        None => return Err(missing("secret", &s.name)),
                    }
                } else if let Some(c) = &source.config_map {
                    match self.config_map(name, &c.name).await? {
                        Some(data) => files.extend(select(name, &c.name, data, c.items.as_ref(), mode)?),
                        None if c.optional == Some(true) => {}
                        None => return Err(missing("configmap", &c.name)),
                    }
                }
            }
            return Ok(Some(files));
        }
        Ok(None)
    }
}

/// Writes `files` into `dir`, changing only what differs, and removes files no longer
/// there.
fn write_files(volume: &str, dir: &Path, files: &VolumeFiles) -> Result<(), VolumeError> {
    let failed = |e: &dyn std::fmt::Display| VolumeError { volume: volume.into(), why: e.to_string() };
    std::fs::create_dir_all(dir).map_err(|e| failed(&e))?;
    for (path, (content, mode)) in files {
        // Keys are validated by the API server; a path escaping the volume is refused.
        let relative = Path::new(path);
        if relative.is_absolute() || relative.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
            return Err(failed(&format!("invalid path {path:?}")));
        }
        let target = dir.join(relative);
        if std::fs::read(&target).ok().as_deref() != Some(content.as_slice()) {
            write_atomic(&target, content, FileAccess::Public).map_err(|e| failed(&e))?;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let permissions = std::fs::Permissions::from_mode((*mode as u32) & 0o777);
            std::fs::set_permissions(&target, permissions).map_err(|e| failed(&e))?;
        }
        #[cfg(not(unix))]
        let _ = mode;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_file() && !files.contains_key(&name) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    Ok(())
}

/// Sets up (or refreshes) every volume of `pod` under `pod_dir`.
pub(crate) async fn set_up(client: &kube::Client, pod: &Pod, pod_dir: &Path) -> Result<(), VolumeError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let sources = Sources { client, namespace: &namespace };
    for volume in pod.spec.as_ref().and_then(|s| s.volumes.as_ref()).into_iter().flatten() {
        let dir = volume_dir(pod_dir, volume);
        match sources.files(volume).await? {
            Some(files) => write_files(&volume.name, &dir, &files)?,
            None if volume.empty_dir.is_some() => {
                make_empty_dir(&dir).map_err(|e| VolumeError { volume: volume.name.clone(), why: e.to_string() })?
            }
            None => {}
        }
        if let Some(group) = fs_group(pod)
            && volume.host_path.is_none()
        {
            set_group(&dir, group, volume.empty_dir.is_some())
                .map_err(|e| VolumeError { volume: volume.name.clone(), why: e.to_string() })?;
        }
    }
    Ok(())
}

/// An emptyDir's directory: writable by every user (0777), as kube makes it, so a
/// container running as any user can use it.
fn make_empty_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))?;
    }
    Ok(())
}

/// The pod's `fsGroup`.
fn fs_group(pod: &Pod) -> Option<u32> {
    let group = pod.spec.as_ref()?.security_context.as_ref()?.fs_group?;
    u32::try_from(group).ok()
}

/// Gives the files of a volume to `group`, as the kubelet applies `fsGroup`: group
/// ownership, group read (and write, with the setgid bit on directories, when
/// `writable`).
#[cfg(unix)]
fn set_group(dir: &Path, group: u32, writable: bool) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(dir)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    std::os::unix::fs::lchown(dir, None, Some(group))?;
    let mode = meta.permissions().mode() & 0o7777;
    let wanted = match (meta.is_dir(), writable) {
        (true, true) => mode | 0o2070,
        (true, false) => mode | 0o050,
        (false, true) => mode | 0o060,
        (false, false) => mode | 0o040,
    };
    if wanted != mode {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(wanted))?;
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(dir)? {
            set_group(&entry?.path(), group, writable)?;
        }
    }
    Ok(())
}

/// Groups are Unix's.
#[cfg(not(unix))]
fn set_group(_dir: &Path, _group: u32, _writable: bool) -> std::io::Result<()> {
    Ok(())
}

/// The mounts of `container`: each `volumeMount` of a volume the runtime sets up, except
/// the ServiceAccount's (mounted by the runtime itself) and `subPath` mounts.
pub(crate) fn mounts(pod: &Pod, container: &Container, pod_dir: &Path) -> Vec<BindMount> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    let set_up = |v: &&Volume| {
        v.secret.is_some()
            || v.config_map.is_some()
            || v.projected.is_some()
            || v.empty_dir.is_some()
            || v.host_path.is_some()
    };
    let mut out = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        if mount.mount_path.trim_end_matches('/') == SERVICE_ACCOUNT_PATH
            || mount.sub_path.as_deref().is_some_and(|s| !s.is_empty())
            || mount.sub_path_expr.as_deref().is_some_and(|s| !s.is_empty())
        {
            continue;
        }
        let Some(volume) = volumes.into_iter().flatten().filter(set_up).find(|v| v.name == mount.name) else {
            continue;
        };
        // Secret, ConfigMap and projected volumes are always read-only, as in kube.
        let always_read_only = volume.secret.is_some() || volume.config_map.is_some() || volume.projected.is_some();
        out.push(BindMount {
            source: volume_dir(pod_dir, volume),
            target: PathBuf::from(&mount.mount_path),
            read_only: always_read_only || mount.read_only == Some(true),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "manager", "namespace": "system"},
            "spec": {
                "containers": [{"name": "manager", "volumeMounts": [
                    {"name": "cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs", "readOnly": true},
                    {"name": "scratch", "mountPath": "/scratch"},
                    {"name": "kube-api-access-x", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
                    {"name": "settings", "mountPath": "/etc/app/settings.yaml", "subPath": "settings.yaml"},
                ]}],
                "volumes": [
                    {"name": "cert", "secret": {"secretName": "webhook-server-cert", "defaultMode": 420}},
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "kube-api-access-x", "projected": {"sources": []}},
                    {"name": "settings", "configMap": {"name": "settings"}},
                ],
            },
        }))
        .expect("a pod")
    }

    #[test]
    fn mounts_skip_the_service_account_and_sub_paths_and_secrets_are_read_only() {
        let pod = pod();
        let container = &pod.spec.as_ref().expect("spec").containers[0];
        let mounts = mounts(&pod, container, Path::new("/pods/p"));
        assert_eq!(
            mounts,
            vec![
                BindMount {
                    source: PathBuf::from("/pods/p/volumes/cert"),
                    target: PathBuf::from("/tmp/k8s-webhook-server/serving-certs"),
                    read_only: true,
                },
                BindMount {
                    source: PathBuf::from("/pods/p/volumes/scratch"),
                    target: PathBuf::from("/scratch"),
                    read_only: false,
                },
            ]
        );
    }

    #[test]
    fn items_pick_keys_and_modes_and_a_missing_key_says_which() {
        let data = BTreeMap::from([("tls.crt".to_string(), b"C".to_vec()), ("tls.key".to_string(), b"K".to_vec())]);
        let items = vec![KeyToPath { key: "tls.crt".into(), path: "cert.pem".into(), mode: Some(0o600) }];
        let files = select("cert", "s", data.clone(), Some(&items), DEFAULT_MODE).expect("selected");
        assert_eq!(files, VolumeFiles::from([("cert.pem".to_string(), (b"C".to_vec(), 0o600))]));
        let all = select("cert", "s", data.clone(), None, DEFAULT_MODE).expect("all");
        assert_eq!(all.len(), 2);
        let missing = vec![KeyToPath { key: "ca.crt".into(), path: "ca.crt".into(), mode: None }];
        let err = select("cert", "s", data, Some(&missing), DEFAULT_MODE).expect_err("no such key");
        assert!(err.to_string().contains("MountVolume.SetUp failed for volume \"cert\""), "{err}");
    }

    #[test]
    fn files_are_rewritten_only_when_they_change_and_stale_ones_go() {
        let dir = tempfile::tempdir().expect("tmp");
        let files =
            VolumeFiles::from([("a".to_string(), (b"1".to_vec(), 0o644)), ("b".to_string(), (b"2".to_vec(), 0o644))]);
        write_files("v", dir.path(), &files).expect("written");
        let fewer = VolumeFiles::from([("a".to_string(), (b"3".to_vec(), 0o644))]);
        write_files("v", dir.path(), &fewer).expect("rewritten");
        assert_eq!(std::fs::read(dir.path().join("a")).expect("a"), b"3");
        assert!(!dir.path().join("b").exists());
        let escaping = VolumeFiles::from([("../x".to_string(), (b"1".to_vec(), 0o644))]);
        assert!(write_files("v", dir.path(), &escaping).is_err());
    }
}
