//! The admission webhooks the store's MutatingWebhookConfigurations and
//! ValidatingWebhookConfigurations declare, read once per change: each webhook's
//! selectors parsed and its matchConditions compiled, in kube's calling order
//! (configuration name, then the webhook's place in it).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhookConfiguration,
};
use kube_cel::cel::Program;
use opkit_apimachinery::selector::LabelSelector;
use parking_lot::RwLock;

use crate::registry::parse_stored;
use crate::registry::view::StoreView;
use crate::storage::{ResourceId, Revision};
use crate::webhook_client::ClientConfig;

/// The timeout of a webhook without `timeoutSeconds` (kube's default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Which of the two webhook phases a configuration belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// MutatingWebhookConfiguration.
    Mutating,
    /// ValidatingWebhookConfiguration.
    Validating,
}

impl Phase {
    /// The resource holding this phase's configurations.
    fn resource(self) -> ResourceId {
        match self {
            Phase::Mutating => ResourceId::new("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
            Phase::Validating => ResourceId::new("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        }
    }
}

/// One `matchConditions` entry, compiled.
pub(crate) struct Condition {
    /// The condition's name.
    pub name: String,
    /// The compiled expression and its tree's depth (see `schema::cel_depth`), or why it
    /// does not compile.
    pub program: Result<(Program, usize), String>,
}

/// One webhook of a configuration, ready to match and call.
pub(crate) struct Hook {
    /// The configuration's name.
    pub configuration: String,
    /// The webhook's name.
    pub name: String,
    /// `rules`.
    pub rules: Vec<RuleWithOperations>,
    /// `matchPolicy: Exact` (else Equivalent, the default).
    pub exact: bool,
    /// `namespaceSelector`, or why it does not parse.
    pub namespace_selector: Result<LabelSelector, String>,
    /// `objectSelector`, or why it does not parse.
    pub object_selector: Result<LabelSelector, String>,
    /// `matchConditions`.
    pub conditions: Vec<Condition>,
    /// Where it is served.
    pub client: ClientConfig,
    /// `timeoutSeconds` (10 s by default).
    pub timeout: Duration,
    /// `failurePolicy: Ignore` (else Fail, the default).
    pub fail_open: bool,
    /// `sideEffects`.
    pub side_effects: Option<String>,
    /// `admissionReviewVersions`.
    pub review_versions: Vec<String>,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks).
    pub reinvoke_if_needed: bool,
}

/// The fields both kinds of webhook share, borrowed from either typed webhook.
struct Common<'a> {
    name: &'a str,
    rules: Option<&'a Vec<RuleWithOperations>>,
    match_policy: Option<&'a str>,
    namespace_selector: Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    object_selector: Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    conditions: Option<&'a Vec<MatchCondition>>,
    client: &'a k8s_openapi::api::admissionregistration::v1::WebhookClientConfig,
    timeout_seconds: Option<i32>,
    failure_policy: Option<&'a str>,
    side_effects: &'a str,
    review_versions: &'a [String],
    reinvocation_policy: Option<&'a str>,
}

impl Hook {
    /// Compiles one webhook of configuration `configuration`.
    fn new(configuration: &str, c: Common<'_>) -> Hook {
        // An absent selector is kube's default, `{}`: it selects everything.
        let selector =
            |s: Option<&_>| LabelSelector::from_k8s(Some(s.unwrap_or(&Default::default()))).map_err(|e| e.to_string());
        Hook {
            configuration: configuration.to_string(),
            name: c.name.to_string(),
            rules: c.rules.cloned().unwrap_or_default(),
            exact: c.match_policy == Some("Exact"),
            namespace_selector: selector(c.namespace_selector),
            object_selector: selector(c.object_selector),
            conditions: c
                .conditions
                .map(|cs| {
                    cs.iter()
                        .map(|m| Condition {
                            name: m.name.clone(),
                            program: crate::schema::cel_depth::parse(&m.expression),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            client: ClientConfig::from(c.client),
            timeout: c
                .timeout_seconds
                .and_then(|s| u64::try_from(s).ok())
                .filter(|s| *s > 0)
                .map_or(DEFAULT_TIMEOUT, Duration::from_secs),
            fail_open: c.failure_policy == Some("Ignore"),
            side_effects: Some(c.side_effects.to_string()).filter(|s| !s.is_empty()),
            review_versions: c.review_versions.to_vec(),
            reinvoke_if_needed: c.reinvocation_policy == Some("IfNeeded"),
        }
    }
}

/// The webhooks of one phase, as of a revision of their configurations.
type Cached = Option<(Revision, Arc<Vec<Hook>>)>;

/// The compiled webhooks of both phases, rebuilt when their configurations change.
#[derive(Default)]
pub(crate) struct WebhookCache {
    mutating: RwLock<Cached>,
    validating: RwLock<Cached>,
}

impl WebhookCache {
    /// The webhooks of `phase`, in calling order.
    pub(crate) fn hooks(&self, view: StoreView<'_>, phase: Phase) -> Arc<Vec<Hook>> {
        let cache = match phase {
            Phase::Mutating => &self.mutating,
            Phase::Validating => &self.validating,
        };
        let resource = phase.resource();
        // Read before the objects: a write in between only makes the next request rebuild.
        let rev = view.last_write(&resource);
        if let Some((at, hooks)) = cache.read().as_ref()
            && *at == rev
        {
            return hooks.clone();
        }
        let hooks = Arc::new(read_webhooks(view, phase, &resource));
        *cache.write() = Some((rev, hooks.clone()));
        hooks
    }
}

/// Reads and compiles every webhook of `phase` from the store.
fn read_webhooks(view: StoreView<'_>, phase: Phase, resource: &ResourceId) -> Vec<Hook> {
    let mut stored: Vec<_> = view
        .values(resource)
        .into_iter()
        .filter_map(|(key, bytes)| Some((key.1, parse_stored(&bytes).ok()?)))
        .collect();
    stored.sort_by(|a, b| a.0.cmp(&b.0));
    let mut hooks = Vec::new();
    for (name, value) in stored {
        match phase {
            Phase::Mutating => {
                let Ok(config) = serde_json::from_value::<MutatingWebhookConfiguration>(value) else { continue };
                for w in config.webhooks.iter().flatten() {
                    hooks.push(Hook::new(
                        &name,
                        Common {
                            name: &w.name,
                            rules: w.rules.as_ref(),
                            match_policy: w.match_policy.as_deref(),
                            namespace_selector: w.namespace_selector.as_ref(),
                            object_selector: w.object_selector.as_ref(),
                            conditions: w.match_conditions.as_ref(),
                            client: &w.client_config,
                            timeout_seconds: w.timeout_seconds,
                            failure_policy: w.failure_policy.as_deref(),
                            side_effects: &w.side_effects,
                            review_versions: &w.admission_review_versions,
                            reinvocation_policy: w.reinvocation_policy.as_deref(),
                        },
                    ));
                }
            }
            Phase::Validating => {
                let Ok(config) = serde_json::from_value::<ValidatingWebhookConfiguration>(value) else { continue };
                for w in config.webhooks.iter().flatten() {
                    hooks.push(Hook::new(
                        &name,
                        Common {
                            name: &w.name,
                            rules: w.rules.as_ref(),
                            match_policy: w.match_policy.as_deref(),
                            namespace_selector: w.namespace_selector.as_ref(),
                            object_selector: w.object_selector.as_ref(),
                            conditions: w.match_conditions.as_ref(),
                            client: &w.client_config,
                            timeout_seconds: w.timeout_seconds,
                            failure_policy: w.failure_policy.as_deref(),
                            side_effects: &w.side_effects,
                            review_versions: &w.admission_review_versions,
                            reinvocation_policy: None,
                        },
                    ));
                }
            }
        }
    }
    hooks
}
