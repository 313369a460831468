//! A CSV's `spec.webhookdefinitions` registered as OLM's install strategy does: for each
//! Deployment serving webhooks, a Service `<deployment>-service` on the webhooks' ports and
//! a serving certificate signed by a CA of its own, kept in the Secret
//! `<deployment>-service-cert` (`tls.crt`, `tls.key`, and the CA as `olmCAKey`) and mounted
//! into the Deployment where operator-sdk's and OLM's servers read it; then a
//! ValidatingWebhookConfiguration or MutatingWebhookConfiguration per definition, or, for a
//! ConversionWebhook, the `spec.conversion` of each CRD it names, pointing at that Service
//! with the CA as `caBundle`. The Service and Secret are owned by the CSV and the webhook
//! configurations labelled `olm.owner`, so they go when the CSV goes. As OLM's, a
//! configuration is created with `generateName: <definition's generateName>-` (the API
//! server adds the suffix) and found again by its labels (the owner's and
//! `olm.webhook-description-generate-name`), then updated in place.

use std::collections::BTreeMap;
use std::fmt::Debug;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::ClusterResourceScope;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use opkit_olm_bundle::csv::{ClusterServiceVersion, WebhookDescription};
use opkit_serve::tls::DevCa;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Label on a webhook configuration: the definition's `generateName`.
pub(crate) const WEBHOOK_DESCRIPTION_LABEL: &str = "olm.webhook-description-generate-name";
/// The Secret key holding the CA certificate (OLM's `olmCAKey`).
pub(crate) const CA_KEY: &str = "olmCAKey";
/// Where controller-runtime's (and opkit's) webhook server reads its certificate.
pub(crate) const WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// Where an aggregated API server reads its certificate (OLM mounts both).
pub(crate) const APISERVICE_CERT_DIR: &str = "/apiserver.local.config/certificates";

/// The Service OLM makes for a Deployment serving webhooks.
pub(crate) fn service_name(deployment: &str) -> String {
    format!("{deployment}-service")
}

/// The Secret holding that Service's serving certificate.
pub(crate) fn secret_name(deployment: &str) -> String {
    format!("{}-cert", service_name(deployment))
}

/// The objects that register a CSV's webhooks, and the CRD conversions to set.
#[derive(Debug, Default)]
pub(crate) struct Registration {
    /// Services and Secrets, to apply (metadata without owner).
    pub objects: Vec<Value>,
    /// Webhook configurations, with `generateName` and no name, for [`register`]
    /// (metadata without the owner's labels).
    pub configurations: Vec<Value>,
    /// `(crd name, spec.conversion)` for each ConversionWebhook's CRDs.
    pub conversions: Vec<(String, Value)>,
    /// The Deployments serving webhooks, by name: the Secret to mount.
    pub mounts: BTreeMap<String, String>,
}

/// Builds the registration of `csv`'s webhook definitions in `ns`, reusing the serving
/// certificate already in each Secret (so the CA stays the same across reconciles).
pub(crate) async fn registration(
    client: &Client,
    csv: &ClusterServiceVersion,
    ns: &str,
) -> Result<Registration, String> {
    let mut out = Registration::default();
    let mut ca_of: BTreeMap<&str, String> = BTreeMap::new();
    for (deployment, ports) in &webhook_ports(csv) {
        let strategy = csv.spec.install.spec.deployments.iter().find(|s| s.name == *deployment);
        let Some(strategy) = strategy else {
            return Err(format!(
                "webhook definitions name deployment {deployment:?}, which the install strategy lacks"
            ));
        };
        let service = service_name(deployment);
        let selector = strategy.spec.selector.match_labels.clone().unwrap_or_default();
        out.objects.push(json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": service},
            "spec": {
                "selector": selector,
                "ports": ports.iter().map(|(port, target)| json!({"name": port.to_string(), "port": port, "targetPort": target})).collect::<Vec<_>>(),
            },
        }));
        let (ca, cert, key) = serving_certificate(client, ns, deployment).await?;
        out.objects.push(json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": secret_name(deployment)},
            "data": {"tls.crt": STANDARD.encode(&cert), "tls.key": STANDARD.encode(&key), CA_KEY: STANDARD.encode(&ca)},
        }));
        out.mounts.insert((*deployment).to_string(), secret_name(deployment));
        ca_of.insert(deployment, ca);
    }
    for d in &csv.spec.webhookdefinitions {
        let ca = ca_of.get(d.deployment_name.as_str()).map_or("", String::as_str);
        out.add_definition(d, ns, ca)?;
    }
    Ok(out)
}

