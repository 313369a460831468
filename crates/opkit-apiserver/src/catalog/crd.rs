//! Turning a CustomResourceDefinition into a served resource, and the status
//! (Established, NamesAccepted) the server reports for it.

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::WebhookConversion;
use serde_json::{Value, json};

use super::{ResourceInfo, ScaleInfo, VersionInfo, compare_versions};
use crate::schema::{CrdSchema, FieldError};
use crate::storage::ResourceId;
use crate::table::PrinterColumn;

fn s(v: &Value, path: &[&str]) -> String {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_str().unwrap_or_default().to_string()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// Compiles the `openAPIV3Schema` of version `i`, if it has one; errors carry their
/// path in the CRD.
fn compile_schema(i: usize, raw: &Value) -> Result<Option<Arc<CrdSchema>>, Vec<FieldError>> {
    if !raw.is_object() {
        return Ok(None);
    }
    match CrdSchema::new(raw) {
        Ok(c) => Ok(Some(Arc::new(c))),
        Err(errs) => Err(errs
            .into_iter()
            .map(|mut e| {
                e.field = format!(
                    "spec.versions[{i}].schema.openAPIV3Schema{}{}",
                    if e.field.is_empty() { "" } else { "." },
                    e.field
                );
                e
            })
            .collect()),
    }
}

/// The scale subresource of a version, with kube's default paths.
fn scale_info(sub: &Value) -> Option<ScaleInfo> {
    sub["scale"].as_object().map(|sc| {
        let path = |k: &str, default: &str| sc.get(k).and_then(Value::as_str).unwrap_or(default).to_string();
        ScaleInfo {
            spec_replicas_path: path("specReplicasPath", ".spec.replicas"),
            status_replicas_path: path("statusReplicasPath", ".status.replicas"),
            label_selector_path: sc.get("labelSelectorPath").and_then(Value::as_str).map(String::from),
        }
    })
}

/// One served version (`spec.versions[i]`) of a CRD.
fn version_from_crd(i: usize, v: &Value) -> Result<VersionInfo, Vec<FieldError>> {
    let raw = v["schema"]["openAPIV3Schema"].clone();
    let schema = compile_schema(i, &raw)?;
    let sub = &v["subresources"];
    Ok(VersionInfo {
        name: s(v, &["name"]),
        served: v["served"].as_bool().unwrap_or(false),
        storage: v["storage"].as_bool().unwrap_or(false),
        status: sub["status"].is_object(),
        scale: scale_info(sub),
        schema,
        raw_schema: raw.is_object().then_some(raw),
        columns: v["additionalPrinterColumns"]
            .as_array()
            .map(|cols| cols.iter().filter_map(PrinterColumn::from_crd_json).collect())
            .unwrap_or_default(),
        selectable_fields: v["selectableFields"]
            .as_array()
            .map(|f| {
                f.iter()
                    .filter_map(|x| x["jsonPath"].as_str())
                    .map(|p| (p.trim_start_matches('.').to_string(), p.to_string()))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// Builds the served resource of a (validated) CRD. Fails if a version's schema does not
/// compile.
pub(crate) fn resource_from_crd(crd: &Value) -> Result<ResourceInfo, Vec<FieldError>> {
    let spec = &crd["spec"];
    let group = s(spec, &["group"]);
    let plural = s(spec, &["names", "plural"]);
    let kind = s(spec, &["names", "kind"]);
    let singular = match s(spec, &["names", "singular"]) {
        x if x.is_empty() => kind.to_lowercase(),
        x => x,
    };
    let list_kind = match s(spec, &["names", "listKind"]) {
        x if x.is_empty() => format!("{kind}List"),
        x => x,
    };
    let mut versions = Vec::new();
    let mut errors = Vec::new();
    for (i, v) in spec["versions"].as_array().map(Vec::as_slice).unwrap_or_default().iter().enumerate() {
        match version_from_crd(i, v) {
            Ok(version) => versions.push(version),
            Err(errs) => errors.extend(errs),
        }
    }
    let conversion_webhook = conversion_webhook(spec).unwrap_or_else(|e| {
        errors.push(e);
        None
    });
    if !errors.is_empty() {
        return Err(errors);
    }
    versions.sort_by(|a, b| compare_versions(&a.name, &b.name));
    Ok(ResourceInfo {
        id: ResourceId::new(&group, &plural),
        namespaced: s(spec, &["scope"]) != "Cluster",
        short_names: strings(&spec["names"]["shortNames"]),
        categories: strings(&spec["names"]["categories"]),
        verbs: vec!["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
        generation: true,
        builtin: false,
        group,
        resource: plural,
        singular,
        kind,
        list_kind,
        versions,
        conversion_webhook,
    })
}

/// The webhook of `spec.conversion` when its strategy is `Webhook` (None for `None`).
fn conversion_webhook(spec: &Value) -> Result<Option<Arc<WebhookConversion>>, FieldError> {
    let conversion = &spec["conversion"];
    if conversion["strategy"] != "Webhook" {
        return Ok(None);
    }
    serde_json::from_value::<WebhookConversion>(conversion["webhook"].clone())
        .map(|w| Some(Arc::new(w)))
        .map_err(|e| FieldError::invalid("spec.conversion.webhook", &conversion["webhook"], &e.to_string()))
}

/// The status kube-apiserver gives an accepted CRD: accepted names and the
/// NamesAccepted and Established conditions, keeping existing transition times.
pub(crate) fn crd_status(crd: &Value, now: &str) -> Value {
    let spec = &crd["spec"];
    let mut names = spec["names"].clone();
    if let Some(obj) = names.as_object_mut() {
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
        obj.entry("singular").or_insert_with(|| json!(kind.to_lowercase()));
        obj.entry("listKind").or_insert_with(|| json!(format!("{kind}List")));
    }
    let old_conditions = crd["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let since = |t: &str| {
        old_conditions
            .iter()
            .find(|c| c["type"] == t && c["status"] == "True")
            .and_then(|c| c["lastTransitionTime"].as_str().map(String::from))
            .unwrap_or_else(|| now.to_string())
    };
    let mut conditions = vec![
        json!({"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": since("NamesAccepted")}),
        json!({"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": since("Established")}),
    ];
    if crd["metadata"]["deletionTimestamp"].is_string() {
        conditions.push(json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress", "message": "CustomResource deletion is in progress", "lastTransitionTime": now}));
    }
    let stored: Vec<Value> = spec["versions"]
        .as_array()
        .map(|vs| vs.iter().filter(|v| v["storage"] == true).map(|v| v["name"].clone()).collect())
        .unwrap_or_default();
    let mut stored_versions = crd["status"]["storedVersions"].as_array().cloned().unwrap_or_default();
    for v in stored {
        if !stored_versions.contains(&v) {
            stored_versions.push(v);
        }
    }
    json!({"acceptedNames": names, "conditions": conditions, "storedVersions": stored_versions})
}
