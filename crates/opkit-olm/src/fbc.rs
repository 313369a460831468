//! File-based catalogs (FBC), as `opm` writes and serves them: `olm.package`, `olm.channel`
//! (entries with `replaces`, `skips` and `skipRange`) and `olm.bundle` documents (properties
//! `olm.package`, `olm.gvk`, `olm.gvk.required`, `olm.package.required` and
//! `olm.bundle.object`, which carries each manifest, so a catalog installs without images).
//! A catalog is read from a directory (JSON streams or YAML, recursively), from a
//! ConfigMap (plain or gzipped keys), or rendered from bundle directories; [`Catalog::validate`]
//! checks it as `opm validate` does.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::OlmError;
use crate::semver_range::{Range, parse_version};

/// The schema of package documents.
pub const SCHEMA_PACKAGE: &str = "olm.package";
/// The schema of channel documents.
pub const SCHEMA_CHANNEL: &str = "olm.channel";
/// The schema of bundle documents.
pub const SCHEMA_BUNDLE: &str = "olm.bundle";
/// The CSV annotation holding a bundle's skip range.
pub const SKIP_RANGE_ANNOTATION: &str = "olm.skipRange";
/// The ConfigMap `binaryData` key a gzipped catalog ([`Catalog::to_gzip`]) is stored under.
pub const CONFIG_MAP_KEY: &str = "catalog.json.gz";

/// How an FBC JSON stream (as `opm render` writes it) starts; anything else is read as YAML.
const JSON_STREAM_START: char = '{';

/// A package.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    /// Always `olm.package`.
    pub schema: String,
    /// The package's name.
    pub name: String,
    /// The channel a subscription without one follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_channel: Option<String>,
    /// A description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A channel: an upgrade graph over some of a package's bundles.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Channel {
    /// Always `olm.channel`.
    pub schema: String,
    /// The package.
    pub package: String,
    /// The channel's name.
    pub name: String,
    /// The bundles in it, with their edges.
    #[serde(default)]
    pub entries: Vec<Entry>,
}

/// One bundle in a channel and what it upgrades from.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The bundle (CSV) name.
    pub name: String,
    /// The bundle it replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// Bundles it may replace directly, skipping them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skips: Vec<String>,
    /// Versions it may replace directly (a semver range).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_range: Option<String>,
}

/// A bundle: one operator version.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Bundle {
    /// Always `olm.bundle`.
    pub schema: String,
    /// The bundle (CSV) name.
    pub name: String,
    /// The package.
    pub package: String,
    /// The bundle image (empty for bundles rendered from directories).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    /// Its properties.
    #[serde(default)]
    pub properties: Vec<Property>,
}

/// A typed property of a bundle.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Property {
    /// `olm.package`, `olm.gvk`, `olm.bundle.object`, ...
    #[serde(rename = "type")]
    pub type_: String,
    /// The value.
    pub value: Value,
}

/// A group/version/kind an operator provides or requires.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gvk {
    /// The group.
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind.
    pub kind: String,
}

impl std::fmt::Display for Gvk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.group, self.version, self.kind)
    }
}

