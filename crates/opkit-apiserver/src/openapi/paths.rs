//! The REST paths and operations of a served resource, in a neutral form that the v2 and v3
//! builders render: which paths exist, their operations (with operation ids, actions, query
//! parameters, body and response kinds) and the group/version/kind each operation serves.

use serde_json::Value;

use super::params::{
    PRETTY, Param, ParamType, delete_params, list_params, patch_params, path_param, query, write_params,
};
use super::{ResourceDoc, gvk_object, names};

/// One HTTP operation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Operation {
    /// Lower-case HTTP method: get, post, put, patch, delete.
    pub method: &'static str,
    /// kube's `x-kubernetes-action`: get, list, post, put, patch, delete, deletecollection.
    pub action: &'static str,
    /// Operation id, e.g. "patchAppsV1NamespacedDeployment".
    pub id: String,
    /// Human description.
    pub description: String,
    /// Tag grouping the operation, e.g. "apps_v1".
    pub tag: String,
    /// Query parameters of the operation.
    pub params: Vec<Param>,
    /// Definition name of the request body, and whether it is required.
    pub body: Option<(String, bool)>,
    /// (status code, definition name of the response body).
    pub responses: Vec<(&'static str, Option<String>)>,
    /// Accepted request media types.
    pub consumes: Vec<&'static str>,
    /// Produced response media types.
    pub produces: Vec<&'static str>,
    /// The `x-kubernetes-group-version-kind` object.
    pub gvk: Value,
}

/// One path with its path-level parameters and operations.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PathSpec {
    /// The URL path template, e.g. "/apis/apps/v1/namespaces/{namespace}/deployments".
    pub path: String,
    /// Parameters shared by every operation of the path.
    pub params: Vec<Param>,
    /// The operations.
    pub ops: Vec<Operation>,
}

/// "apps" -> "Apps", "rbac.authorization.k8s.io" -> "RbacAuthorization", "" -> "Core".
pub(crate) fn group_camel(group: &str) -> String {
    if group.is_empty() {
        return "Core".to_string();
    }
    let trimmed = group.strip_suffix(".k8s.io").unwrap_or(group);
    trimmed.split(['.', '-']).filter(|p| !p.is_empty()).map(capitalize).collect()
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn tag(group: &str) -> String {
    let camel = group_camel(group);
    let mut chars = camel.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => camel,
    }
}

/// The paths kube-apiserver serves for `r`, in kube's order.
pub(crate) fn resource_paths(r: &ResourceDoc) -> Vec<PathSpec> {
    let b = PathBuilder::new(r);
    let mut out = Vec::new();
    out.extend(b.collection_path());
    out.extend(b.item_path());
    for sub in ["status", "scale"] {
        if r.has_subresource(sub) {
            out.extend(b.subresource_path(sub));
        }
    }
    out.extend(b.all_namespaces_path());
    out
}

/// What a single-object operation acts on: the object itself or one of its subresources.
struct OpTarget {
    /// Suffix of the operation id: "" for the object, "Status" or "Scale" for a subresource.
    id_suffix: &'static str,
    /// Definition name of the request and response bodies.
    def: String,
    /// The object in the description, e.g. "the specified Deployment", "status of the specified Deployment".
    what: String,
    /// The `x-kubernetes-group-version-kind` of the operations.
    gvk: Value,
}

/// The names, media types and shared parameters every path of one resource is built from.
struct PathBuilder<'a> {
    r: &'a ResourceDoc,
    prefix: String,
    /// "AppsV1": group and version in an operation id.
    gv_camel: String,
    tag: String,
    kind_def: String,
    gvk: Value,
    /// "Namespaced" or "" in an operation id.
    scope: &'static str,
    /// The collection path, e.g. "/apis/apps/v1/namespaces/{namespace}/deployments".
    base: String,
    object_produces: Vec<&'static str>,
    list_produces: Vec<&'static str>,
    patch_consumes: Vec<&'static str>,
}

