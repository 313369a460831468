//! Releases stored as Helm stores them: one Secret per revision,
//! `sh.helm.release.v1.<name>.v<revision>` of type `helm.sh/release.v1`, labelled
//! `owner=helm`, `name`, `status` and `version`, whose `release` key holds
//! base64(gzip(JSON of Helm's `release.Release`)), so `helm list` and `helm history` read
//! them. A revision is stored `pending-install` / `pending-upgrade` before its hooks and
//! objects are created and rewritten `deployed` or `failed` once they are, as Helm's
//! install and upgrade actions store it ([`Release::pending`], [`Release::mark_deployed`]).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::OperatorError;

/// The Secret type Helm's storage driver writes.
pub(crate) const RELEASE_SECRET_TYPE: &str = "helm.sh/release.v1";

/// The status of a revision whose install is under way.
pub(crate) const STATUS_PENDING_INSTALL: &str = "pending-install";
/// The status of a revision whose upgrade is under way.
pub(crate) const STATUS_PENDING_UPGRADE: &str = "pending-upgrade";
/// The status of a revision whose rollback is under way.
pub(crate) const STATUS_PENDING_ROLLBACK: &str = "pending-rollback";
/// The status of the revision in use.
pub(crate) const STATUS_DEPLOYED: &str = "deployed";

/// Go's zero `time.Time`, as Helm's JSON carries an unset `deleted`.
const GO_ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// Helm's `release.Info`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReleaseInfo {
    /// When the first revision was deployed (RFC 3339).
    pub first_deployed: String,
    /// When this revision was deployed.
    pub last_deployed: String,
    /// When it was deleted (Go's zero time if not).
    pub deleted: String,
    /// `Install complete`, `Upgrade complete`, `Uninstallation complete`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `deployed`, `superseded`, `failed`, `uninstalled`...
    pub status: String,
    /// The rendered `NOTES.txt`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub notes: String,
}

/// Helm's `release.Release` (the fields Helm's commands read).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Release {
    /// The release name (the custom resource's name).
    pub name: String,
    /// Status and times.
    pub info: ReleaseInfo,
    /// Helm's `chart.Chart`: metadata, templates, values, schema, files.
    pub chart: Value,
    /// The values given (the custom resource's spec with override values).
    #[serde(default)]
    pub config: Value,
    /// The rendered manifest, hooks excluded.
    #[serde(default)]
    pub manifest: String,
    /// The hooks, as Helm's `release.Hook`s (`name`, `kind`, `path`, `manifest`, `events`,
    /// `last_run`, `weight`, `delete_policies`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<Value>,
    /// The revision.
    pub version: i64,
    /// The release namespace.
    pub namespace: String,
}

impl Release {
    /// A new revision, deployed now.
    pub fn deployed(
        name: &str,
        namespace: &str,
        version: i64,
        first_deployed: Option<String>,
        chart: Value,
        config: Value,
        manifest: String,
    ) -> Release {
        let mut release = Release::pending(name, namespace, version, first_deployed, chart, config, manifest);
        release.mark_deployed();
        release
    }

    /// A new revision as Helm stores it before running its hooks and creating its
    /// objects: revision 1 `pending-install` ("Initial install underway"), a later one
    /// `pending-upgrade` ("Preparing upgrade").
    pub fn pending(
        name: &str,
        namespace: &str,
        version: i64,
        first_deployed: Option<String>,
        chart: Value,
        config: Value,
        manifest: String,
    ) -> Release {
        let now = jiff::Timestamp::now().to_string();
        let (status, description) = if version == 1 {
            (STATUS_PENDING_INSTALL, "Initial install underway")
        } else {
            (STATUS_PENDING_UPGRADE, "Preparing upgrade")
        };
        Release {
            name: name.to_string(),
            info: ReleaseInfo {
                first_deployed: first_deployed.unwrap_or_else(|| now.clone()),
                last_deployed: now,
                deleted: GO_ZERO_TIME.to_string(),
                description: description.to_string(),
                status: status.to_string(),
                notes: String::new(),
            },
            chart,
            config,
            manifest,
            hooks: Vec::new(),
            version,
            namespace: namespace.to_string(),
        }
    }

    /// The revision's install or upgrade completed: `deployed`, "Install complete" or
    /// "Upgrade complete".
    pub fn mark_deployed(&mut self) {
        self.info.status = STATUS_DEPLOYED.to_string();
        self.info.description = if self.version == 1 { "Install complete" } else { "Upgrade complete" }.to_string();
    }

