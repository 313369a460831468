//! The webhooks of `opkit run` (`make run`): when the project has webhooks and
//! `ENABLE_WEBHOOKS` is not `false`, a development CA and serving certificate for 127.0.0.1,
//! a free local port for the operator's webhook server (passed to it as
//! `WEBHOOK_BIND_ADDRESS` and `WEBHOOK_CERT_DIR`), and, once it listens, the project's webhook
//! configurations (config/webhook, named as config/default names them) and CRD conversion
//! webhooks pointed at it (`clientConfig.url`, the dev `caBundle`). They are removed (the
//! CRDs re-applied from config/crd) when `run` ends.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::install::FIELD_MANAGER;
use super::{CliError, install};
use crate::cluster_ops;
use crate::project::Project;

/// Where the development certificates are written (under the project).
const CERT_DIR: &str = "target/opkit/webhook-certs";

/// The webhook configuration kinds.
const CONFIGURATION_KINDS: [&str; 2] = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"];

/// The local webhook server of one `opkit run`.
#[derive(Debug)]
pub(super) struct LocalWebhooks {
    /// Where the operator's webhook server listens.
    pub addr: SocketAddr,
    /// The certificate directory the operator serves from.
    pub cert_dir: PathBuf,
    /// The webhook configurations, pointed at `addr`.
    configurations: Vec<Value>,
    /// The CRDs with a conversion webhook, pointed at `addr`.
    conversions: Vec<Value>,
    /// The CRDs as `opkit install` applies them, to restore.
    crds: Vec<Value>,
}

/// Whether `ENABLE_WEBHOOKS` (unset: enabled) turns the webhooks on.
pub(super) fn enabled(value: Option<&str>) -> bool {
    !value.is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
}

/// Whether the project scaffolded any webhook.
pub(super) fn project_has_webhooks(project: &Project) -> bool {
    project.resources.iter().any(|r| r.webhooks.is_some())
}

impl LocalWebhooks {
    /// Prepares the certificates, the port and the rewritten objects of the project at `root`.
    pub(super) fn prepare(root: &Path, project: &Project) -> Result<LocalWebhooks, CliError> {
        let port = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port();
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let cert_dir = root.join(CERT_DIR);
        let certs = opkit::webhook::DevCerts::generate(&["127.0.0.1".into(), "localhost".into()])
            .map_err(|e| CliError::Build(format!("webhook development certificates: {e}")))?;
        certs.write(&cert_dir).map_err(|e| CliError::Build(format!("webhook development certificates: {e}")))?;
        let ca_bundle = serde_json::to_value(k8s_openapi::ByteString(certs.ca_pem.into_bytes()))
            .map_err(|e| CliError::Build(format!("encoding the caBundle: {e}")))?;
        let configurations = if root.join("config/webhook/kustomization.yaml").is_file() {
            crate::kustomize::build(&root.join("config/webhook"))?
        } else {
            Vec::new()
        };
        let configurations = local_configurations(configurations, &project.project_name, addr, &ca_bundle);
        let crds = install::crd_objects(root)?;
        let conversions = local_conversions(&crds, addr, &ca_bundle);
        Ok(LocalWebhooks { addr, cert_dir, configurations, conversions, crds })
    }

