//! CustomResourceDefinitions from several Rust types: kube's derive makes one CRD per
//! version of a kind (`Kind::crd()`); [`merge_versions`] joins those sharing a name into
//! one CRD with every version, as `controller-gen` does for a multi-version kind, and gives
//! each the type's documentation as its description; [`normalize_manifest`] makes a CRD's
//! manifest read as controller-gen writes it.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

/// Joins CRDs with the same `metadata.name` into one (the first one's metadata, names and
/// scope; every version in order). Mark all versions but the stored one with
/// `#[kube(storage = false)]`; the API server rejects a CRD without exactly one storage
/// version, with a message saying so. Each version's schema is described by the type's
/// documentation, as controller-gen describes it (see [`normalize_manifest`]).
///
/// ```
/// use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
///     CustomResourceDefinition, CustomResourceDefinitionVersion,
/// };
/// fn crd(version: &str, storage: bool) -> CustomResourceDefinition {
///     let mut crd = CustomResourceDefinition::default();
///     crd.metadata.name = Some("frigates.ship.example.com".into());
///     crd.spec.versions = vec![CustomResourceDefinitionVersion {
///         name: version.into(),
///         served: true,
///         storage,
///         ..Default::default()
///     }];
///     crd
/// }
/// let merged = opkit::crd::merge_versions(vec![crd("v1", true), crd("v1beta1", false)]);
/// assert_eq!(merged.len(), 1);
/// assert_eq!(merged[0].spec.versions.len(), 2);
/// ```
pub fn merge_versions(crds: impl IntoIterator<Item = CustomResourceDefinition>) -> Vec<CustomResourceDefinition> {
    let mut merged: Vec<CustomResourceDefinition> = Vec::new();
    for mut crd in crds {
        for version in &mut crd.spec.versions {
            if let Some(schema) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) {
                let spec_doc =
                    schema.properties.as_ref().and_then(|p| p.get("spec")).and_then(|s| s.description.clone());
                schema.description = type_description(schema.description.take(), spec_doc);
            }
        }
        match merged.iter_mut().find(|m| m.metadata.name == crd.metadata.name) {
            Some(first) => {
                for v in crd.spec.versions {
                    if !first.spec.versions.iter().any(|x| x.name == v.name) {
                        first.spec.versions.push(v);
                    }
                }
            }
            None => merged.push(crd),
        }
    }
    merged
}

/// Makes the manifest (JSON) of a CRD from kube's derive read as controller-gen writes
/// it: integer bounds are integers (`minimum: 1`, not schemars' `1.0`), and the schema's
/// description is the type's documentation, as controller-gen takes the Go type's doc
/// comment: the kind's `#[kube(doc = "...")]`, else the doc comment of the spec struct,
/// instead of kube's "Auto-generated derived type …" (none when neither is documented).
/// `opkit generate` writes CRDs so.
///
/// ```
/// let mut crd = serde_json::json!({"spec": {"names": {"kind": "Memcached", "plural": "memcacheds"},
///     "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"properties": {"spec": {"properties": {
///         "size": {"type": "integer", "minimum": 1.0}}}}}}}]}});
/// opkit::crd::normalize_manifest(&mut crd);
/// let size = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"];
/// assert!(size["minimum"].is_i64());
/// ```
pub fn normalize_manifest(crd: &mut Value) {
    let Some(versions) = crd.pointer_mut("/spec/versions").and_then(Value::as_array_mut) else { return };
    for version in versions {
        let Some(Value::Object(schema)) = version.pointer_mut("/schema/openAPIV3Schema") else { continue };
        let own = schema.get("description").and_then(Value::as_str).map(str::to_owned);
        let spec_doc = schema.get("properties").and_then(|p| p.pointer("/spec/description")).and_then(Value::as_str);
        match type_description(own, spec_doc.map(str::to_owned)) {
            Some(description) => schema.insert("description".into(), json!(description)),
            None => schema.remove("description"),
        };
        schema.values_mut().for_each(integer_bounds);
    }
}