impl Bundle {
    /// The values of the properties of type `type_`.
    pub fn properties_of<'a>(&'a self, type_: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.properties.iter().filter(move |p| p.type_ == type_).map(|p| &p.value)
    }

    /// The bundle's version (its `olm.package` property).
    pub fn version(&self) -> Option<semver::Version> {
        self.properties_of("olm.package").find_map(|v| v.get("version").and_then(Value::as_str)).and_then(parse_version)
    }

    /// The APIs it provides (`olm.gvk`).
    pub fn provided_gvks(&self) -> Vec<Gvk> {
        self.properties_of("olm.gvk").filter_map(gvk_of).collect()
    }

    /// The APIs it requires (`olm.gvk.required`).
    pub fn required_gvks(&self) -> Vec<Gvk> {
        self.properties_of("olm.gvk.required").filter_map(gvk_of).collect()
    }

    /// The packages it requires, with their version ranges (`olm.package.required`).
    pub fn required_packages(&self) -> Vec<(String, String)> {
        self.properties_of("olm.package.required")
            .filter_map(|v| {
                Some((
                    v.get("packageName")?.as_str()?.to_string(),
                    v.get("versionRange").and_then(Value::as_str).unwrap_or(">=0.0.0").to_string(),
                ))
            })
            .collect()
    }

    /// The manifests it carries (`olm.bundle.object`), the CSV among them.
    pub fn objects(&self) -> Result<Vec<Value>, OlmError> {
        let bad = |message: String| OlmError::Catalog(format!("bundle {}: {message}", self.name));
        self.properties_of("olm.bundle.object")
            .map(|v| {
                let data =
                    v.get("data").and_then(Value::as_str).ok_or_else(|| bad("olm.bundle.object has no data".into()))?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .map_err(|e| bad(format!("olm.bundle.object is not base64: {e}")))?;
                serde_json::from_slice(&bytes).map_err(|e| bad(format!("olm.bundle.object is not JSON: {e}")))
            })
            .collect()
    }

    /// The CSV among its objects.
    pub fn csv(&self) -> Result<Value, OlmError> {
        self.objects()?
            .into_iter()
            .find(|o| o.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion"))
            .ok_or_else(|| OlmError::Catalog(format!("bundle {} carries no ClusterServiceVersion", self.name)))
    }
}

fn gvk_of(v: &Value) -> Option<Gvk> {
    Some(Gvk {
        group: v.get("group")?.as_str()?.to_string(),
        version: v.get("version")?.as_str()?.to_string(),
        kind: v.get("kind")?.as_str()?.to_string(),
    })
}

/// A whole catalog.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// The packages.
    pub packages: Vec<Package>,
    /// The channels.
    pub channels: Vec<Channel>,
    /// The bundles.
    pub bundles: Vec<Bundle>,
}

impl Catalog {
    /// Reads the FBC documents of `text` (a JSON stream, as `opm render` writes, or
    /// multi-document YAML) into the catalog; documents of other schemas are ignored, as
    /// opm ignores them.
    pub fn add_text(&mut self, text: &str, origin: &str) -> Result<(), OlmError> {
        let bad = |message: String| OlmError::Catalog(format!("{origin}: {message}"));
        let docs: Vec<Value> = if text.trim_start().starts_with(JSON_STREAM_START) {
            serde_json::Deserializer::from_str(text)
                .into_iter::<Value>()
                .collect::<Result<_, _>>()
                .map_err(|e| bad(e.to_string()))?
        } else {
            serde_saphyr::from_multiple(text).map_err(|e| bad(e.to_string()))?
        };
        for doc in docs {
            match doc.get("schema").and_then(Value::as_str) {
                Some(SCHEMA_PACKAGE) => {
                    self.packages.push(serde_json::from_value(doc).map_err(|e| bad(e.to_string()))?)
                }
                Some(SCHEMA_CHANNEL) => {
                    self.channels.push(serde_json::from_value(doc).map_err(|e| bad(e.to_string()))?)
                }
                Some(SCHEMA_BUNDLE) => self.bundles.push(serde_json::from_value(doc).map_err(|e| bad(e.to_string()))?),
                _ => {}
            }
        }
        Ok(())
    }

    /// Reads every `.json`, `.yaml` and `.yml` file under `dir`.
    pub fn load_dir(dir: &Path) -> Result<Catalog, OlmError> {
        let mut files = Vec::new();
        collect_files(dir, &mut files)?;
        files.sort();
        let mut catalog = Catalog::default();
        for file in files {
            let text =
                std::fs::read_to_string(&file).map_err(|source| OlmError::Read { path: file.clone(), source })?;
            catalog.add_text(&text, &file.display().to_string())?;
        }
        Ok(catalog)
    }

