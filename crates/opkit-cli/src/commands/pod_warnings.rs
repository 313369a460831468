//! The last Warning event of a workload's pods, which a wait that timed out names (as
//! `kubectl describe pod` would show it): "pod P: FailedMount: ... secret
//! \"webhook-server-cert\" not found" says why a Deployment never became available.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};

use super::CliError;

/// `error` (a wait that timed out) with the latest Warning event of the pods in `ns` whose
/// labels match `match_labels`, when one exists; `error` unchanged otherwise (also when the
/// events cannot be read: this only explains the timeout).
pub(super) async fn explain_timeout(
    client: &kube::Client,
    ns: &str,
    match_labels: &[BTreeMap<String, String>],
    error: CliError,
) -> CliError {
    let mut latest: Option<(Timestamp, String)> = None;
    for labels in match_labels {
        if let Some((at, warning)) = last_warning(client, ns, labels).await
            && latest.as_ref().is_none_or(|(seen, _)| at > *seen)
        {
            latest = Some((at, warning));
        }
    }
    match latest {
        Some((_, warning)) => CliError::PodWarning { error: Box::new(error), warning },
        None => error,
    }
}

/// The latest Warning event of the pods `labels` selects in `ns`, as its time and
/// `pod NAME: REASON: MESSAGE`.
async fn last_warning(
    client: &kube::Client,
    ns: &str,
    labels: &BTreeMap<String, String>,
) -> Option<(Timestamp, String)> {
    let selector: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&selector.join(",")))
        .await
        .ok()?;
    let names: Vec<String> = pods.items.into_iter().filter_map(|p| p.metadata.name).collect();
    let events = Api::<Event>::namespaced(client.clone(), ns).list(&ListParams::default()).await.ok()?;
    events
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning") && e.involved_object.kind.as_deref() == Some("Pod"))
        .filter(|e| e.involved_object.name.as_ref().is_some_and(|n| names.contains(n)))
        .filter_map(|e| {
            let at = e
                .last_timestamp
                .as_ref()
                .map(|t| t.0)
                .or_else(|| e.event_time.as_ref().map(|t| t.0))
                .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
            let pod = e.involved_object.name.unwrap_or_default();
            let text =
                format!("pod {pod}: {}: {}", e.reason.unwrap_or_default(), e.message.unwrap_or_default().trim_end());
            Some((at, text))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
}
