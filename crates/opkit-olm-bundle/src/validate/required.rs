//! The validators `operator-sdk bundle validate` always runs: the bundle's format and
//! annotations (operator-registry), its objects' kinds, the BundleValidator (owned CRDs
//! present, ServiceAccounts, size, related images), the ClusterServiceVersionValidator
//! (name, replaces, examples, install modes, minKubeVersion, required fields, annotation
//! names, apiVersion/kind), the CRD validator, and the webhook definitions OLM refuses at
//! install time.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

use serde_json::Value;

use super::{Finding, Level, ordered};
use crate::annotations::{self, AnnotationsFile, REGISTRY_V1};
use crate::bundle::Bundle;
use crate::csv::INSTALL_MODE_TYPES;
use crate::generate::manifests::{SUPPORTED_KINDS, is_semver};

const BUNDLE_NOT_VALID: &str = "BundleNotValid";
const CSV_NOT_VALID: &str = "CSVFileNotValid";
/// A format finding is printed as its detail alone, as operator-sdk prints registry errors.
pub(super) const FORMAT: &str = "BundleFormat";
const MAX_BUNDLE_SIZE: u64 = 1 << 20;
const MIN_KUBE_VERSION_WARNING: &str = "csv.Spec.minKubeVersion is not informed. It is recommended you provide this information. Otherwise, it would mean that your operator project can be distributed and installed in any cluster version available, which is not necessarily the case for all projects.";

/// operator-framework's warning for a CSV without `spec.minKubeVersion`.
pub(super) fn min_kube_version_warning() -> &'static str {
    MIN_KUBE_VERSION_WARNING
}

pub(super) fn validate(bundle: &Bundle) -> Vec<Finding> {
    let mut out = format(bundle);
    out.extend(ordered(bundle_validator(bundle)));
    out.extend(ordered(csv_validator(bundle)));
    out.extend(ordered(crd_validator(bundle)));
    out.extend(ordered(webhook_definitions(bundle)));
    out.extend(ordered(objects(bundle)));
    out
}

/// Go's `schema.GroupVersionKind.String()`.
pub fn gvk(group: &str, version: &str, kind: &str) -> String {
    format!("{group}/{version}, Kind={kind}")
}

/// operator-registry's bundle format: an annotations file, with the required annotations
/// set to the values a registry+v1 bundle has.
fn format(bundle: &Bundle) -> Vec<Finding> {
    let Some(annotations) = &bundle.annotations else {
        let metadata_dir = bundle.dir.join(crate::bundle::METADATA_DIR);
        return vec![
            Finding::new(
                Level::Error,
                FORMAT,
                format!("could not find annotations file in {}", metadata_dir.display()),
            )
            .file(&metadata_dir),
        ];
    };
    let file = bundle.annotations_file.clone().unwrap_or_default();
    let mut out = required_annotations(annotations, &file);
    out.extend(annotation_values(annotations, &file));
    out.extend(default_channel_listed(annotations, &file));
    out
}

/// The annotations every bundle has, with a value.
fn required_annotations(annotations: &AnnotationsFile, file: &Path) -> Vec<Finding> {
    let mut out = Vec::new();
    for key in [
        annotations::MEDIATYPE,
        annotations::MANIFESTS,
        annotations::METADATA,
        annotations::PACKAGE,
        annotations::CHANNELS,
    ] {
        match annotations.annotations.get(key) {
            None => out
                .push(Finding::new(Level::Error, FORMAT, format!("Missing annotation {key:?}")).field(key).file(file)),
            Some(v) if v.trim().is_empty() => out.push(
                Finding::new(Level::Error, FORMAT, format!("Expecting annotation {key:?} to have non-empty value"))
                    .field(key)
                    .file(file),
            ),
            Some(_) => {}
        }
    }
    out
}