    /// Reads a catalog stored in a ConfigMap's `data` (plain FBC text per key) and
    /// `binaryData` (base64 of gzipped FBC text per key).
    pub fn from_config_map(
        data: &BTreeMap<String, String>,
        binary_data: &BTreeMap<String, Vec<u8>>,
        origin: &str,
    ) -> Result<Catalog, OlmError> {
        let mut catalog = Catalog::default();
        for (key, text) in data {
            catalog.add_text(text, &format!("{origin} key {key}"))?;
        }
        for (key, bytes) in binary_data {
            let mut text = String::new();
            flate2::read::GzDecoder::new(bytes.as_slice())
                .read_to_string(&mut text)
                .map_err(|e| OlmError::Catalog(format!("{origin} key {key}: not gzipped FBC: {e}")))?;
            catalog.add_text(&text, &format!("{origin} key {key}"))?;
        }
        Ok(catalog)
    }

    /// The catalog gzipped, for a ConfigMap's `binaryData` under [`CONFIG_MAP_KEY`].
    pub fn to_gzip(&self) -> Result<Vec<u8>, OlmError> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(self.to_json_stream().as_bytes()).map_err(|e| OlmError::Catalog(e.to_string()))?;
        encoder.finish().map_err(|e| OlmError::Catalog(e.to_string()))
    }

    /// Every document, in opm's order (package, its channels, its bundles).
    pub fn documents(&self) -> Vec<Value> {
        let mut docs = Vec::new();
        let mut names: BTreeSet<&str> = self.packages.iter().map(|p| p.name.as_str()).collect();
        names.extend(self.bundles.iter().map(|b| b.package.as_str()));
        for name in names {
            docs.extend(self.packages.iter().filter(|p| p.name == name).map(|p| json!(p)));
            docs.extend(self.channels.iter().filter(|c| c.package == name).map(|c| json!(c)));
            docs.extend(self.bundles.iter().filter(|b| b.package == name).map(|b| json!(b)));
        }
        docs
    }

    /// The catalog as `opm render` prints it: indented JSON documents one after another.
    pub fn to_json_stream(&self) -> String {
        let mut out = Vec::new();
        for doc in self.documents() {
            let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
            let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
            if doc.serialize(&mut ser).is_ok() {
                out.push(b'\n');
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Renders the catalog of some bundle directories, as `run bundle` builds one: a
    /// package per bundle package, a channel per channel the bundles name (entries from
    /// each CSV's `replaces`, `skips` and `olm.skipRange`) and a bundle per directory.
    pub fn from_bundles(bundles: &[opkit_olm_bundle::Bundle]) -> Result<Catalog, OlmError> {
        let mut catalog = Catalog::default();
        for bundle in bundles {
            let name = csv_name(bundle)?.to_string();
            let package = package_of(bundle)?.to_string();
            if catalog.bundles.iter().any(|b| b.name == name) {
                return Err(OlmError::Catalog(format!("bundle {name} is given twice")));
            }
            if !catalog.packages.iter().any(|p| p.name == package) {
                catalog.packages.push(Package {
                    schema: SCHEMA_PACKAGE.into(),
                    name: package.clone(),
                    default_channel: None,
                    description: None,
                });
            }
            let annotated_default = bundle.annotations.as_ref().and_then(|a| a.default_channel());
            if let (Some(default), Some(p)) =
                (annotated_default, catalog.packages.iter_mut().find(|p| p.name == package))
            {
                p.default_channel = Some(default.to_string());
            }
            let spec = &bundle.csv.spec;
            let entry = Entry {
                name: name.clone(),
                replaces: Some(spec.replaces.clone()).filter(|r| !r.is_empty()),
                skips: spec.skips.clone(),
                skip_range: bundle
                    .csv
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(SKIP_RANGE_ANNOTATION))
                    .cloned(),
            };
            for channel in channels_of(bundle)? {
                match catalog.channels.iter_mut().find(|c| c.package == package && c.name == channel) {
                    Some(c) => c.entries.push(entry.clone()),
                    None => catalog.channels.push(Channel {
                        schema: SCHEMA_CHANNEL.into(),
                        package: package.clone(),
                        name: channel,
                        entries: vec![entry.clone()],
                    }),
                }
            }
            catalog.bundles.push(bundle_of(bundle)?);
        }
        for package in &mut catalog.packages {
            if package.default_channel.is_none() {
                let mut channels = catalog.channels.iter().filter(|c| c.package == package.name);
                if let (Some(only), None) = (channels.next(), channels.next()) {
                    package.default_channel = Some(only.name.clone());
                }
            }
        }
        Ok(catalog)
    }

    /// A package by name.
    pub fn package(&self, name: &str) -> Option<&Package> {
        self.packages.iter().find(|p| p.name == name)
    }

    /// A channel of a package.
    pub fn channel(&self, package: &str, name: &str) -> Option<&Channel> {
        self.channels.iter().find(|c| c.package == package && c.name == name)
    }

    /// A bundle of a package by name.
    pub fn bundle(&self, package: &str, name: &str) -> Option<&Bundle> {
        self.bundles.iter().find(|b| b.package == package && b.name == name)
    }

    /// What is wrong with the catalog, as `opm validate` words it; empty when it is valid.
    pub fn validate(&self) -> Vec<String> {
        let mut errors = self.package_errors();
        errors.extend(self.channel_errors());
        errors.extend(self.bundle_errors());
        errors
    }

    /// Packages are unique and name a default channel they have.
    fn package_errors(&self) -> Vec<String> {
        let mut errors = Vec::new();
        let mut seen = BTreeSet::new();
        for package in &self.packages {
            if !seen.insert(package.name.as_str()) {
                errors.push(format!("package {:?}: duplicate package", package.name));
            }
            match &package.default_channel {
                None => errors.push(format!("package {:?}: default channel must be set", package.name)),
                Some(default) if self.channel(&package.name, default).is_none() => errors.push(format!(
                    "package {:?}: default channel {default:?} not found in channels list",
                    package.name
                )),
                Some(_) => {}
            }
        }
        errors
    }

    /// Channels belong to a package, list bundles of it with valid skip ranges, and have
    /// one head.
    fn channel_errors(&self) -> Vec<String> {
        let mut errors = Vec::new();
        for channel in &self.channels {
            let at = format!("package {:?}, channel {:?}", channel.package, channel.name);
            if self.package(&channel.package).is_none() {
                errors.push(format!("{at}: unknown package"));
            }
            if channel.entries.is_empty() {
                errors.push(format!("{at}: channel must contain at least one bundle"));
            }
            for entry in &channel.entries {
                if self.bundle(&channel.package, &entry.name).is_none() {
                    errors.push(format!("{at}: bundle {:?} not found in package", entry.name));
                }
                if let Some(range) = &entry.skip_range
                    && Range::parse(range).is_none()
                {
                    errors.push(format!("{at}: bundle {:?}: invalid skipRange {range:?}", entry.name));
                }
            }
            match heads(self, channel).len() {
                1 => {}
                0 => errors.push(format!("{at}: no channel head found in graph (a replaces cycle?)")),
                _ => errors.push(format!(
                    "{at}: multiple channel heads found in graph: {}",
                    heads(self, channel).iter().map(|e| e.name.as_str()).collect::<Vec<_>>().join(", ")
                )),
            }
        }
        errors
    }

    /// Bundles are unique, belong to a package they name in one `olm.package` property,
    /// carry readable objects and are in a channel.
    fn bundle_errors(&self) -> Vec<String> {
        let mut errors = Vec::new();
        let mut seen = BTreeSet::new();
        for bundle in &self.bundles {
            let at = format!("package {:?}, bundle {:?}", bundle.package, bundle.name);
            if !seen.insert((bundle.package.as_str(), bundle.name.as_str())) {
                errors.push(format!("{at}: duplicate bundle"));
            }
            if self.package(&bundle.package).is_none() {
                errors.push(format!("{at}: unknown package"));
            }
            let mut packages = bundle.properties_of("olm.package");
            match (packages.next(), packages.next()) {
                (Some(p), None) => {
                    if p.get("packageName").and_then(Value::as_str) != Some(bundle.package.as_str()) {
                        errors.push(format!("{at}: the olm.package property names another package"));
                    }
                    if bundle.version().is_none() {
                        errors.push(format!("{at}: the olm.package property has no valid version"));
                    }
                }
                (None, _) => errors.push(format!("{at}: must be exactly one property with type \"olm.package\"")),
                (Some(_), Some(_)) => {
                    errors.push(format!("{at}: must be exactly one property with type \"olm.package\""))
                }
            }
            if let Err(e) = bundle.objects() {
                errors.push(e.to_string());
            }
            if !self
                .channels
                .iter()
                .any(|c| c.package == bundle.package && c.entries.iter().any(|e| e.name == bundle.name))
            {
                errors.push(format!("{at}: bundle is not in any channel"));
            }
        }
        errors
    }
}

/// The entries of a channel that no other entry replaces, skips or covers with its
/// `skipRange`: its head(s).
pub fn heads<'a>(catalog: &Catalog, channel: &'a Channel) -> Vec<&'a Entry> {
    let version = |name: &str| catalog.bundle(&channel.package, name).and_then(Bundle::version);
    let replaced: BTreeSet<&str> = channel
        .entries
        .iter()
        .flat_map(|e| e.replaces.iter().map(String::as_str).chain(e.skips.iter().map(String::as_str)))
        .collect();
    let ranges: Vec<(&str, Range)> = channel
        .entries
        .iter()
        .filter_map(|e| Some((e.name.as_str(), e.skip_range.as_deref().and_then(Range::parse)?)))
        .collect();
    channel
        .entries
        .iter()
        .filter(|e| !replaced.contains(e.name.as_str()))
        .filter(|e| {
            let Some(v) = version(&e.name) else { return true };
            !ranges.iter().any(|(other, range)| *other != e.name && range.contains(&v))
        })
        .collect()
}

fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), OlmError> {
    let entries = std::fs::read_dir(dir).map_err(|source| OlmError::Read { path: dir.to_path_buf(), source })?;
    for entry in entries {
        let path = entry.map_err(|source| OlmError::Read { path: dir.to_path_buf(), source })?.path();
        if path.is_dir() {
            collect_files(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "json" || e == "yaml" || e == "yml") {
            files.push(path);
        }
    }
    Ok(())
}

/// The name of a bundle directory's CSV, which a catalog entry needs.
pub(crate) fn csv_name(bundle: &opkit_olm_bundle::Bundle) -> Result<&str, OlmError> {
    Some(bundle.csv.name())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| bundle_error(bundle, "the ClusterServiceVersion has no metadata.name"))
}

/// The package a bundle directory's `metadata/annotations.yaml` names.
pub fn package_of(bundle: &opkit_olm_bundle::Bundle) -> Result<&str, OlmError> {
    bundle.package().ok_or_else(|| {
        bundle_error(bundle, &format!("metadata/annotations.yaml has no {}", opkit_olm_bundle::annotations::PACKAGE))
    })
}

/// The channels a bundle directory's `metadata/annotations.yaml` names (at least one).
pub(crate) fn channels_of(bundle: &opkit_olm_bundle::Bundle) -> Result<Vec<String>, OlmError> {
    let channels = bundle.channels();
    if channels.is_empty() {
        return Err(bundle_error(
            bundle,
            &format!("metadata/annotations.yaml has no {}", opkit_olm_bundle::annotations::CHANNELS),
        ));
    }
    Ok(channels)
}

