//! What the manager checks before it starts anything: that the API server answers and
//! serves the kind every controller reconciles. An operator whose cluster is not running,
//! or whose CRDs are not installed, stops at once with an error that says so and what to
//! do, instead of retrying its watches until the caches time out.

use std::collections::BTreeMap;

use kube::Client;
use kube::api::ApiResource;

use super::ManagerError;
use crate::error_text::concise;

/// A kind a controller watches.
#[derive(Debug, Clone)]
pub(crate) struct WatchedKind {
    /// The controller.
    pub(crate) controller: String,
    /// The kind's group, version, kind and resource.
    pub(crate) resource: ApiResource,
    /// True for the kind the controller reconciles (`For`); false for the kinds it owns
    /// or watches.
    pub(crate) reconciled: bool,
}

/// ` at URL`, or nothing when the URL is not known: for error messages.
pub(super) fn at(server: Option<&str>) -> String {
    server.map(|s| format!(" at {s}")).unwrap_or_default()
}

/// `group/version`, or `version` for the core group.
pub(super) fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() { version.to_string() } else { format!("{group}/{version}") }
}

/// Asks the API server, once per group/version, which resources it serves, and fails
/// with the first kind a controller reconciles that is missing. A missing kind that is
/// only owned or watched is logged (the controller waits for it to be served).
pub(super) async fn check_served(
    client: &Client,
    server: Option<&str>,
    watched: &[WatchedKind],
) -> Result<(), ManagerError> {
    let mut by_version: BTreeMap<&str, Vec<&WatchedKind>> = BTreeMap::new();
    for w in watched {
        by_version.entry(&w.resource.api_version).or_default().push(w);
    }
    for (api_version, kinds) in by_version {
        let listed = if kinds[0].resource.group.is_empty() {
            client.list_core_api_resources(&kinds[0].resource.version).await
        } else {
            client.list_api_group_resources(api_version).await
        };
        let served: Vec<String> = match listed {
            Ok(list) => list.resources.into_iter().map(|r| r.name).collect(),
            Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
            Err(e @ (kube::Error::HyperError(_) | kube::Error::Service(_))) => {
                return Err(ManagerError::Unreachable { server: server.map(String::from), cause: concise(&e) });
            }
            Err(e) => {
                return Err(ManagerError::Discovery {
                    api_version: api_version.to_string(),
                    server: server.map(String::from),
                    cause: concise(&e),
                });
            }
        };
        for w in kinds.into_iter().filter(|w| !served.contains(&w.resource.plural)) {
            let r = &w.resource;
            if w.reconciled {
                return Err(ManagerError::KindNotServed {
                    controller: w.controller.clone(),
                    kind: r.kind.clone(),
                    group: r.group.clone(),
                    version: r.version.clone(),
                    resource: r.plural.clone(),
                    server: server.map(String::from),
                });
            }
            tracing::warn!(
                controller = %w.controller,
                kind = %r.kind,
                resource = %format!("{} ({})", r.plural, group_version(&r.group, &r.version)),
                "a watched kind is not served (is its CustomResourceDefinition installed?); the controller waits for it"
            );
        }
    }
    Ok(())
}
