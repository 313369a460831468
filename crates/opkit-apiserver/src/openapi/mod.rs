//! OpenAPI documents served by the API server: `/openapi/v2` (JSON and gnostic protobuf) and
//! `/openapi/v3` (index plus one document per group-version), built from the served resources,
//! the built-in schemas of k8s-openapi and the schemas of CustomResourceDefinitions.
//!
//! The shapes follow kube-apiserver closely enough for kubectl 1.27–1.33 (`apply` with
//! `--validate=strict`, `explain`) and kube-rs: every operation carries
//! `x-kubernetes-group-version-kind` and `x-kubernetes-action`, the write operations carry the
//! `dryRun`, `fieldManager` and `fieldValidation` query parameters, and every kind's definition
//! carries `x-kubernetes-group-version-kind`.

mod builtin;
mod builtin_list;
mod crd;
mod inline;
mod params;
mod paths;
pub(crate) mod proto;
mod proto_encode;
mod refs;
mod v2;
mod v3;

#[cfg(test)]
mod tests;

pub(crate) use builtin::{builtin_definition_name, builtin_definitions};
pub(crate) use inline::builtin_inline_schema;
pub(crate) use proto_encode::v2_protobuf;
pub(crate) use v2::v2_document;
pub(crate) use v3::{v3_document, v3_index};

use serde_json::{Value, json};

/// Where the schema of a served resource comes from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SchemaSource {
    /// A built-in kind whose schema comes from k8s-openapi.
    Builtin,
    /// A custom resource: the CRD version's `openAPIV3Schema`.
    Crd(Value),
}

/// One served resource (a group/version/kind and its REST shape) to publish.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResourceDoc {
    /// API group; "" for the core group.
    pub group: String,
    /// API version, e.g. "v1".
    pub version: String,
    /// Kind, e.g. "Deployment".
    pub kind: String,
    /// Plural resource name used in URLs, e.g. "deployments".
    pub plural: String,
    /// Whether the resource lives in namespaces.
    pub namespaced: bool,
    /// Supported verbs: get list watch create update patch delete deletecollection.
    pub verbs: Vec<String>,
    /// Supported subresources: "status", "scale".
    pub subresources: Vec<String>,
    /// Where the schema comes from.
    pub schema: SchemaSource,
}

impl ResourceDoc {
    /// Whether `verb` is among the resource's verbs.
    pub(crate) fn has_verb(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// Whether `sub` is among the resource's subresources.
    pub(crate) fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.iter().any(|s| s == sub)
    }

    /// Whether the resource is a custom resource.
    pub(crate) fn is_crd(&self) -> bool {
        matches!(self.schema, SchemaSource::Crd(_))
    }

    /// The definition name under which this resource's kind is published.
    pub(crate) fn definition_name(&self) -> String {
        match &self.schema {
            SchemaSource::Builtin => builtin_definition_name(&self.group, &self.version, &self.kind)
                .unwrap_or_else(|| crd_definition_name(&self.group, &self.version, &self.kind)),
            SchemaSource::Crd(_) => crd_definition_name(&self.group, &self.version, &self.kind),
        }
    }

    /// The definition name of the list kind.
    pub(crate) fn list_definition_name(&self) -> String {
        format!("{}List", self.definition_name())
    }

    /// The URL prefix of the resource's group-version: "/api/v1" or "/apis/<group>/<version>".
    pub(crate) fn gv_prefix(&self) -> String {
        gv_prefix(&self.group, &self.version)
    }
}

/// "/api/<version>" for the core group, "/apis/<group>/<version>" otherwise.
pub(crate) fn gv_prefix(group: &str, version: &str) -> String {
    if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") }
}

/// The definition name kube-apiserver gives a custom resource's kind: the group's DNS labels
/// reversed, then version and kind, e.g. ("flights.com","v1","FlightTicket") ->
/// "com.flights.v1.FlightTicket".
pub(crate) fn crd_definition_name(group: &str, version: &str, kind: &str) -> String {
    let mut labels: Vec<&str> = group.split('.').filter(|l| !l.is_empty()).collect();
    labels.reverse();
    labels.push(version);
    labels.push(kind);
    labels.join(".")
}

/// The `{"group","kind","version"}` object used by `x-kubernetes-group-version-kind`.
pub(crate) fn gvk_object(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// Adds `gvk` to the `x-kubernetes-group-version-kind` list of the definition `def`.
pub(crate) fn add_definition_gvk(def: &mut Value, gvk: Value) {
    let Some(obj) = def.as_object_mut() else {
        return;
    };
    let entry = obj.entry("x-kubernetes-group-version-kind").or_insert_with(|| Value::Array(Vec::new()));
    if !entry.is_array() {
        *entry = Value::Array(Vec::new());
    }
    if let Some(list) = entry.as_array_mut()
        && !list.contains(&gvk)
    {
        list.push(gvk);
    }
}

/// Definition names of the apimachinery meta types used by the documents.
pub(crate) mod names {
    /// ObjectMeta.
    pub(crate) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
    /// ListMeta.
    pub(crate) const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
    /// Status.
    pub(crate) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
    /// DeleteOptions.
    pub(crate) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
    /// Patch.
    pub(crate) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
    /// WatchEvent.
    pub(crate) const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
    /// autoscaling/v1 Scale.
    pub(crate) const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";
    /// IntOrString.
    pub(crate) const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
    /// Quantity.
    pub(crate) const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
}

/// Description of a list's `metadata` field.
pub(crate) const LIST_METADATA_DESCRIPTION: &str = "Standard list metadata.";