fn bundle_error(bundle: &opkit_olm_bundle::Bundle, message: &str) -> OlmError {
    OlmError::Bundle { path: bundle.dir.clone(), message: message.to_string() }
}

/// The `olm.bundle` document of a bundle directory: its properties and, as
/// `olm.bundle.object`s, its manifests as the bundle ships them (as `opm render` writes
/// them; the InstallPlan converts v1beta1 CRDs when it applies them).
fn bundle_of(bundle: &opkit_olm_bundle::Bundle) -> Result<Bundle, OlmError> {
    let csv = &bundle.csv;
    let name = csv_name(bundle)?.to_string();
    let package = package_of(bundle)?.to_string();
    let mut properties = vec![Property {
        type_: "olm.package".into(),
        value: json!({"packageName": package, "version": csv.spec.version}),
    }];
    let crd_gvk = |d: &opkit_olm_bundle::csv::CrdDescription| -> Option<Value> {
        let group = d.name.split_once('.').map(|(_, g)| g)?;
        if d.kind.is_empty() || d.version.is_empty() {
            return None;
        }
        Some(json!({"group": group, "kind": d.kind, "version": d.version}))
    };
    let described = &csv.spec.customresourcedefinitions;
    for (descriptions, type_) in [(&described.owned, "olm.gvk"), (&described.required, "olm.gvk.required")] {
        for value in descriptions.iter().filter_map(crd_gvk) {
            properties.push(Property { type_: type_.into(), value });
        }
    }
    for dependency in bundle.dependencies.iter().flat_map(|d| &d.dependencies) {
        let value = dependency.value.clone();
        match dependency.dependency_type.as_str() {
            "olm.gvk" => properties.push(Property { type_: "olm.gvk.required".into(), value }),
            "olm.package" => properties.push(Property {
                type_: "olm.package.required".into(),
                value: json!({"packageName": value.get("packageName"), "versionRange": value.get("version")}),
            }),
            _ => {}
        }
    }
    // OLM reads the CSV as its own type, whatever apiVersion the file says.
    let mut csv_object = bundle.csv_object.clone();
    csv_object["apiVersion"] = json!("operators.coreos.com/v1alpha1");
    let objects = std::iter::once(&csv_object)
        .chain(bundle.crds.iter().map(|c| &c.object))
        .chain(bundle.objects.iter().map(|o| &o.object));
    let engine = base64::engine::general_purpose::STANDARD;
    for object in objects {
        let bytes = serde_json::to_vec(object).map_err(|e| OlmError::Catalog(e.to_string()))?;
        properties.push(Property { type_: "olm.bundle.object".into(), value: json!({"data": engine.encode(bytes)}) });
    }
    Ok(Bundle { schema: SCHEMA_BUNDLE.into(), name, package, image: String::new(), properties })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> Vec<opkit_olm_bundle::Bundle> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memcached-operator");
        ["0.0.1", "0.0.2"].iter().map(|v| opkit_olm_bundle::Bundle::load(root.join(v)).expect("fixture")).collect()
    }

    #[test]
    fn renders_bundles_into_a_valid_catalog_that_reads_back() {
        let catalog = Catalog::from_bundles(&fixtures()).expect("render");
        assert!(catalog.validate().is_empty(), "{:?}", catalog.validate());
        assert_eq!(catalog.package("memcached-operator").and_then(|p| p.default_channel.as_deref()), Some("alpha"));
        let channel = catalog.channel("memcached-operator", "alpha").expect("channel");
        assert_eq!(channel.entries[1].replaces.as_deref(), Some("memcached-operator.v0.0.1"));
        let bundle = catalog.bundle("memcached-operator", "memcached-operator.v0.0.2").expect("bundle");
        assert_eq!(bundle.version().map(|v| v.to_string()).as_deref(), Some("0.0.2"));
        assert_eq!(bundle.provided_gvks()[0].to_string(), "cache.example.com/v1alpha1/Memcached");
        assert_eq!(bundle.objects().expect("objects").len(), 3);

        let mut read = Catalog::default();
        read.add_text(&catalog.to_json_stream(), "stream").expect("JSON stream");
        assert_eq!(read, catalog);
        let gz = catalog.to_gzip().expect("gzip");
        let from_cm =
            Catalog::from_config_map(&BTreeMap::new(), &BTreeMap::from([(CONFIG_MAP_KEY.to_string(), gz)]), "cm")
                .expect("config map");
        assert_eq!(from_cm, catalog);
    }

    #[test]
    fn validate_reports_what_opm_would() {
        let mut catalog = Catalog::from_bundles(&fixtures()).expect("render");
        catalog.packages[0].default_channel = Some("stable".into());
        catalog.channels[0].entries.push(Entry { name: "memcached-operator.v9".into(), ..Default::default() });
        let problems = catalog.validate();
        assert!(problems.iter().any(|p| p.contains("default channel \"stable\" not found")), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("bundle \"memcached-operator.v9\" not found")), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("multiple channel heads")), "{problems:?}");
    }
}
