//! CustomResourceDefinitions from several Rust types: kube's derive makes one CRD per
//! version of a kind (`Kind::crd()`); [`merge_versions`] joins those sharing a name into
//! one CRD with every version, as `controller-gen` does for a multi-version kind, and
//! [`normalize_manifest`] makes a CRD's manifest read as controller-gen writes it.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

/// Joins CRDs with the same `metadata.name` into one (the first one's metadata, names and
/// scope; every version in order). Mark all versions but the stored one with
/// `#[kube(storage = false)]`; the API server rejects a CRD without exactly one storage
/// version, with a message saying so.
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
    for crd in crds {
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
/// it: integer bounds are
/// integers (`minimum: 1`, not schemars' `1.0`), and a kind without a `#[kube(doc)]`
/// gets controller-gen's description (`Memcached is the Schema for the memcacheds API`)
/// instead of kube's "Auto-generated derived type …". `opkit generate` writes CRDs so.
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
    let kind = crd.pointer("/spec/names/kind").and_then(Value::as_str).unwrap_or_default().to_string();
    let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or_default().to_string();
    let Some(versions) = crd.pointer_mut("/spec/versions").and_then(Value::as_array_mut) else { return };
    for version in versions {
        let Some(schema) = version.pointer_mut("/schema/openAPIV3Schema") else { continue };
        let generated =
            schema["description"].as_str().is_some_and(|d| d.starts_with("Auto-generated derived type for "));
        if generated {
            schema["description"] = json!(format!("{kind} is the Schema for the {plural} API"));
        }
        integer_bounds(schema);
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

    #[test]
    fn crds_read_as_controller_gen_writes_them() {
        let mut crd = json!({"spec": {"names": {"kind": "Memcached", "plural": "memcacheds"}, "versions": [{"name": "v1",
            "schema": {"openAPIV3Schema": {
                "description": "Auto-generated derived type for MemcachedSpec via `CustomResource`",
                "properties": {"spec": {"properties": {
                    "size": {"type": "integer", "format": "int32", "minimum": 1.0, "maximum": 5.0},
                    "ratio": {"type": "number", "minimum": 0.0, "maximum": 0.5}}}}}}}]}});
        normalize_manifest(&mut crd);
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        assert_eq!(schema["description"], "Memcached is the Schema for the memcacheds API");
        let size = &schema["properties"]["spec"]["properties"]["size"];
        assert!(size["minimum"].is_i64() && size["maximum"].is_i64(), "{size}");
        assert_eq!((size["minimum"].as_i64(), size["maximum"].as_i64()), (Some(1), Some(5)));
        let ratio = &schema["properties"]["spec"]["properties"]["ratio"];
        assert_eq!(ratio["maximum"], 0.5);
        assert!(ratio["minimum"].is_f64(), "number bounds stay numbers");
    }
}
