//! Shared helpers for the Table printers: JSON navigation, column definitions,
//! kube's time/label/selector formatting and container layout.

use serde_json::{Map, Value};

use crate::selector::LabelSelector;

/// `metav1.ObjectMeta{}.SwaggerDoc()["name"]`.
pub(crate) const DESC_NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// `metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]`.
pub(crate) const DESC_CREATED: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

pub(crate) const DESC_CONTAINERS: &str = "Names of each container in the template.";
pub(crate) const DESC_IMAGES: &str = "Images referenced by each container in the template.";

/// One `metav1.TableColumnDefinition`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Col {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i32,
}

impl Col {
    pub(crate) fn to_json(&self) -> Value {
        serde_json::json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// A regular column.
pub(crate) fn col(name: &str, ty: &str, desc: &str) -> Col {
    Col { name: name.into(), type_: ty.into(), format: String::new(), description: desc.into(), priority: 0 }
}

/// A `-o wide` (priority 1) column.
pub(crate) fn wide(name: &str, ty: &str, desc: &str) -> Col {
    Col { priority: 1, ..col(name, ty, desc) }
}

/// The NAME column (format "name").
pub(crate) fn name_col() -> Col {
    Col { format: "name".into(), ..col("Name", "string", DESC_NAME) }
}

/// The AGE column.
pub(crate) fn age_col() -> Col {
    col("Age", "string", DESC_CREATED)
}

/// Walks a dotted path (`"spec.template.spec"`).
pub(crate) fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    if path.is_empty() {
        return Some(v);
    }
    path.split('.').try_fold(v, |cur, k| cur.get(k))
}

/// String at `path`, or "".
pub(crate) fn s<'a>(v: &'a Value, path: &str) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or("")
}

/// Integer at `path`, or `default`.
pub(crate) fn int(v: &Value, path: &str, default: i64) -> i64 {
    at(v, path).and_then(|x| x.as_i64().or_else(|| x.as_f64().map(|f| f as i64))).unwrap_or(default)
}

/// Boolean at `path`, or false.
pub(crate) fn boolean(v: &Value, path: &str) -> bool {
    at(v, path).and_then(Value::as_bool).unwrap_or(false)
}

/// Array at `path`, or empty.
pub(crate) fn arr<'a>(v: &'a Value, path: &str) -> &'a [Value] {
    at(v, path).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// Object at `path`, if any.
pub(crate) fn obj<'a>(v: &'a Value, path: &str) -> Option<&'a Map<String, Value>> {
    at(v, path).and_then(Value::as_object)
}

/// `s` or `<none>` when empty.
pub(crate) fn or_none(s: &str) -> String {
    if s.is_empty() { "<none>".into() } else { s.into() }
}

/// Parses an RFC3339 timestamp into unix seconds.
pub(crate) fn parse_ts(ts: &str) -> Option<i64> {
    ts.parse::<jiff::Timestamp>().ok().map(|t| t.as_second())
}

/// kube's `translateTimestampSince`: "<unknown>" for a missing time, else a human age.
pub(crate) fn since(v: &Value, path: &str, now: i64) -> String {
    match parse_ts(s(v, path)) {
        Some(t) => super::human_duration(now - t),
        None => "<unknown>".into(),
    }
}

/// The AGE cell of an object.
pub(crate) fn age(o: &Value, now: i64) -> Value {
    Value::String(since(o, "metadata.creationTimestamp", now))
}

/// The object's name.
pub(crate) fn name(o: &Value) -> Value {
    Value::String(s(o, "metadata.name").into())
}

/// `labels.FormatLabels`: sorted `k=v,...` or `<none>`.
pub(crate) fn format_labels(m: Option<&Map<String, Value>>) -> String {
    let mut pairs: Vec<String> =
        m.into_iter().flatten().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect();
    pairs.sort();
    if pairs.is_empty() { "<none>".into() } else { pairs.join(",") }
}

/// `metav1.LabelSelectorAsSelector(sel).String()`, or `None` when invalid.
pub(crate) fn selector_string(sel: Option<&Value>) -> Option<String> {
    LabelSelector::from_label_selector_json(sel.unwrap_or(&Value::Null)).ok().map(|s| s.to_string())
}

/// `metav1.FormatLabelSelector`: `<error>`, `<none>` or the selector string.
pub(crate) fn format_label_selector(sel: Option<&Value>) -> String {
    match selector_string(sel) {
        None => "<error>".into(),
        Some(s) if s.is_empty() => "<none>".into(),
        Some(s) => s,
    }
}

/// `layoutContainerCells`: comma-joined container names and images.
pub(crate) fn containers(pod_spec: Option<&Value>) -> (Value, Value) {
    let list = pod_spec.map_or(&[][..], |p| arr(p, "containers"));
    let names: Vec<&str> = list.iter().map(|c| s(c, "name")).collect();
    let images: Vec<&str> = list.iter().map(|c| s(c, "image")).collect();
    (Value::String(names.join(",")), Value::String(images.join(",")))
}

/// kube's `printBoolPtr`: "True"/"False" or "<unset>".
pub(crate) fn bool_ptr(v: Option<&Value>) -> Value {
    Value::String(match v.and_then(Value::as_bool) {
        Some(true) => "True".into(),
        Some(false) => "False".into(),
        None => "<unset>".into(),
    })
}

/// Sorted, de-duplicated IPs/hostnames of a load-balancer status (`status.loadBalancer.ingress`).
pub(crate) fn lb_ingress(status: Option<&Value>) -> String {
    let mut out: Vec<String> = status
        .map_or(&[][..], |s| arr(s, "ingress"))
        .iter()
        .filter_map(|i| {
            let ip = s(i, "ip");
            let host = s(i, "hostname");
            if !ip.is_empty() {
                Some(ip.to_string())
            } else if !host.is_empty() {
                Some(host.to_string())
            } else {
                None
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out.join(",")
}

/// `helper.GetAccessModesAsString`.
pub(crate) fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|x| x.as_str() == Some(m));
    let mut out = Vec::new();
    for (full, short) in
        [("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP")]
    {
        if has(full) {
            out.push(short);
        }
    }
    out.join(",")
}

/// The `(list, more, count, max)` rendering kube uses for long lists: `a,b,c + 2 more...`.
pub(crate) fn list_with_more(list: &[String], count: usize, max: usize, empty: &str) -> String {
    let shown: Vec<&str> = list.iter().take(max).map(String::as_str).collect();
    let ret = shown.join(",");
    if count > max {
        format!("{ret} + {} more...", count - max)
    } else if ret.is_empty() {
        empty.into()
    } else {
        ret
    }
}

/// A JSON integer cell.
pub(crate) fn i(n: i64) -> Value {
    Value::from(n)
}

/// A JSON string cell.
pub(crate) fn st(s: impl Into<String>) -> Value {
    Value::String(s.into())
}