/// The media type is registry+v1 and the manifests and metadata directories are where it
/// puts them.
fn annotation_values(annotations: &AnnotationsFile, file: &Path) -> Vec<Finding> {
    let mut out = Vec::new();
    let mediatype = annotations.get(annotations::MEDIATYPE);
    if !mediatype.is_empty() && mediatype != REGISTRY_V1 {
        out.push(
            Finding::new(
                Level::Error,
                FORMAT,
                format!(
                    "Expecting annotation {:?} to have value {REGISTRY_V1:?} instead of {mediatype:?}",
                    annotations::MEDIATYPE
                ),
            )
            .field(annotations::MEDIATYPE)
            .file(file),
        );
    }
    for (key, dir) in [(annotations::MANIFESTS, "manifests/"), (annotations::METADATA, "metadata/")] {
        let value = annotations.get(key);
        if !value.is_empty() && value.trim_end_matches('/') != dir.trim_end_matches('/') {
            out.push(
                Finding::new(
                    Level::Error,
                    FORMAT,
                    format!("Expecting annotation {key:?} to have value {dir:?} instead of {value:?}"),
                )
                .field(key)
                .file(file),
            );
        }
    }
    out
}

/// The default channel is one of the channels.
fn default_channel_listed(annotations: &AnnotationsFile, file: &Path) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(default) = annotations.default_channel()
        && !annotations.channels().iter().any(|c| c == default)
    {
        out.push(
            Finding::new(
                Level::Error,
                FORMAT,
                format!(
                    "The channel list {:?} doesn't contain the default channel {default:?}",
                    annotations.get(annotations::CHANNELS)
                ),
            )
            .field(annotations::DEFAULT_CHANNEL)
            .file(file),
        );
    }
    out
}

fn objects(bundle: &Bundle) -> Vec<Finding> {
    let mut out = Vec::new();
    for object in &bundle.objects {
        let (group, version) = object.api_version().split_once('/').unwrap_or(("", object.api_version()));
        if !SUPPORTED_KINDS.contains(&object.kind()) {
            out.push(
                Finding::new(
                    Level::Error,
                    BUNDLE_NOT_VALID,
                    format!("unsupported media type {REGISTRY_V1} for bundle object"),
                )
                .value(gvk(group, version, object.kind()))
                .file(&object.file),
            );
        } else if object.name().is_empty() {
            out.push(
                Finding::new(Level::Error, "ValidationFailed", "metadata.name: Required value: name is required")
                    .value("")
                    .field("metadata.name")
                    .file(&object.file),
            );
        }
    }
    out
}

/// The BundleValidator, one check per rule in operator-framework's order.
fn bundle_validator(bundle: &Bundle) -> Vec<Finding> {
    const CHECKS: [fn(&Bundle) -> Vec<Finding>; 4] =
        [bundle_owned_crds, bundle_service_accounts, bundle_size_limit, bundle_related_images];
    CHECKS.iter().flat_map(|check| check(bundle)).collect()
}

/// Owned CRDs present, no CRD version given twice, and no CRD present but not owned.
fn bundle_owned_crds(bundle: &Bundle) -> Vec<Finding> {
    let mut out = Vec::new();
    let csv = &bundle.csv;
    let name = bundle.csv.name();
    let csv_file = &bundle.csv_file;
    let mut keys: Vec<(String, String, String, std::path::PathBuf)> = Vec::new();
    for crd in &bundle.crds {
        for v in &crd.versions {
            let key = (crd.group.clone(), v.name.clone(), crd.kind.clone(), crd.file.clone());
            if keys.iter().any(|k| (&k.0, &k.1, &k.2) == (&key.0, &key.1, &key.2)) {
                let g = gvk(&key.0, &key.1, &key.2);
                out.push(
                    Finding::new(Level::Error, BUNDLE_NOT_VALID, format!("duplicate CRD {g:?} in bundle {name:?}"))
                        .value(g.clone())
                        .file(&crd.file),
                );
            }
            keys.push(key);
        }
    }
    let mut owned_group_kinds = BTreeSet::new();
    for owned in &csv.spec.customresourcedefinitions.owned {
        let group = owned.name.split_once('.').map_or(owned.name.as_str(), |(_, g)| g);
        let g = gvk(group, &owned.version, &owned.kind);
        if let Some(i) = keys.iter().position(|k| k.0 == group && k.1 == owned.version && k.2 == owned.kind) {
            keys.remove(i);
            owned_group_kinds.insert((group.to_string(), owned.kind.clone()));
        } else {
            out.push(
                Finding::new(Level::Error, BUNDLE_NOT_VALID, format!("owned CRD {g:?} not found in bundle {name:?}"))
                    .value(g)
                    .field("spec.customresourcedefinitions.owned")
                    .file(csv_file),
            );
        }
    }
    for (group, version, kind, file) in keys {
        if owned_group_kinds.contains(&(group.clone(), kind.clone())) {
            continue;
        }
        let g = gvk(&group, &version, &kind);
        out.push(
            Finding::new(
                Level::Error,
                BUNDLE_NOT_VALID,
                format!("CRD {g:?} is present in bundle {name:?} but not defined in CSV"),
            )
            .value(g)
            .file(&file),
        );
    }
    out
}

