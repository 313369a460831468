//! YAML in and out: manifests read as JSON values, and written as `sigs.k8s.io/yaml`
//! writes them (keys sorted, go-yaml's quoting), with opkit-helm's emitter.

use serde_json::Value;

/// The first non-empty document of a YAML stream, or `None` for an empty file.
pub fn first_document(text: &str) -> Result<Option<Value>, String> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().find(|d| !d.is_null()))
}

/// Every non-empty document of a YAML stream.
pub fn documents(text: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// `sigs.k8s.io/yaml.Marshal(value)`: what operator-sdk writes.
pub fn to_yaml(value: &Value) -> String {
    opkit_helm::yaml::to_yaml(&opkit_helm::value::Value::from_json(value))
}
