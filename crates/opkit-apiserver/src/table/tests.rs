//! The Table tests: kube's durations, the built-in printers, custom columns and the
//! default table, checked through the built-in kinds' strategies (which hold the
//! printers, above this module).

use super::*;

/// Whether kube has a dedicated printer for this resource (otherwise the default table is used).
fn has_builtin_printer(group: &str, resource: &str) -> bool {
    crate::kinds::STRATEGIES.builtin(group, resource).is_some_and(|s| s.table().is_some())
}

/// Builds a `meta.k8s.io/v1` Table for `items` of one resource.
///
/// `custom` = `Some(columns)` for a custom resource (NAME plus the CRD's columns; with no
/// columns NAME and Age). Otherwise the built-in printer for `group`/`resource` is used, or
/// kube's default NAME / CREATED AT table. Rows carry `object` per `include`.
#[allow(clippy::too_many_arguments)]
fn build_table(
    group: &str,
    resource: &str,
    items: &[Value],
    custom: Option<&[PrinterColumn]>,
    include: IncludeObject,
    now_unix_secs: i64,
    resource_version: &str,
    continue_token: Option<&str>,
) -> Value {
    let columns = match custom {
        Some(pc) => Columns::Custom(pc),
        None => match crate::kinds::STRATEGIES.builtin(group, resource).and_then(|s| s.table()) {
            Some(p) => Columns::Builtin(p),
            None => Columns::Default,
        },
    };
    render(columns, items, &TableContext { include, now_unix_secs, resource_version, continue_token })
}

#[test]
fn human_duration_edges() {
    let cases = [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (5, "5s"),
        (119, "119s"),
        (120, "2m"),
        (200, "3m20s"),
        (599, "9m59s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (4 * 3600, "4h"),
        (7 * 3600 + 59 * 60, "7h59m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (51 * 3600, "2d3h"),
        (7 * 86400, "7d"),
        (45 * 86400, "45d"),
        (729 * 86400, "729d"),
        (3 * 365 * 86400, "3y"),
        (3 * 365 * 86400 + 12 * 86400, "3y12d"),
        (9 * 365 * 86400 + 5 * 86400, "9y"),
    ];
    for (secs, want) in cases {
        assert_eq!(human_duration(secs), want, "{secs}s");
    }
}

#[test]
fn pod_table_shape() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Succeeded"}});
    let t = build_table("", "pods", &[pod], None, IncludeObject::Metadata, 0, "42", Some("tok"));
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(t["metadata"], json!({"resourceVersion": "42", "continue": "tok"}));
    let names: Vec<&str> =
        t["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]
    );
    assert_eq!(t["columnDefinitions"][0]["format"], "name");
    assert_eq!(t["columnDefinitions"][5]["priority"], 1);
    let row = &t["rows"][0];
    assert_eq!(row["cells"][1], "0/2");
    assert_eq!(row["conditions"][0]["reason"], "Succeeded");
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(row["object"]["metadata"]["namespace"], "ns");
}

#[test]
fn crd_table_with_printer_columns() {
    let cols: Vec<PrinterColumn> = [
        json!({"name": "From", "type": "string", "jsonPath": ".spec.from"}),
        json!({"name": "Number", "type": "integer", "jsonPath": ".spec.number", "description": "how many"}),
        json!({"name": "Wide", "type": "string", "jsonPath": ".spec.nested", "priority": 1}),
        json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
    ]
    .iter()
    .filter_map(PrinterColumn::from_crd_json)
    .collect();
    assert_eq!(cols.len(), 4);
    assert!(PrinterColumn::from_crd_json(&json!({"name": "x", "type": "string"})).is_none());
    let item = json!({"apiVersion": "example.com/v1", "kind": "Greeting",
        "metadata": {"name": "hello", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"from": "alice", "number": 7, "nested": {"z": 1, "a": 2}}});
    let now = "2026-01-01T00:05:00Z".parse::<jiff::Timestamp>().unwrap().as_second();
    let t = build_table(
        "example.com",
        "greetings",
        std::slice::from_ref(&item),
        Some(&cols),
        IncludeObject::Object,
        now,
        "7",
        None,
    );
    let defs = t["columnDefinitions"].as_array().unwrap();
    assert_eq!(defs.len(), 5);
    assert_eq!(defs[0]["name"], "Name");
    assert_eq!(defs[1]["description"], "Custom resource definition column (in JSONPath format): .spec.from");
    assert_eq!(defs[2]["type"], "integer");
    assert_eq!(defs[2]["description"], "how many");
    assert_eq!(defs[3]["priority"], 1);
    assert_eq!(t["rows"][0]["cells"], json!(["hello", "alice", 7, "{\"a\":2,\"z\":1}", "5m"]));
    assert_eq!(t["rows"][0]["object"], item);
    assert!(t["metadata"].get("continue").is_none());
    let missing = json!({"metadata": {"name": "m"}, "spec": {}});
    let t = build_table("example.com", "greetings", &[missing], Some(&cols), IncludeObject::None, now, "", None);
    assert_eq!(t["rows"][0]["cells"], json!(["m", null, null, null, null]));
    assert_eq!(t["rows"][0]["object"], Value::Null);
    let t = build_table("example.com", "greetings", &[item], Some(&[]), IncludeObject::Metadata, now, "1", None);
    assert_eq!(t["columnDefinitions"][1]["name"], "Age");
    assert_eq!(t["columnDefinitions"][1]["type"], "date");
    assert_eq!(t["rows"][0]["cells"], json!(["hello", "5m"]));
}

#[test]
fn default_and_crd_resource_tables() {
    let crd = json!({"metadata": {"name": "widgets.example.com", "creationTimestamp": "2026-11-22T03:53:23Z"}});
    for (g, r) in [("apiextensions.k8s.io", "customresourcedefinitions"), ("rbac.authorization.k8s.io", "roles")] {
        let t = build_table(g, r, std::slice::from_ref(&crd), None, IncludeObject::Metadata, 0, "1", None);
        assert_eq!(t["columnDefinitions"][1]["name"], "Created At");
        assert_eq!(t["rows"][0]["cells"], json!(["widgets.example.com", "2026-11-22T03:53:23Z"]));
    }
    assert!(has_builtin_printer("apps", "deployments") && !has_builtin_printer("", "widgets"));
    let t = build_table("", "configmaps", &[], None, IncludeObject::Metadata, 0, "", None);
    assert_eq!(t["rows"], json!([]));
    assert_eq!(t["metadata"], json!({}));
    assert_eq!(IncludeObject::from_query(""), Some(IncludeObject::Metadata));
    assert_eq!(IncludeObject::from_query("bogus"), None);
}