/// No ServiceAccount manifest has the name of one the CSV's Deployments already use.
fn bundle_service_accounts(bundle: &Bundle) -> Vec<Finding> {
    let mut out = Vec::new();
    let csv = &bundle.csv;
    let accounts: BTreeSet<String> = csv
        .spec
        .install
        .spec
        .deployments
        .iter()
        .map(|d| d.spec.template.spec.as_ref().and_then(|p| p.service_account_name.clone()).unwrap_or_default())
        .collect();
    for object in bundle.objects.iter().filter(|o| o.kind() == "ServiceAccount" && o.api_version() == "v1") {
        if accounts.contains(object.name()) {
            out.push(
                Finding::new(
                    Level::Error,
                    BUNDLE_NOT_VALID,
                    format!(
                        "invalid service account found in bundle. This service account {0} in your bundle is not valid, because a service account with the same name was already specified in your CSV. If this was unintentional, please remove the service account manifest from your bundle. If it was intentional to specify a separate service account, please rename the SA in either the bundle manifest or the CSV.",
                        object.name()
                    ),
                )
                .value(object.name())
                .file(&object.file),
            );
        }
    }
    out
}

/// The bundle, gzipped, stays under the size a catalog can hold (a warning near it).
fn bundle_size_limit(bundle: &Bundle) -> Vec<Finding> {
    let mut out = Vec::new();
    let name = bundle.csv.name();
    if !bundle.manifests_dir.as_os_str().is_empty() {
        let (size, compressed) = bundle_size(&bundle.dir);
        let (size_text, compressed_text, max_text) = (bytes(size), bytes(compressed), bytes(MAX_BUNDLE_SIZE));
        if compressed > MAX_BUNDLE_SIZE {
            out.push(Finding::new(Level::Error, BUNDLE_NOT_VALID, format!("maximum bundle compressed size with gzip size exceeded: size=~{compressed_text} , max={max_text}. Bundle uncompressed size is {size_text}")).value(name));
        } else if compressed as f64 > MAX_BUNDLE_SIZE as f64 * 0.85 {
            out.push(Finding::new(Level::Warning, BUNDLE_NOT_VALID, format!("nearing maximum bundle compressed size with gzip: size=~{compressed_text} , max={max_text}. Bundle uncompressed size is {size_text}")).value(name));
        }
    }
    out
}

/// Every related image has a valid pull spec.
fn bundle_related_images(bundle: &Bundle) -> Vec<Finding> {
    let mut out = Vec::new();
    let csv = &bundle.csv;
    let csv_file = &bundle.csv_file;
    for (i, image) in csv.spec.related_images.iter().enumerate() {
        if image.image.is_empty() {
            out.push(
                Finding::new(Level::Error, BUNDLE_NOT_VALID, format!("relatedImages[{i}] has an empty image field"))
                    .value(format!("spec.relatedImages[{i}].image"))
                    .file(csv_file),
            );
        } else if image
            .image
            .chars()
            .any(|c| c.is_whitespace() || c.is_ascii_uppercase() && !image.image.contains(['@', ':']))
        {
            out.push(
                Finding::new(
                    Level::Error,
                    BUNDLE_NOT_VALID,
                    format!(
                        "relatedImages[{i}] has an invalid image pullspec {:?}: invalid reference format",
                        image.image
                    ),
                )
                .value(format!("spec.relatedImages[{i}].image"))
                .file(csv_file),
            );
        }
    }
    out
}

