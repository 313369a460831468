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
    let prefix = r.gv_prefix();
    let gv_camel = format!("{}{}", group_camel(&r.group), capitalize(&r.version));
    let tag = format!("{}_{}", tag(&r.group), r.version);
    let kind_def = r.definition_name();
    let gvk = gvk_object(&r.group, &r.version, &r.kind);
    let crd = r.is_crd();
    let scope = if r.namespaced { "Namespaced" } else { "" };
    let base = if r.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", r.plural)
    } else {
        format!("{prefix}/{}", r.plural)
    };
    let ns_param = || path_param("namespace", "object name and auth scope, such as for teams and projects".to_string());
    let name_param = |what: &str| path_param("name", format!("name of the {what}"));
    let pretty = || query("pretty", ParamType::String, PRETTY);

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

    let op = |method: &'static str, action: &'static str, id: String, description: String| Operation {
        method,
        action,
        id,
        description,
        tag: tag.clone(),
        params: Vec::new(),
        body: None,
        responses: Vec::new(),
        consumes: vec!["*/*"],
        produces: object_produces.clone(),
        gvk: gvk.clone(),
    };
    let with = |mut o: Operation,
                params: Vec<Param>,
                body: Option<(String, bool)>,
                responses: Vec<(&'static str, Option<String>)>| {
        o.params = params;
        o.body = body;
        o.responses = responses;
        o.responses.push(("401", None));
        o
    };
    let ok = |def: &str| Some(def.to_string());

    let mut out = Vec::new();

    // Collection: list, create, deletecollection.
    let mut coll_ops = Vec::new();
    if r.has_verb("list") {
        let mut o = with(
            op(
                "get",
                "list",
                format!("list{gv_camel}{scope}{}", r.kind),
                format!("list or watch objects of kind {}", r.kind),
            ),
            list_params(true),
            None,
            vec![("200", ok(&r.list_definition_name()))],
        );
        o.produces = list_produces.clone();
        coll_ops.push(o);
    }
    if r.has_verb("create") {
        coll_ops.push(with(
            op("post", "post", format!("create{gv_camel}{scope}{}", r.kind), format!("create a {}", r.kind)),
            write_params(),
            Some((kind_def.clone(), true)),
            vec![("200", ok(&kind_def)), ("201", ok(&kind_def)), ("202", ok(&kind_def))],
        ));
    }
    if r.has_verb("deletecollection") {
        let mut params = delete_params();
        params.extend(list_params(false));
        params.sort_by_key(|p| p.name);
        coll_ops.push(with(
            op(
                "delete",
                "deletecollection",
                format!("delete{gv_camel}Collection{scope}{}", r.kind),
                format!("delete collection of {}", r.kind),
            ),
            params,
            Some((names::DELETE_OPTIONS.to_string(), false)),
            vec![("200", ok(names::STATUS))],
        ));
    }
    if !coll_ops.is_empty() {
        let mut params = Vec::new();
        if r.namespaced {
            params.push(ns_param());
        }
        params.push(pretty());
        out.push(PathSpec { path: base.clone(), params, ops: coll_ops });
    }

    // Single object: read, replace, patch, delete.
    let mut item_ops = Vec::new();
    if r.has_verb("get") {
        item_ops.push(with(
            op("get", "get", format!("read{gv_camel}{scope}{}", r.kind), format!("read the specified {}", r.kind)),
            Vec::new(),
            None,
            vec![("200", ok(&kind_def))],
        ));
    }
    if r.has_verb("update") {
        item_ops.push(with(
            op(
                "put",
                "put",
                format!("replace{gv_camel}{scope}{}", r.kind),
                format!("replace the specified {}", r.kind),
            ),
            write_params(),
            Some((kind_def.clone(), true)),
            vec![("200", ok(&kind_def)), ("201", ok(&kind_def))],
        ));
    }
    if r.has_verb("patch") {
        let mut o = with(
            op(
                "patch",
                "patch",
                format!("patch{gv_camel}{scope}{}", r.kind),
                format!("partially update the specified {}", r.kind),
            ),
            patch_params(),
            Some((names::PATCH.to_string(), true)),
            vec![("200", ok(&kind_def)), ("201", ok(&kind_def))],
        );
        o.consumes = patch_consumes.clone();
        item_ops.push(o);
    }
    if r.has_verb("delete") {
        item_ops.push(with(
            op("delete", "delete", format!("delete{gv_camel}{scope}{}", r.kind), format!("delete a {}", r.kind)),
            delete_params(),
            Some((names::DELETE_OPTIONS.to_string(), false)),
            vec![("200", ok(names::STATUS)), ("202", ok(names::STATUS))],
        ));
    }
    let item_params = || {
        let mut params = vec![name_param(&r.kind)];
        if r.namespaced {
            params.push(ns_param());
        }
        params.push(pretty());
        params
    };
    if !item_ops.is_empty() {
        out.push(PathSpec { path: format!("{base}/{{name}}"), params: item_params(), ops: item_ops });
    }

    // Subresources: status and scale share the object's get/update/patch verbs.
    for sub in ["status", "scale"] {
        if !r.has_subresource(sub) {
            continue;
        }
        let (suffix, def, sub_gvk) = if sub == "status" {
            ("Status", kind_def.clone(), gvk.clone())
        } else {
            ("Scale", names::SCALE.to_string(), gvk_object("autoscaling", "v1", "Scale"))
        };
        let mut ops = Vec::new();
        if r.has_verb("get") {
            ops.push(with(
                op(
                    "get",
                    "get",
                    format!("read{gv_camel}{scope}{}{suffix}", r.kind),
                    format!("read {sub} of the specified {}", r.kind),
                ),
                Vec::new(),
                None,
                vec![("200", ok(&def))],
            ));
        }
        if r.has_verb("update") {
            ops.push(with(
                op(
                    "put",
                    "put",
                    format!("replace{gv_camel}{scope}{}{suffix}", r.kind),
                    format!("replace {sub} of the specified {}", r.kind),
                ),
                write_params(),
                Some((def.clone(), true)),
                vec![("200", ok(&def)), ("201", ok(&def))],
            ));
        }
        if r.has_verb("patch") {
            let mut o = with(
                op(
                    "patch",
                    "patch",
                    format!("patch{gv_camel}{scope}{}{suffix}", r.kind),
                    format!("partially update {sub} of the specified {}", r.kind),
                ),
                patch_params(),
                Some((names::PATCH.to_string(), true)),
                vec![("200", ok(&def)), ("201", ok(&def))],
            );
            o.consumes = patch_consumes.clone();
            ops.push(o);
        }
        for o in &mut ops {
            o.gvk = sub_gvk.clone();
        }
        if !ops.is_empty() {
            out.push(PathSpec { path: format!("{base}/{{name}}/{sub}"), params: item_params(), ops });
        }
    }

    // Namespaced resources can also be listed across all namespaces.
    if r.namespaced && r.has_verb("list") {
        let mut o = with(
            op(
                "get",
                "list",
                format!("list{gv_camel}{}ForAllNamespaces", r.kind),
                format!("list or watch objects of kind {}", r.kind),
            ),
            Vec::new(),
            None,
            vec![("200", ok(&r.list_definition_name()))],
        );
        o.produces = list_produces;
        let mut params = list_params(true);
        params.push(pretty());
        params.sort_by_key(|p| p.name);
        out.push(PathSpec { path: format!("{prefix}/{}", r.plural), params, ops: vec![o] });
    }
    out
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