    /// Whether an install, upgrade or rollback of this revision is under way (Helm's
    /// `Status.IsPending`); found at the start of a reconcile, it was left by an operator
    /// stopped in the middle.
    pub fn is_pending(&self) -> bool {
        [STATUS_PENDING_INSTALL, STATUS_PENDING_UPGRADE, STATUS_PENDING_ROLLBACK].contains(&self.info.status.as_str())
    }

    /// The Secret's name: `sh.helm.release.v1.<name>.v<revision>`.
    pub fn secret_name(&self) -> String {
        format!("sh.helm.release.v1.{}.v{}", self.name, self.version)
    }

    /// The Secret Helm's storage driver would write for this revision.
    pub fn to_secret(&self) -> Result<Secret, OperatorError> {
        let failed = |message: String| OperatorError::Release { name: self.secret_name(), message };
        let json = serde_json::to_vec(self).map_err(|e| failed(e.to_string()))?;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&json).map_err(|e| failed(e.to_string()))?;
        let zipped = gz.finish().map_err(|e| failed(e.to_string()))?;
        let labels = BTreeMap::from([
            ("name".to_string(), self.name.clone()),
            ("owner".to_string(), "helm".to_string()),
            ("status".to_string(), self.info.status.clone()),
            ("version".to_string(), self.version.to_string()),
        ]);
        Ok(Secret {
            metadata: ObjectMeta {
                name: Some(self.secret_name()),
                namespace: Some(self.namespace.clone()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            type_: Some(RELEASE_SECRET_TYPE.to_string()),
            data: Some(BTreeMap::from([("release".to_string(), ByteString(STANDARD.encode(zipped).into_bytes()))])),
            ..Secret::default()
        })
    }

    /// Reads a release from Helm's Secret.
    pub fn from_secret(secret: &Secret) -> Result<Release, OperatorError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let failed = |message: String| OperatorError::Release { name: name.clone(), message };
        let data = secret
            .data
            .as_ref()
            .and_then(|d| d.get("release"))
            .ok_or_else(|| failed("the secret has no release key".into()))?;
        let bytes = STANDARD.decode(&data.0).map_err(|e| failed(format!("not base64: {e}")))?;
        let json = if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(bytes.as_slice())
                .read_to_end(&mut out)
                .map_err(|e| failed(format!("not gzip: {e}")))?;
            out
        } else {
            bytes
        };
        serde_json::from_slice(&json).map_err(|e| failed(format!("not a release: {e}")))
    }
}

/// Helm's `chart.Chart` as JSON for the chart in `dir`: `Chart.yaml` as metadata, the
/// templates and other files (base64, as Go encodes bytes), `values.yaml` and the schema.
pub(crate) fn chart_json(chart: &opkit_helm::chart::Chart, dir: &Path) -> Value {
    let file = |name: &str, data: &[u8]| serde_json::json!({ "name": name, "data": STANDARD.encode(data) });
    let values: Value = std::fs::read_to_string(dir.join("values.yaml"))
        .ok()
        .and_then(|text| serde_saphyr::from_str(&text).ok())
        .unwrap_or(Value::Null);
    let schema = chart.schema.as_ref().map(|s| Value::String(STANDARD.encode(s.to_string())));
    serde_json::json!({
        "metadata": chart.metadata,
        "lock": null,
        "templates": chart.templates.iter().map(|(name, data)| file(name, data.as_bytes())).collect::<Vec<_>>(),
        "values": if values.is_object() { values } else { serde_json::json!({}) },
        "schema": schema,
        "files": chart.files.iter().map(|(name, data)| file(name, data)).collect::<Vec<_>>(),
    })
}

/// The revisions of release `name` in `secrets`' namespace, oldest first.
pub(crate) async fn history(secrets: &Api<Secret>, name: &str) -> Result<Vec<Release>, OperatorError> {
    let list = secrets.list(&ListParams::default().labels(&format!("owner=helm,name={name}"))).await?;
    let mut releases = Vec::with_capacity(list.items.len());
    for secret in &list.items {
        if secret.type_.as_deref() == Some(RELEASE_SECRET_TYPE) {
            releases.push(Release::from_secret(secret)?);
        }
    }
    releases.sort_by_key(|r| r.version);
    Ok(releases)
}