/// The ports each deployment serves webhooks on (container port, Service target port),
/// in the order the definitions name them.
fn webhook_ports(csv: &ClusterServiceVersion) -> BTreeMap<&str, Vec<(i32, Value)>> {
    let mut ports: BTreeMap<&str, Vec<(i32, Value)>> = BTreeMap::new();
    for d in &csv.spec.webhookdefinitions {
        let port = d.container_port.unwrap_or(443);
        let target = d.target_port.as_ref().map_or(json!(port), |t| json!(t));
        let entry = ports.entry(d.deployment_name.as_str()).or_default();
        if !entry.iter().any(|(p, _)| *p == port) {
            entry.push((port, target));
        }
    }
    ports
}

impl Registration {
    /// Adds webhook definition `d`, served in `ns` with CA `ca`: a webhook configuration
    /// for an admission webhook, the CRDs' conversion for a conversion webhook.
    fn add_definition(&mut self, d: &WebhookDescription, ns: &str, ca: &str) -> Result<(), String> {
        let client_config = json!({
            "service": {
                "namespace": ns, "name": service_name(&d.deployment_name),
                "path": d.webhook_path, "port": d.container_port.unwrap_or(443),
            },
            "caBundle": STANDARD.encode(ca),
        });
        match d.webhook_type.as_str() {
            "ValidatingAdmissionWebhook" | "MutatingAdmissionWebhook" => {
                let kind = if d.webhook_type.starts_with("Validating") {
                    "ValidatingWebhookConfiguration"
                } else {
                    "MutatingWebhookConfiguration"
                };
                self.configurations.push(json!({
                    "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                    "metadata": {
                        "generateName": format!("{}-", d.generate_name),
                        "labels": {WEBHOOK_DESCRIPTION_LABEL: d.generate_name},
                    },
                    "webhooks": [webhook(d, kind, client_config)],
                }));
            }
            "ConversionWebhook" => {
                for crd in &d.conversion_crds {
                    let conversion = json!({"strategy": "Webhook", "webhook": {
                        "clientConfig": client_config, "conversionReviewVersions": d.admission_review_versions,
                    }});
                    self.conversions.push((crd.clone(), conversion));
                }
            }
            other => return Err(format!("webhook definition {:?} has unknown type {other:?}", d.generate_name)),
        }
        Ok(())
    }
}

/// Registers one webhook configuration built by [`registration`] (with the owner's labels
/// added): those already labelled as it is get its webhooks and labels; when there are
/// none it is created, the API server completing its `generateName`.
pub(crate) async fn register(client: &Client, configuration: &Value) -> Result<(), String> {
    match configuration["kind"].as_str() {
        Some("MutatingWebhookConfiguration") => {
            register_as::<MutatingWebhookConfiguration>(client, configuration).await
        }
        _ => register_as::<ValidatingWebhookConfiguration>(client, configuration).await,
    }
}

async fn register_as<K>(client: &Client, configuration: &Value) -> Result<(), String>
where
    K: Resource<DynamicType = (), Scope = ClusterResourceScope> + Clone + Debug + Serialize + DeserializeOwned,
{
    let text = |e: kube::Error| format!("registering a {}: {}", K::kind(&()), crate::objects::opkit_error_text(&e));
    let labels: BTreeMap<String, String> =
        serde_json::from_value(configuration["metadata"]["labels"].clone()).map_err(|e| e.to_string())?;
    let selector = labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
    let api: Api<K> = Api::all(client.clone());
    let existing = api.list(&ListParams::default().labels(&selector)).await.map_err(text)?;
    if existing.items.is_empty() {
        let object: K = serde_json::from_value(configuration.clone()).map_err(|e| e.to_string())?;
        api.create(&PostParams::default(), &object).await.map_err(text)?;
        return Ok(());
    }
    let patch = json!({"metadata": {"labels": labels}, "webhooks": configuration["webhooks"]});
    for found in &existing.items {
        api.patch(&found.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(text)?;
    }
    Ok(())
}

/// One admission webhook of a configuration, from its definition.
fn webhook(d: &WebhookDescription, kind: &str, client_config: Value) -> Value {
    let mut hook = json!({
        "name": d.generate_name, "clientConfig": client_config, "rules": d.rules,
        "sideEffects": d.side_effects.clone().unwrap_or_else(|| "None".into()),
        "admissionReviewVersions": d.admission_review_versions,
    });
    let optional = [
        ("failurePolicy", d.failure_policy.as_ref().map(|v| json!(v))),
        ("matchPolicy", d.match_policy.as_ref().map(|v| json!(v))),
        ("objectSelector", d.object_selector.as_ref().map(|v| json!(v))),
        ("timeoutSeconds", d.timeout_seconds.map(|v| json!(v))),
    ];
    for (key, value) in optional.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))) {
        hook[key] = value;
    }
    if kind == "MutatingWebhookConfiguration"
        && let Some(policy) = &d.reinvocation_policy
    {
        hook["reinvocationPolicy"] = json!(policy);
    }
    hook
}

