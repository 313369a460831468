//! Server-side Table output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`),
//! built as kube-apiserver does: built-in printers (always wide), CRD
//! `additionalPrinterColumns`, and the default `NAME`/`CREATED AT` table.
//!
//! Each built-in printer is a function returning a `Printer`, grouped by API concept
//! (core, workloads, pods, events, networking, storage ...). Which resource uses which
//! printer is decided by the resource's strategy (the crate-private `kinds` module), not here.

pub(crate) mod admission;
pub(crate) mod aggregation;
pub(crate) mod autoscaling;
pub(crate) mod certificates;
pub(crate) mod coordination;
pub(crate) mod core;
mod custom;
pub(crate) mod events;
pub(crate) mod flowcontrol;
pub(crate) mod networking;
pub(crate) mod node;
pub(crate) mod pods;
pub(crate) mod policy;
pub(crate) mod rbac;
pub(crate) mod storage;
mod util;
pub(crate) mod workloads;

use serde_json::{Map, Value, json};

/// Produces the cells of one row from an object and "now" (unix seconds).
pub(crate) type RowFn = fn(&Value, i64) -> Vec<Value>;

/// A built-in printer: its columns, how to print a row, and (pods) the row conditions.
pub(crate) struct Printer {
    columns: Vec<util::Col>,
    row: RowFn,
    conditions: Option<fn(&Value) -> Option<Value>>,
}

impl Printer {
    /// A printer from its columns and row function.
    pub(crate) fn of((columns, row): (Vec<util::Col>, RowFn)) -> Printer {
        Printer { columns, row, conditions: None }
    }

    /// Adds the `conditions` each row carries (kube sets them for pods only).
    pub(crate) fn with_conditions(mut self, conditions: fn(&Value) -> Option<Value>) -> Printer {
        self.conditions = Some(conditions);
        self
    }
}

/// Which columns a Table has.
pub(crate) enum Columns<'a> {
    /// A built-in printer.
    Builtin(Printer),
    /// A custom resource's `additionalPrinterColumns` (NAME and Age when empty).
    Custom(&'a [PrinterColumn]),
    /// kube's default `NAME` / `CREATED AT` table.
    Default,
}

/// Where a Table sits in a response: what rows carry, "now", and list metadata.
pub(crate) struct TableContext<'a> {
    /// What each row's `object` carries.
    pub include: IncludeObject,
    /// Unix seconds, for ages.
    pub now_unix_secs: i64,
    /// `metadata.resourceVersion` of the Table (omitted when empty).
    pub resource_version: &'a str,
    /// `metadata.continue` of the Table (omitted when empty).
    pub continue_token: Option<&'a str>,
}

/// What each row's `object` carries (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// `None`: no object (`"object": null`).
    None,
    /// `Metadata` (the default): a `meta.k8s.io/v1` `PartialObjectMetadata` with the object's metadata.
    #[default]
    Metadata,
    /// `Object`: the full object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query value (`""` means `Metadata`); `None` for an unknown value.
    pub fn from_query(v: &str) -> Option<Self> {
        match v {
            "" | "Metadata" => Some(Self::Metadata),
            "None" => Some(Self::None),
            "Object" => Some(Self::Object),
            _ => None,
        }
    }
}

/// One CRD `additionalPrinterColumns` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type: `integer`, `number`, `string`, `boolean` or `date`.
    pub type_: String,
    /// OpenAPI format hint (e.g. `name`), possibly empty.
    pub format: String,
    /// Human description, possibly empty.
    pub description: String,
    /// 0 for standard columns, >0 for `-o wide` ones.
    pub priority: i32,
    /// Simple JSONPath evaluated against each object, e.g. `.spec.replicas`.
    pub json_path: String,
}

impl PrinterColumn {
    /// Reads a column from CRD JSON (`name`, `type`, `format`, `description`, `priority`, `jsonPath`);
    /// `None` when `name`, `type` or `jsonPath` is missing.
    pub fn from_crd_json(v: &Value) -> Option<Self> {
        let st = |k: &str| v.get(k).and_then(Value::as_str);
        Some(PrinterColumn {
            name: st("name")?.to_string(),
            type_: st("type")?.to_string(),
            format: st("format").unwrap_or_default().to_string(),
            description: st("description").unwrap_or_default().to_string(),
            priority: v.get("priority").and_then(Value::as_i64).and_then(|p| i32::try_from(p).ok()).unwrap_or(0),
            json_path: st("jsonPath")?.to_string(),
        })
    }
}

/// kube's `duration.HumanDuration` for a number of seconds ("5s", "3m20s", "4h", "2d3h", "45d", "3y").
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{dy}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
/// Whether kube has a dedicated printer for this resource (otherwise the default table is used).
pub fn has_builtin_printer(group: &str, resource: &str) -> bool {
    crate::kinds::builtin_strategy(group, resource).is_some_and(|s| s.table().is_some())
}

fn row_object(o: &Value, include: IncludeObject) -> Value {
    match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Object => o.clone(),
        IncludeObject::Metadata => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": o.get("metadata").cloned().unwrap_or_else(|| Value::Object(Map::new())),
        }),
    }
}

/// Builds a `meta.k8s.io/v1` Table for `items` of one resource.
///
/// `custom` = `Some(columns)` for a custom resource (NAME plus the CRD's columns; with no
/// columns NAME and Age). Otherwise the built-in printer for `group`/`resource` is used, or
/// kube's default NAME / CREATED AT table. Rows carry `object` per `include`.
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub fn build_table(
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
        None => match crate::kinds::builtin_strategy(group, resource).and_then(|s| s.table()) {
            Some(p) => Columns::Builtin(p),
            None => Columns::Default,
        },
    };
    render(columns, items, &TableContext { include, now_unix_secs, resource_version, continue_token })
}

/// Builds a `meta.k8s.io/v1` Table of `items` with `columns`.
pub(crate) fn render(columns: Columns<'_>, items: &[Value], ctx: &TableContext<'_>) -> Value {
    let now = ctx.now_unix_secs;
    let (cols, rows, conditions): (Vec<util::Col>, Vec<Vec<Value>>, _) = match columns {
        Columns::Custom(pc) => {
            let (cols, evals) = custom::columns(pc);
            (cols, items.iter().map(|o| custom::cells(o, now, &evals)).collect(), None)
        }
        Columns::Builtin(p) => (p.columns, items.iter().map(|o| (p.row)(o, now)).collect(), p.conditions),
        Columns::Default => {
            (custom::default_columns(), items.iter().map(|o| custom::default_row(o, now)).collect(), None)
        }
    };
    let rows: Vec<Value> = items
        .iter()
        .zip(rows)
        .map(|(o, cells)| {
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(cells));
            if let Some(c) = conditions.and_then(|f| f(o)) {
                row.insert("conditions".into(), c);
            }
            row.insert("object".into(), row_object(o, ctx.include));
            Value::Object(row)
        })
        .collect();
    let mut meta = Map::new();
    if !ctx.resource_version.is_empty() {
        meta.insert("resourceVersion".into(), Value::String(ctx.resource_version.into()));
    }
    if let Some(c) = ctx.continue_token.filter(|c| !c.is_empty()) {
        meta.insert("continue".into(), Value::String(c.into()));
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": cols.iter().map(util::Col::to_json).collect::<Vec<_>>(),
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