/// Stores a new revision.
pub(crate) async fn create(secrets: &Api<Secret>, release: &Release) -> Result<(), OperatorError> {
    secrets.create(&PostParams::default(), &release.to_secret()?).await?;
    Ok(())
}

/// Rewrites a stored revision (its status changed).
pub(crate) async fn replace(secrets: &Api<Secret>, release: &Release) -> Result<(), OperatorError> {
    let secret = release.to_secret()?;
    secrets.replace(&release.secret_name(), &PostParams::default(), &secret).await?;
    Ok(())
}

/// Stores `release` (a copy of it) as `superseded`: a newer revision is deployed.
pub(crate) async fn supersede(secrets: &Api<Secret>, release: &Release) -> Result<(), OperatorError> {
    let mut superseded = release.clone();
    superseded.info.status = "superseded".to_string();
    replace(secrets, &superseded).await
}

/// Deletes the pending revisions of `history` (left by an operator stopped during an
/// install, upgrade or rollback) and returns the others, as operator-sdk's release
/// manager clears the revisions that are not deployed before it reconciles (`Sync`): the
/// install or upgrade is then made again, as the same revision number.
pub(crate) async fn delete_pending(
    secrets: &Api<Secret>,
    history: Vec<Release>,
) -> Result<Vec<Release>, OperatorError> {
    let (pending, kept): (Vec<Release>, Vec<Release>) = history.into_iter().partition(Release::is_pending);
    for stale in &pending {
        tracing::info!(release = %stale.name, revision = stale.version, status = %stale.info.status, "deleting a pending revision an interrupted operation left");
    }
    delete_all(secrets, &pending).await?;
    Ok(kept)
}

/// Deletes every stored revision, as `helm uninstall` does without `--keep-history`.
pub(crate) async fn delete_all(secrets: &Api<Secret>, releases: &[Release]) -> Result<(), OperatorError> {
    for release in releases {
        match secrets.delete(&release.secret_name(), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if opkit::status::is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_round_trips_through_helms_secret() {
        let release = Release::deployed(
            "web",
            "team",
            2,
            Some("2026-01-01T00:00:00Z".into()),
            serde_json::json!({"metadata": {"name": "nginx", "version": "0.1.0"}}),
            serde_json::json!({"replicaCount": 2}),
            "---\n# Source: nginx/templates/cm.yaml\n".into(),
        );
        let secret = release.to_secret().expect("encodes");
        assert_eq!(secret.metadata.name.as_deref(), Some("sh.helm.release.v1.web.v2"));
        assert_eq!(secret.type_.as_deref(), Some("helm.sh/release.v1"));
        let labels = secret.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("owner").map(String::as_str), Some("helm"));
        assert_eq!(labels.get("status").map(String::as_str), Some("deployed"));
        assert_eq!(labels.get("version").map(String::as_str), Some("2"));
        assert_eq!(Release::from_secret(&secret).expect("decodes"), release);
        let raw = STANDARD.decode(&secret.data.as_ref().expect("data")["release"].0).expect("base64");
        assert_eq!(&raw[..2], &[0x1f, 0x8b], "gzip, as Helm writes it");
    }

    #[test]
    fn a_new_revision_is_pending_until_it_is_deployed() {
        let chart = serde_json::json!({});
        let mut install = Release::pending("web", "team", 1, None, chart.clone(), Value::Null, String::new());
        assert_eq!(
            (install.info.status.as_str(), install.info.description.as_str()),
            ("pending-install", "Initial install underway")
        );
        assert!(install.is_pending());
        let labels = install.to_secret().expect("encodes").metadata.labels.unwrap_or_default();
        assert_eq!(labels.get("status").map(String::as_str), Some("pending-install"));
        install.mark_deployed();
        assert_eq!((install.info.status.as_str(), install.info.description.as_str()), ("deployed", "Install complete"));
        assert!(!install.is_pending());

        let mut upgrade = Release::pending("web", "team", 2, None, chart, Value::Null, String::new());
        assert_eq!(
            (upgrade.info.status.as_str(), upgrade.info.description.as_str()),
            ("pending-upgrade", "Preparing upgrade")
        );
        upgrade.mark_deployed();
        assert_eq!(upgrade.info.description, "Upgrade complete");
        upgrade.info.status = STATUS_PENDING_ROLLBACK.to_string();
        assert!(upgrade.is_pending());
    }
}