    /// The environment the operator gets: webhooks on, served at `addr` from `cert_dir`.
    pub(super) fn env(&self) -> [(&'static str, String); 3] {
        [
            ("ENABLE_WEBHOOKS", "true".into()),
            ("WEBHOOK_BIND_ADDRESS", self.addr.to_string()),
            ("WEBHOOK_CERT_DIR", self.cert_dir.display().to_string()),
        ]
    }

    /// Waits until the operator's webhook server accepts connections (it is built first, so
    /// this may take minutes), then applies the configurations and conversion webhooks.
    pub(super) async fn install_when_listening(
        &self,
        client: &kube::Client,
        timeout: Duration,
    ) -> Result<(), CliError> {
        let mut poll = tokio::time::interval(Duration::from_millis(200));
        loop {
            poll.tick().await;
            if tokio::net::TcpStream::connect(self.addr).await.is_ok() {
                break;
            }
        }
        let objs: Vec<Value> = self.conversions.iter().chain(&self.configurations).cloned().collect();
        cluster_ops::apply(client, &objs, FIELD_MANAGER, &|_: &str| {}, timeout).await?;
        Ok(())
    }

    /// What [`LocalWebhooks::install_when_listening`] applies, for the user.
    pub(super) fn summary(&self) -> String {
        let names: Vec<&str> = self
            .configurations
            .iter()
            .chain(&self.conversions)
            .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
            .collect();
        format!("webhooks served at https://{} ({})", self.addr, names.join(", "))
    }

    /// Deletes the configurations and re-applies the CRDs as `opkit install` did.
    pub(super) async fn remove(&self, client: &kube::Client, timeout: Duration) -> Result<(), CliError> {
        cluster_ops::delete(client, &self.configurations, &|_: &str| {}, None).await?;
        if !self.conversions.is_empty() {
            cluster_ops::apply(client, &self.crds, FIELD_MANAGER, &|_: &str| {}, timeout).await?;
        }
        Ok(())
    }
}

/// The webhook configurations of `objs` named as config/default names them
/// (`<project>-mutating-webhook-configuration`), each webhook called at
/// `https://<addr><service path>` and trusting `ca_bundle`.
fn local_configurations(objs: Vec<Value>, project_name: &str, addr: SocketAddr, ca_bundle: &Value) -> Vec<Value> {
    objs.into_iter()
        .filter(|o| o["kind"].as_str().is_some_and(|k| CONFIGURATION_KINDS.contains(&k)))
        .map(|mut o| {
            let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
            o["metadata"] = json!({"name": format!("{project_name}-{name}")});
            for w in o.get_mut("webhooks").and_then(Value::as_array_mut).into_iter().flatten() {
                let path = w.pointer("/clientConfig/service/path").and_then(Value::as_str).unwrap_or("/").to_owned();
                w["clientConfig"] = json!({"url": format!("https://{addr}{path}"), "caBundle": ca_bundle});
            }
            o
        })
        .collect()
}

/// The CRDs of `crds` whose conversion strategy is `Webhook`, converting at
/// `https://<addr><service path>` and trusting `ca_bundle`.
fn local_conversions(crds: &[Value], addr: SocketAddr, ca_bundle: &Value) -> Vec<Value> {
    crds.iter()
        .filter(|c| c.pointer("/spec/conversion/strategy").and_then(Value::as_str) == Some("Webhook"))
        .map(|c| {
            let mut c = c.clone();
            let path = c
                .pointer("/spec/conversion/webhook/clientConfig/service/path")
                .and_then(Value::as_str)
                .unwrap_or(opkit::webhook::CONVERSION_PATH)
                .to_owned();
            c["spec"]["conversion"]["webhook"]["clientConfig"] =
                json!({"url": format!("https://{addr}{path}"), "caBundle": ca_bundle});
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_and_conversions_point_at_the_local_server() {
        let addr: SocketAddr = "127.0.0.1:9555".parse().expect("addr");
        let ca = json!("Q0E=");
        let objs = vec![
            json!({"kind": "Service", "metadata": {"name": "webhook-service"}}),
            json!({"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "validating-webhook-configuration"},
                   "webhooks": [{"name": "v.kb.io", "clientConfig": {"service": {"name": "webhook-service",
                                 "namespace": "system", "path": "/validate-x"}}}]}),
        ];
        let local = local_configurations(objs, "op", addr, &ca);
        assert_eq!(local.len(), 1);
        assert_eq!(local[0]["metadata"], json!({"name": "op-validating-webhook-configuration"}));
        assert_eq!(
            local[0]["webhooks"][0]["clientConfig"],
            json!({"url": "https://127.0.0.1:9555/validate-x", "caBundle": "Q0E="})
        );
        let crds = vec![
            json!({"metadata": {"name": "a.x"}, "spec": {"conversion": {"strategy": "None"}}}),
            json!({"metadata": {"name": "b.x"}, "spec": {"conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": "/convert"}}}}}}),
        ];
        let conversions = local_conversions(&crds, addr, &ca);
        assert_eq!(conversions.len(), 1);
        assert_eq!(
            conversions[0]["spec"]["conversion"]["webhook"],
            json!({"conversionReviewVersions": ["v1"],
                   "clientConfig": {"url": "https://127.0.0.1:9555/convert", "caBundle": "Q0E="}})
        );
    }

    #[test]
    fn only_false_disables() {
        assert!(enabled(None) && enabled(Some("true")) && enabled(Some("")));
        assert!(!enabled(Some("false")) && !enabled(Some("FALSE ")));
    }
}