/// The CA, certificate and key of a Deployment's Service: those in its Secret when they
/// are all there, else new ones (a CA of its own, and a certificate for the Service's
/// DNS names).
async fn serving_certificate(client: &Client, ns: &str, deployment: &str) -> Result<(String, String, String), String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let existing = secrets.get_opt(&secret_name(deployment)).await.map_err(|e| e.to_string())?;
    let field = |key: &str| -> Option<String> {
        let data = existing.as_ref()?.data.as_ref()?;
        String::from_utf8(data.get(key)?.0.clone()).ok().filter(|s| !s.is_empty())
    };
    if let (Some(ca), Some(cert), Some(key)) = (field(CA_KEY), field("tls.crt"), field("tls.key")) {
        return Ok((ca, cert, key));
    }
    let service = service_name(deployment);
    let ca = DevCa::generate(&format!("olm-selfsigned-{service}")).map_err(|e| e.to_string())?;
    let hosts = [format!("{service}.{ns}"), format!("{service}.{ns}.svc"), format!("{service}.{ns}.svc.cluster.local")];
    let issued = ca.issue_serving_cert(&hosts[1], &hosts).map_err(|e| e.to_string())?;
    Ok((ca.cert_pem().to_string(), issued.cert_pem, issued.key_pem))
}

/// Mounts the serving certificate's Secret into a Deployment's pod template (`spec` as
/// JSON): volumes `apiservice-cert` and `webhook-cert`, mounted in every container.
pub(crate) fn mount(spec: &mut Value, secret: &str) {
    let Some(pod) = spec.pointer_mut("/template/spec").and_then(Value::as_object_mut) else { return };
    let volumes = [
        (
            "apiservice-cert",
            APISERVICE_CERT_DIR,
            json!([{"key": "tls.crt", "path": "apiserver.crt"}, {"key": "tls.key", "path": "apiserver.key"}]),
        ),
        (
            "webhook-cert",
            WEBHOOK_CERT_DIR,
            json!([{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]),
        ),
    ];
    let list = pod.entry("volumes").or_insert_with(|| json!([]));
    if let Some(list) = list.as_array_mut() {
        list.retain(|v| !volumes.iter().any(|(name, _, _)| v.get("name").and_then(Value::as_str) == Some(name)));
        for (name, _, items) in &volumes {
            list.push(json!({"name": name, "secret": {"secretName": secret, "items": items}}));
        }
    }
    for container in pod.get_mut("containers").and_then(Value::as_array_mut).into_iter().flatten() {
        let Some(container) = container.as_object_mut() else { continue };
        let mounts = container.entry("volumeMounts").or_insert_with(|| json!([]));
        if let Some(mounts) = mounts.as_array_mut() {
            mounts.retain(|m| !volumes.iter().any(|(name, _, _)| m.get("name").and_then(Value::as_str) == Some(name)));
            for (name, path, _) in &volumes {
                mounts.push(json!({"name": name, "mountPath": path}));
            }
        }
    }
}

/// Sets each conversion on its CRD (a merge patch, so the CRD's other fields and their
/// owner stay as the InstallPlan applied them).
pub(crate) async fn set_conversions(client: &Client, conversions: &[(String, Value)]) -> Result<(), String> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (name, conversion) in conversions {
        let patch = json!({"spec": {"conversion": conversion}});
        crds.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(|e| {
            format!("setting the conversion webhook of CRD {name}: {}", crate::objects::opkit_error_text(&e))
        })?;
    }
    Ok(())
}
