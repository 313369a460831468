//! The CSV base of `config/manifests/bases/<operator>.clusterserviceversion.yaml`, as
//! `operator-sdk generate kustomize manifests` makes it: operator-sdk's defaults, the UI
//! metadata given (flags or prompts), and the owned CRD descriptions from the markers,
//! merged into an existing base so that what a user wrote there stays.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::markers::display_name;
use crate::csv::{
    ALM_EXAMPLES, AppLink, CSV_API_VERSION, CSV_KIND, ClusterServiceVersion, CrdDescription, CsvSpec,
    INSTALL_MODE_TYPES, Icon, InstallMode, Maintainer,
};

/// The UI metadata of a CSV base; each field left empty keeps what the base has, or
/// operator-sdk's default for a new base.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UiMetadata {
    /// `spec.displayName`.
    pub display_name: String,
    /// `spec.description`.
    pub description: String,
    /// `metadata.annotations.capabilities` (`Basic Install`, `Seamless Upgrades`, ...).
    pub capabilities: String,
    /// `spec.maturity`.
    pub maturity: String,
    /// `spec.keywords`.
    pub keywords: Vec<String>,
    /// `spec.maintainers`.
    pub maintainers: Vec<Maintainer>,
    /// `spec.provider`.
    pub provider: AppLink,
    /// `spec.links`.
    pub links: Vec<AppLink>,
    /// `spec.icon`.
    pub icon: Vec<Icon>,
    /// Install modes to declare supported (the others unsupported); empty keeps the base's.
    pub install_modes: Vec<String>,
    /// `spec.minKubeVersion`.
    pub min_kube_version: String,
}

/// A new base with operator-sdk's defaults for `operator` (`<operator>.v0.0.0`, namespace
/// `placeholder`, `alm-examples: []`, AllNamespaces only).
pub fn new_base(operator: &str) -> ClusterServiceVersion {
    let display = display_name(operator);
    let annotations = BTreeMap::from([
        ("capabilities".to_string(), "Basic Install".to_string()),
        (ALM_EXAMPLES.to_string(), "[]".to_string()),
    ]);
    ClusterServiceVersion {
        api_version: CSV_API_VERSION.into(),
        kind: CSV_KIND.into(),
        metadata: ObjectMeta {
            name: Some(format!("{operator}.v0.0.0")),
            namespace: Some("placeholder".into()),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: CsvSpec {
            display_name: display.clone(),
            description: format!("{display} description. TODO."),
            provider: AppLink { name: "Provider Name".into(), url: "https://your.domain".into() },
            maintainers: vec![Maintainer { name: "Maintainer Name".into(), email: "your@email.com".into() }],
            links: vec![AppLink { name: display, url: format!("https://{operator}.domain") }],
            maturity: "alpha".into(),
            keywords: vec![operator.to_string()],
            icon: vec![Icon::default()],
            install_modes: INSTALL_MODE_TYPES
                .iter()
                .map(|t| InstallMode { mode_type: (*t).to_string(), supported: *t == "AllNamespaces" })
                .collect(),
            ..CsvSpec::default()
        },
        status: None,
    }
}

/// Writes the metadata given over `base`.
pub fn apply_ui_metadata(base: &mut ClusterServiceVersion, meta: &UiMetadata) {
    let spec = &mut base.spec;
    let set = |target: &mut String, value: &str| {
        if !value.is_empty() {
            *target = value.to_string();
        }
    };
    set(&mut spec.display_name, &meta.display_name);
    set(&mut spec.description, &meta.description);
    set(&mut spec.maturity, &meta.maturity);
    set(&mut spec.min_kube_version, &meta.min_kube_version);
    if !meta.capabilities.is_empty() {
        base.metadata.annotations.get_or_insert_default().insert("capabilities".into(), meta.capabilities.clone());
    }
    if !meta.keywords.is_empty() {
        spec.keywords = meta.keywords.clone();
    }
    if !meta.maintainers.is_empty() {
        spec.maintainers = meta.maintainers.clone();
    }
    if !meta.provider.is_empty() {
        spec.provider = meta.provider.clone();
    }
    if !meta.links.is_empty() {
        spec.links = meta.links.clone();
    }
    if !meta.icon.is_empty() {
        spec.icon = meta.icon.clone();
    }
    if !meta.install_modes.is_empty() {
        spec.install_modes = INSTALL_MODE_TYPES
            .iter()
            .map(|t| InstallMode { mode_type: (*t).to_string(), supported: meta.install_modes.iter().any(|m| m == t) })
            .collect();
    }
}

/// Puts the descriptions generated from the markers into the base's owned CRDs, as
/// operator-sdk does: a generated description replaces the base's of the same name,
/// version and kind; the base's other descriptions are kept after them; generated ones are
/// sorted by name, then kind, then version (newest first).
pub fn apply_descriptions(base: &mut ClusterServiceVersion, generated: &[CrdDescription]) {
    let mut generated: Vec<CrdDescription> = generated.to_vec();
    generated
        .sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.kind.cmp(&b.kind)).then_with(|| b.version.cmp(&a.version)));
    let key = |d: &CrdDescription| (d.name.clone(), d.version.clone(), d.kind.clone());
    let kept: Vec<CrdDescription> = base
        .spec
        .customresourcedefinitions
        .owned
        .iter()
        .filter(|d| !generated.iter().any(|g| key(g) == key(d)))
        .cloned()
        .collect();
    generated.extend(kept);
    base.spec.customresourcedefinitions.owned = generated;
}