/// What kube's derive writes when the kind has no `#[kube(doc)]`.
const DERIVED_DESCRIPTION: &str = "Auto-generated derived type for ";

/// A CRD schema's description: its own (the kind's `#[kube(doc)]`), else the spec struct's
/// doc comment when kube's derive filled in its placeholder.
fn type_description(own: Option<String>, spec_doc: Option<String>) -> Option<String> {
    match own {
        Some(d) if d.starts_with(DERIVED_DESCRIPTION) => spec_doc,
        Some(d) => Some(d),
        None => spec_doc,
    }
}

/// Turns whole-number bounds of `type: integer` schemas into integers, at every depth.
fn integer_bounds(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("type").and_then(Value::as_str) == Some("integer") {
                for key in ["minimum", "maximum", "multipleOf"] {
                    let whole = map.get(key).and_then(Value::as_f64).filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15);
                    if let Some(f) = whole {
                        map.insert(key.into(), json!(f as i64));
                    }
                }
            }
            map.values_mut().for_each(integer_bounds);
        }
        Value::Array(items) => items.iter_mut().for_each(integer_bounds),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::{CustomResource, CustomResourceExt};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// The desired state of a Frigate: how many crew members it carries.
    #[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
    #[kube(group = "ship.example.com", version = "v1", kind = "Frigate", namespaced)]
    struct FrigateSpec {
        /// Crew members, from 1 to 5.
        #[schemars(range(min = 1, max = 5))]
        crew: i32,
    }

    /// The desired state of a Sloop.
    #[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
    #[kube(group = "ship.example.com", version = "v1", kind = "Sloop", doc = "Sloop is the Schema for the sloops API")]
    struct SloopSpec {
        masts: u8,
    }

    #[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
    #[kube(group = "ship.example.com", version = "v1", kind = "Raft")]
    struct RaftSpec {
        logs: u8,
    }

    fn schema(crd: &Value) -> &Value {
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    }

    #[test]
    fn derived_crds_read_as_controller_gen_writes_them() {
        let crds = merge_versions([Frigate::crd(), Sloop::crd(), Raft::crd()]);
        let mut manifests: Vec<Value> = crds.iter().map(|c| serde_json::to_value(c).expect("json")).collect();
        manifests.iter_mut().for_each(normalize_manifest);
        // The spec struct's doc comment, not kube's "Auto-generated derived type …".
        let frigate = schema(&manifests[0]);
        assert_eq!(frigate["description"], "The desired state of a Frigate: how many crew members it carries.");
        let crew = &frigate["properties"]["spec"]["properties"]["crew"];
        assert!(crew["minimum"].is_i64() && crew["maximum"].is_i64(), "{crew}");
        assert_eq!((crew["minimum"].as_i64(), crew["maximum"].as_i64()), (Some(1), Some(5)));
        assert!(!serde_json::to_string(crew).expect("json").contains(".0"), "{crew}");
        // The kind's own doc wins; an undocumented type has no description, as with controller-gen.
        assert_eq!(schema(&manifests[1])["description"], "Sloop is the Schema for the sloops API");
        assert!(schema(&manifests[2]).get("description").is_none(), "{}", schema(&manifests[2]));
        // The typed CRDs (what tests install) carry the same description.
        let typed = crds[0].spec.versions[0].schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref());
        assert_eq!(
            typed.and_then(|s| s.description.as_deref()),
            Some("The desired state of a Frigate: how many crew members it carries.")
        );
    }

    #[test]
    fn number_bounds_stay_numbers() {
        let mut crd = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "properties": {"spec": {"properties": {
                "ratio": {"type": "number", "minimum": 0.0, "maximum": 0.5}}}}}}}]}});
        normalize_manifest(&mut crd);
        let ratio = &schema(&crd)["properties"]["spec"]["properties"]["ratio"];
        assert_eq!(ratio["maximum"], 0.5);
        assert!(ratio["minimum"].is_f64(), "number bounds stay numbers");
    }
}
