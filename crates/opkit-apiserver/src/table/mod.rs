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
pub(crate) enum IncludeObject {
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
    pub(crate) fn from_query(v: &str) -> Option<Self> {
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
pub(crate) fn human_duration(seconds: i64) -> String {
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

fn row_object(o: &Value, include: IncludeObject) -> Value {
    match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Object => o.clone(),
        IncludeObject::Metadata => partial_object_metadata(o),
    }
}

/// An object's `meta.k8s.io/v1` `PartialObjectMetadata`: its metadata alone (what Table
/// rows include by default and what metadata-only clients ask for).
pub(crate) fn partial_object_metadata(o: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": o.get("metadata").cloned().unwrap_or_else(|| Value::Object(Map::new())),
    })
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
mod tests;