/// The bundle's size and its size gzipped then base64-encoded, file by file, as
/// operator-framework measures it.
fn bundle_size(dir: &std::path::Path) -> (u64, u64) {
    let mut size = 0u64;
    let mut compressed = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(data) = std::fs::read(&path) {
                size += data.len() as u64;
                let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                let gz = encoder.write_all(&data).and_then(|_| encoder.finish()).map(|v| v.len() as u64).unwrap_or(0);
                compressed += gz.div_ceil(3) * 4;
            }
        }
    }
    (size, compressed)
}

/// operator-framework's `formatBytesInUnit`.
fn bytes(b: u64) -> String {
    const UNIT: u64 = 1000;
    if b < UNIT {
        return format!("{b} B");
    }
    let (mut div, mut exp) = (UNIT, 0usize);
    let mut n = b / UNIT;
    while n >= UNIT {
        div *= UNIT;
        exp += 1;
        n /= UNIT;
    }
    format!("{:.1} {}B", b as f64 / div as f64, "kMGTPE".as_bytes()[exp] as char)
}

/// kube's `IsDNS1123Subdomain` and `IsValidLabelValue` messages for `name`.
fn name_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let subdomain_ok = !name.is_empty()
        && name.split('.').all(|part| {
            !part.is_empty()
                && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
    if name.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !subdomain_ok {
        errs.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string());
    }
    if name.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let label_ok = name.is_empty()
        || (name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && name.chars().last().is_some_and(|c| c.is_ascii_alphanumeric()));
    if !label_ok {
        errs.push("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string());
    }
    errs
}

/// The ClusterServiceVersionValidator, one check per rule in operator-framework's order.
fn csv_validator(bundle: &Bundle) -> Vec<Finding> {
    const CHECKS: [fn(&Bundle) -> Vec<Finding>; 7] = [
        csv_names,
        csv_examples,
        csv_install_modes,
        csv_min_kube_version,
        csv_required_fields,
        csv_annotation_names,
        csv_type_meta,
    ];
    CHECKS.iter().flat_map(|check| check(bundle)).collect()
}

/// A `CSVFileNotValid` finding about the bundle's CSV, worded `(<csv name>) <detail>`.
fn csv_invalid(bundle: &Bundle, level: Level, detail: String) -> Finding {
    Finding::new(level, CSV_NOT_VALID, format!("({}) {detail}", bundle.csv.name())).value("").file(&bundle.csv_file)
}

/// `metadata.name` and `spec.replaces` are DNS-1123 subdomains and label values.
fn csv_names(bundle: &Bundle) -> Vec<Finding> {
    let csv = &bundle.csv;
    let name = csv.name();
    let mut out = Vec::new();
    let errs = name_errors(name);
    if !errs.is_empty() {
        out.push(
            csv_invalid(bundle, Level::Error, format!("metadata.name {name:?} is invalid: {}", errs.join(",")))
                .field("metadata.name"),
        );
    }
    if !csv.spec.replaces.is_empty() {
        let errs = name_errors(&csv.spec.replaces);
        if !errs.is_empty() {
            out.push(
                csv_invalid(
                    bundle,
                    Level::Error,
                    format!("spec.replaces {:?} is invalid: {}", csv.spec.replaces, errs.join(",")),
                )
                .field("spec.replaces"),
            );
        }
    }
    out
}

/// The CSV has annotations, among them `alm-examples` (or `olm.examples`), which are valid.
fn csv_examples(bundle: &Bundle) -> Vec<Finding> {
    let annotations = bundle.csv.metadata.annotations.clone().unwrap_or_default();
    if annotations.is_empty() {
        return vec![csv_invalid(bundle, Level::Warning, "annotations not found".into()).field("metadata.annotations")];
    }
    let mut out = Vec::new();
    match (annotations.get("alm-examples"), annotations.get("olm.examples")) {
        (None, None) => out.push(
            csv_invalid(bundle, Level::Warning, "example annotations not found".into()).field("metadata.annotations"),
        ),
        (alm, olm) => {
            if alm.is_some() && olm.is_some() {
                out.push(csv_invalid(
                    bundle,
                    Level::Warning,
                    "both `alm-examples` and `olm.examples` are present. Checking only `alm-examples`".into(),
                ));
            }
            let text = alm.or(olm).cloned().unwrap_or_default();
            out.extend(examples(bundle, &text));
        }
    }
    out
}

/// Install modes are given, of known types, one at least supported, and only
/// AllNamespaces when the webhooks convert CRDs.
fn csv_install_modes(bundle: &Bundle) -> Vec<Finding> {
    let spec = &bundle.csv.spec;
    let invalid = |detail: String| csv_invalid(bundle, Level::Error, detail).field("spec.installModes");
    if spec.install_modes.is_empty() {
        return vec![invalid("install modes not found".into())];
    }
    let mut out = Vec::new();
    for mode in &spec.install_modes {
        if !INSTALL_MODE_TYPES.contains(&mode.mode_type.as_str()) {
            out.push(invalid(format!(
                "install mode type {:?} is not one of {}",
                mode.mode_type,
                INSTALL_MODE_TYPES.join(", ")
            )));
        }
    }
    if spec.webhookdefinitions.iter().any(|w| !w.conversion_crds.is_empty()) {
        let only_all =
            spec.install_modes.iter().all(|m| if m.mode_type == "AllNamespaces" { m.supported } else { !m.supported });
        if !only_all {
            out.push(invalid("only AllNamespaces InstallModeType is supported when conversionCRDs is present".into()));
        }
    }
    if !spec.install_modes.iter().any(|m| m.supported) {
        out.push(invalid("none of InstallModeTypes are supported".into()));
    }
    out
}

/// `spec.minKubeVersion` is given (a warning otherwise) and is a semantic version.
fn csv_min_kube_version(bundle: &Bundle) -> Vec<Finding> {
    let version = &bundle.csv.spec.min_kube_version;
    if version.trim().is_empty() {
        vec![csv_invalid(bundle, Level::Warning, MIN_KUBE_VERSION_WARNING.into()).field("spec.minKubeVersion")]
    } else if !is_semver(version) {
        vec![
            csv_invalid(bundle, Level::Error, format!("csv.Spec.MinKubeVersion has an invalid value: {version}"))
                .field("spec.minKubeVersion"),
        ]
    } else {
        Vec::new()
    }
}

/// Required fields (operator-framework's checkEmptyFields over the Go struct).
fn csv_required_fields(bundle: &Bundle) -> Vec<Finding> {
    let csv = &bundle.csv;
    let raw = &bundle.csv_object;
    let missing = |field: &str, what: &str| {
        Finding::new(Level::Error, "FieldNotFound", "required field missing")
            .go_field(field)
            .value(what)
            .file(&bundle.csv_file)
    };
    let mut out = Vec::new();
    if raw.get("apiVersion").is_none() && raw.get("kind").is_none() {
        out.push(missing("TypeMeta", "struct"));
    }
    if raw.get("spec").is_none_or(|s| s.as_object().is_none_or(|m| m.is_empty())) {
        out.push(missing("Spec", "struct"));
        return out;
    }
    let install = raw.pointer("/spec/install");
    if install.is_none_or(|i| i.as_object().is_none_or(|m| m.is_empty())) {
        out.push(missing("Spec.InstallStrategy", "struct"));
    } else {
        if csv.spec.install.strategy.is_empty() {
            out.push(missing("Spec.InstallStrategy.StrategyName", "field"));
        }
        if raw.pointer("/spec/install/spec").is_some_and(|s| s.as_object().is_some_and(|m| !m.is_empty()))
            && raw.pointer("/spec/install/spec/deployments").is_none_or(Value::is_null)
        {
            out.push(missing("Spec.InstallStrategy.StrategySpec.DeploymentSpecs", "field"));
        }
    }
    if csv.spec.display_name.is_empty() {
        out.push(missing("Spec.DisplayName", "field"));
    }
    out
}

/// OLM's case-sensitive annotations are spelt right; `olm.properties` is not used.
fn csv_annotation_names(bundle: &Bundle) -> Vec<Finding> {
    const CASE_SENSITIVE: [&str; 5] =
        ["olm.operatorGroup", "olm.operatorNamespace", "olm.targetNamespaces", "olm.providedAPIs", "olm.skipRange"];
    let file = &bundle.csv_file;
    let annotations = bundle.csv.metadata.annotations.clone().unwrap_or_default();
    let mut out = Vec::new();
    for key in annotations.keys() {
        if let Some(known) = CASE_SENSITIVE.iter().find(|k| k.eq_ignore_ascii_case(key))
            && key != known
        {
            out.push(
                Finding::new(
                    Level::Error,
                    "ValidationFailed",
                    format!("provided annotation {key} uses wrong case and should be {known} instead"),
                )
                .value(bundle.csv.name())
                .field("metadata.annotations")
                .file(file),
            );
        }
        if key == "olm.properties" {
            out.push(
                Finding::new(Level::Warning, "PropertiesAnnotationUsed", "found olm.properties annotation, please define these properties in metadata/properties.yaml instead")
                    .value("")
                    .file(file),
            );
        }
    }
    out
}

/// The CSV names its `apiVersion` and `kind`.
fn csv_type_meta(bundle: &Bundle) -> Vec<Finding> {
    let mut out = Vec::new();
    if bundle.csv.api_version.is_empty() {
        out.push(csv_invalid(bundle, Level::Error, "'apiVersion' is missing".into()).field("apiVersion"));
    }
    if bundle.csv.kind.is_empty() {
        out.push(csv_invalid(bundle, Level::Error, "'kind' is missing".into()).field("kind"));
    }
    out
}

/// `alm-examples`: JSON, each example of a provided API, each provided API with one.
fn examples(bundle: &Bundle, text: &str) -> Vec<Finding> {
    let file = &bundle.csv_file;
    let mut out = Vec::new();
    if text.trim().is_empty() {
        return out;
    }
    let parsed: Vec<Value> = match serde_json::from_str::<Vec<Value>>(text) {
        Ok(v) => v,
        Err(e) => {
            out.push(
                Finding::new(Level::Error, "ParseError", "invalid example")
                    .value(e.to_string())
                    .field("metadata.annotations.alm-examples")
                    .file(file),
            );
            return out;
        }
    };
    let mut examples = BTreeSet::new();
    for example in &parsed {
        let api_version = example.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = example.get("kind").and_then(Value::as_str).unwrap_or_default();
        examples.insert((group.to_string(), version.to_string(), kind.to_string()));
    }
    let mut provided = BTreeSet::new();
    for owned in &bundle.csv.spec.customresourcedefinitions.owned {
        match owned.name.split_once('.') {
            Some((_, group)) => {
                provided.insert((group.to_string(), owned.version.clone(), owned.kind.clone()));
            }
            None => out.push(
                Finding::new(
                    Level::Error,
                    "ParseError",
                    format!("couldn't parse plural.group from crd name: {}", owned.name),
                )
                .value("<nil>")
                .file(file),
            ),
        }
    }
    for api in &bundle.csv.spec.apiservicedefinitions.owned {
        provided.insert((api.group.clone(), api.version.clone(), api.kind.clone()));
    }
    for (g, v, k) in &examples {
        if !provided.contains(&(g.clone(), v.clone(), k.clone())) {
            out.push(
                Finding::new(Level::Error, "OperationFailed", "example must have a provided API")
                    .value(gvk(g, v, k))
                    .field("metadata.annotations.alm-examples")
                    .file(file),
            );
        }
    }
    for (g, v, k) in &provided {
        if !examples.contains(&(g.clone(), v.clone(), k.clone())) {
            out.push(
                Finding::new(Level::Warning, "OperationFailed", "provided API should have an example annotation")
                    .value(gvk(g, v, k))
                    .field("metadata.annotations.alm-examples")
                    .file(file),
            );
        }
    }
    out
}

/// The parts of kube's CRD validation that operator-framework reports (not the schema's).
fn crd_validator(bundle: &Bundle) -> Vec<Finding> {
    let mut out = Vec::new();
    for crd in &bundle.crds {
        let invalid = |field: &str, value: &str, detail: String| {
            Finding::new(Level::Error, "FieldValueInvalid", format!("{field}: Invalid value: {value:?}: {detail}"))
                .go_field(field)
                .value(value)
                .file(&crd.file)
        };
        let required = |field: &str| {
            Finding::new(Level::Error, "FieldValueRequired", format!("{field}: Required value"))
                .go_field(field)
                .value("")
                .file(&crd.file)
        };
        if crd.group.is_empty() {
            out.push(required("spec.group"));
        }
        if crd.plural.is_empty() {
            out.push(required("spec.names.plural"));
        }
        if crd.kind.is_empty() {
            out.push(required("spec.names.kind"));
        }
        if !crd.group.is_empty() && !crd.plural.is_empty() && crd.name != format!("{}.{}", crd.plural, crd.group) {
            out.push(invalid("metadata.name", &crd.name, "must be spec.names.plural+\".\"+spec.group".into()));
        }
        if !matches!(crd.scope.as_str(), "Namespaced" | "Cluster") {
            out.push(if crd.scope.is_empty() {
                required("spec.scope")
            } else {
                Finding::new(
                    Level::Error,
                    "FieldValueNotSupported",
                    format!(
                        "spec.scope: Unsupported value: {:?}: supported values: \"Cluster\", \"Namespaced\"",
                        crd.scope
                    ),
                )
                .go_field("spec.scope")
                .value(crd.scope.clone())
                .file(&crd.file)
            });
        }
        if crd.versions.is_empty() {
            out.push(required("spec.versions"));
        } else {
            let storage = crd.versions.iter().filter(|v| v.storage).count();
            if storage != 1 {
                out.push(
                    Finding::new(Level::Error, "FieldValueInvalid", "spec.versions: Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: must have exactly one version marked as storage version")
                        .go_field("spec.versions")
                        .value("[]apiextensions.CustomResourceDefinitionVersion{...}")
                        .file(&crd.file),
                );
            }
        }
    }
    out
}

/// What OLM checks of `spec.webhookdefinitions` before it installs a CSV.
fn webhook_definitions(bundle: &Bundle) -> Vec<Finding> {
    let csv = &bundle.csv;
    let file = &bundle.csv_file;
    let deployments: BTreeSet<&str> = csv.spec.install.spec.deployments.iter().map(|d| d.name.as_str()).collect();
    let owned: BTreeSet<&str> = csv.spec.customresourcedefinitions.owned.iter().map(|d| d.name.as_str()).collect();
    let mut out = Vec::new();
    for (i, w) in csv.spec.webhookdefinitions.iter().enumerate() {
        let field = |f: &str| format!("spec.webhookdefinitions[{i}].{f}");
        let bad = |f: &str, detail: String| {
            Finding::new(Level::Error, CSV_NOT_VALID, format!("({}) {detail}", csv.name()))
                .field(field(f))
                .value(w.generate_name.clone())
                .file(file)
        };
        if w.generate_name.is_empty() || !name_errors(&w.generate_name).iter().all(|e| e.contains("63 characters")) {
            out.push(bad(
                "generateName",
                format!("webhook generateName {:?} must be a DNS subdomain", w.generate_name),
            ));
        }
        match w.webhook_type.as_str() {
            "ValidatingAdmissionWebhook" | "MutatingAdmissionWebhook" => {
                match w.side_effects.as_deref() {
                    Some("None") | Some("NoneOnDryRun") => {}
                    other => out.push(bad(
                        "sideEffects",
                        format!("webhook {} has sideEffects {:?}: must be None or NoneOnDryRun", w.generate_name, other.unwrap_or_default()),
                    )),
                }
                if w.admission_review_versions.is_empty() {
                    out.push(bad("admissionReviewVersions", format!("webhook {} has no admissionReviewVersions", w.generate_name)));
                }
            }
            "ConversionWebhook" => {
                for crd in &w.conversion_crds {
                    if !owned.contains(crd.as_str()) {
                        out.push(bad("conversionCRDs", format!("conversion webhook {} converts CRD {crd} which the CSV does not own", w.generate_name)));
                    }
                }
                if w.conversion_crds.is_empty() {
                    out.push(bad("conversionCRDs", format!("conversion webhook {} lists no conversionCRDs", w.generate_name)));
                }
            }
            other => out.push(bad(
                "type",
                format!("webhook {} has type {other:?}: must be ValidatingAdmissionWebhook, MutatingAdmissionWebhook or ConversionWebhook", w.generate_name),
            )),
        }
        if !deployments.contains(w.deployment_name.as_str()) {
            out.push(bad(
                "deploymentName",
                format!(
                    "webhook {} names deployment {:?}, which is not in the install strategy",
                    w.generate_name, w.deployment_name
                ),
            ));
        }
    }
    out
}