impl<'a> PathBuilder<'a> {
    fn new(r: &'a ResourceDoc) -> Self {
        let prefix = r.gv_prefix();
        let crd = r.is_crd();
        let base = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("{prefix}/{}", r.plural)
        };
        let object_produces = if crd {
            vec!["application/json", "application/yaml"]
        } else {
            vec!["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]
        };
        let mut list_produces = object_produces.clone();
        list_produces.push("application/json;stream=watch");
        if !crd {
            list_produces.push("application/vnd.kubernetes.protobuf;stream=watch");
        }
        let patch_consumes = if crd {
            vec!["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
        } else {
            vec![
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
                "application/apply-patch+yaml",
            ]
        };
        PathBuilder {
            r,
            gv_camel: format!("{}{}", group_camel(&r.group), capitalize(&r.version)),
            tag: format!("{}_{}", tag(&r.group), r.version),
            kind_def: r.definition_name(),
            gvk: gvk_object(&r.group, &r.version, &r.kind),
            scope: if r.namespaced { "Namespaced" } else { "" },
            prefix,
            base,
            object_produces,
            list_produces,
            patch_consumes,
        }
    }

    /// An operation with its parameters, body and responses (a 401 response is appended).
    fn op(
        &self,
        (method, action): (&'static str, &'static str),
        (id, description): (String, String),
        params: Vec<Param>,
        body: Option<(String, bool)>,
        mut responses: Vec<(&'static str, Option<String>)>,
    ) -> Operation {
        responses.push(("401", None));
        Operation {
            method,
            action,
            id,
            description,
            tag: self.tag.clone(),
            params,
            body,
            responses,
            consumes: vec!["*/*"],
            produces: self.object_produces.clone(),
            gvk: self.gvk.clone(),
        }
    }

    fn ns_param() -> Param {
        path_param("namespace", "object name and auth scope, such as for teams and projects".to_string())
    }

    /// Path parameters of the object and subresource paths: name, namespace, pretty.
    fn item_params(&self) -> Vec<Param> {
        let mut params = vec![path_param("name", format!("name of the {}", self.r.kind))];
        if self.r.namespaced {
            params.push(Self::ns_param());
        }
        params.push(query("pretty", ParamType::String, PRETTY));
        params
    }

    /// The collection path: list, create, deletecollection.
    fn collection_path(&self) -> Option<PathSpec> {
        let r = self.r;
        let mut ops = Vec::new();
        if r.has_verb("list") {
            ops.push(self.list_op());
        }
        if r.has_verb("create") {
            ops.push(self.create_op());
        }
        if r.has_verb("deletecollection") {
            ops.push(self.delete_collection_op());
        }
        if ops.is_empty() {
            return None;
        }
        let mut params = Vec::new();
        if r.namespaced {
            params.push(Self::ns_param());
        }
        params.push(query("pretty", ParamType::String, PRETTY));
        Some(PathSpec { path: self.base.clone(), params, ops })
    }

    fn list_op(&self) -> Operation {
        let (r, gv, scope) = (self.r, &self.gv_camel, self.scope);
        let mut o = self.op(
            ("get", "list"),
            (format!("list{gv}{scope}{}", r.kind), format!("list or watch objects of kind {}", r.kind)),
            list_params(true),
            None,
            vec![("200", Some(r.list_definition_name()))],
        );
        o.produces = self.list_produces.clone();
        o
    }

    fn create_op(&self) -> Operation {
        let (r, gv, scope, def) = (self.r, &self.gv_camel, self.scope, &self.kind_def);
        self.op(
            ("post", "post"),
            (format!("create{gv}{scope}{}", r.kind), format!("create a {}", r.kind)),
            write_params(),
            Some((def.clone(), true)),
            vec![("200", Some(def.clone())), ("201", Some(def.clone())), ("202", Some(def.clone()))],
        )
    }

    fn delete_collection_op(&self) -> Operation {
        let (r, gv, scope) = (self.r, &self.gv_camel, self.scope);
        let mut params = delete_params();
        params.extend(list_params(false));
        params.sort_by_key(|p| p.name);
        self.op(
            ("delete", "deletecollection"),
            (format!("delete{gv}Collection{scope}{}", r.kind), format!("delete collection of {}", r.kind)),
            params,
            Some((names::DELETE_OPTIONS.to_string(), false)),
            vec![("200", Some(names::STATUS.to_string()))],
        )
    }

    /// The object path: read, replace, patch, delete.
    fn item_path(&self) -> Option<PathSpec> {
        let target = OpTarget {
            id_suffix: "",
            def: self.kind_def.clone(),
            what: format!("the specified {}", self.r.kind),
            gvk: self.gvk.clone(),
        };
        let mut ops = self.read_write_ops(&target);
        if self.r.has_verb("delete") {
            ops.push(self.delete_op());
        }
        if ops.is_empty() {
            return None;
        }
        Some(PathSpec { path: format!("{}/{{name}}", self.base), params: self.item_params(), ops })
    }

    /// A subresource path ("status" or "scale"), sharing the object's get/update/patch verbs.
    fn subresource_path(&self, sub: &str) -> Option<PathSpec> {
        let (id_suffix, def, gvk) = if sub == "status" {
            ("Status", self.kind_def.clone(), self.gvk.clone())
        } else {
            ("Scale", names::SCALE.to_string(), gvk_object("autoscaling", "v1", "Scale"))
        };
        let what = format!("{sub} of the specified {}", self.r.kind);
        let ops = self.read_write_ops(&OpTarget { id_suffix, def, what, gvk });
        if ops.is_empty() {
            return None;
        }
        Some(PathSpec { path: format!("{}/{{name}}/{sub}", self.base), params: self.item_params(), ops })
    }

    /// The read, replace and patch operations on `target`, for the verbs the resource has.
    fn read_write_ops(&self, target: &OpTarget) -> Vec<Operation> {
        let (r, gv, scope) = (self.r, &self.gv_camel, self.scope);
        let (suffix, def, what) = (target.id_suffix, &target.def, &target.what);
        let mut ops = Vec::new();
        if r.has_verb("get") {
            ops.push(self.op(
                ("get", "get"),
                (format!("read{gv}{scope}{}{suffix}", r.kind), format!("read {what}")),
                Vec::new(),
                None,
                vec![("200", Some(def.clone()))],
            ));
        }
        if r.has_verb("update") {
            ops.push(self.op(
                ("put", "put"),
                (format!("replace{gv}{scope}{}{suffix}", r.kind), format!("replace {what}")),
                write_params(),
                Some((def.clone(), true)),
                vec![("200", Some(def.clone())), ("201", Some(def.clone()))],
            ));
        }
        if r.has_verb("patch") {
            let mut o = self.op(
                ("patch", "patch"),
                (format!("patch{gv}{scope}{}{suffix}", r.kind), format!("partially update {what}")),
                patch_params(),
                Some((names::PATCH.to_string(), true)),
                vec![("200", Some(def.clone())), ("201", Some(def.clone()))],
            );
            o.consumes = self.patch_consumes.clone();
            ops.push(o);
        }
        for o in &mut ops {
            o.gvk = target.gvk.clone();
        }
        ops
    }

    fn delete_op(&self) -> Operation {
        let (r, gv, scope) = (self.r, &self.gv_camel, self.scope);
        self.op(
            ("delete", "delete"),
            (format!("delete{gv}{scope}{}", r.kind), format!("delete a {}", r.kind)),
            delete_params(),
            Some((names::DELETE_OPTIONS.to_string(), false)),
            vec![("200", Some(names::STATUS.to_string())), ("202", Some(names::STATUS.to_string()))],
        )
    }

    /// Namespaced resources can also be listed across all namespaces.
    fn all_namespaces_path(&self) -> Option<PathSpec> {
        let r = self.r;
        if !(r.namespaced && r.has_verb("list")) {
            return None;
        }
        let mut o = self.op(
            ("get", "list"),
            (
                format!("list{}{}ForAllNamespaces", self.gv_camel, r.kind),
                format!("list or watch objects of kind {}", r.kind),
            ),
            Vec::new(),
            None,
            vec![("200", Some(r.list_definition_name()))],
        );
        o.produces = self.list_produces.clone();
        let mut params = list_params(true);
        params.push(query("pretty", ParamType::String, PRETTY));
        params.sort_by_key(|p| p.name);
        Some(PathSpec { path: format!("{}/{}", self.prefix, r.plural), params, ops: vec![o] })
    }
}

#[cfg(test)]
mod tests {
    use super::super::SchemaSource;
    use super::*;

    #[test]
    fn camel_names() {
        assert_eq!(group_camel(""), "Core");
        assert_eq!(group_camel("apps"), "Apps");
        assert_eq!(group_camel("rbac.authorization.k8s.io"), "RbacAuthorization");
        assert_eq!(group_camel("flights.com"), "FlightsCom");
        assert_eq!(tag("flights.com"), "flightsCom");
    }

    #[test]
    fn deployment_paths() {
        let r = ResourceDoc {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            plural: "deployments".into(),
            namespaced: true,
            verbs: ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
                .map(String::from)
                .to_vec(),
            subresources: vec!["status".into(), "scale".into()],
            schema: SchemaSource::Builtin,
        };
        let paths = resource_paths(&r);
        let names: Vec<&str> = paths.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "/apis/apps/v1/namespaces/{namespace}/deployments",
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status",
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
                "/apis/apps/v1/deployments",
            ]
        );
        let patch = paths[1].ops.iter().find(|o| o.method == "patch").expect("patch op");
        assert_eq!(patch.id, "patchAppsV1NamespacedDeployment");
        assert!(patch.params.iter().any(|p| p.name == "fieldValidation"));
        let scale_patch = paths[3].ops.iter().find(|o| o.method == "patch").expect("scale patch");
        assert_eq!(scale_patch.gvk["kind"], "Scale");
    }
}
