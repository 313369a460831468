//! CSV markers on Rust API types: `+operator-sdk:csv:customresourcedefinitions:...` in the
//! comments above a kind's spec struct (displayName, resources, order) and above its spec
//! and status fields (type=spec|status, displayName, xDescriptors, order), read as
//! operator-sdk reads them from Go types, into the CSV's owned CRD descriptions.
//!
//! The kind is the struct carrying `#[kube(kind = "...")]` (kube's `CustomResource`
//! derive); its status is the struct named by `#[kube(status = "...")]`. Paths follow
//! serde's names (`rename_all`, `rename`), nested structs of the same sources, and `[0]`
//! for lists, as operator-sdk's paths follow JSON tags.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::csv::{ApiResourceReference, CrdDescription, Descriptor};

/// The marker prefix.
pub(crate) const CSV_MARKER: &str = "+operator-sdk:csv:customresourcedefinitions:";

/// A marker that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    /// A marker is malformed.
    #[error("{}:{line}: csv marker: {reason}", file.display())]
    Marker {
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A source file or directory could not be read.
    #[error("reading {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// A marker argument's value.
#[derive(Debug, Clone, PartialEq)]
enum Arg {
    Text(String),
    List(Vec<Arg>),
}

impl Arg {
    fn text(&self) -> String {
        match self {
            Arg::Text(t) => t.clone(),
            Arg::List(items) => items.iter().map(Arg::text).collect::<Vec<_>>().join(","),
        }
    }

    fn texts(&self) -> Vec<String> {
        match self {
            Arg::Text(t) => vec![t.clone()],
            Arg::List(items) => items.iter().map(Arg::text).collect(),
        }
    }
}

/// One marker: its arguments by key, where it was.
#[derive(Debug, Clone)]
struct Marker {
    args: BTreeMap<String, Arg>,
    file: PathBuf,
    line: usize,
}

impl Marker {
    fn get(&self, key: &str) -> Option<&Arg> {
        self.args.get(key)
    }

    fn order(&self) -> Result<Option<i64>, MarkerError> {
        self.get("order")
            .map(|o| {
                o.text().trim().parse::<i64>().map_err(|_| MarkerError::Marker {
                    file: self.file.clone(),
                    line: self.line,
                    reason: format!("order must be an integer, not {:?}", o.text()),
                })
            })
            .transpose()
    }
}

/// A struct field as the scanner saw it.
#[derive(Debug, Clone, Default)]
struct Field {
    rust_name: String,
    serde_name: Option<String>,
    skipped: bool,
    flattened: bool,
    ty: String,
    doc: String,
    markers: Vec<Marker>,
}

/// A struct as the scanner saw it.
#[derive(Debug, Clone, Default)]
struct Struct {
    name: String,
    doc: String,
    markers: Vec<Marker>,
    rename_all: Option<String>,
    kube: BTreeMap<String, String>,
    fields: Vec<Field>,
}

/// Reads the CSV markers of every `*.rs` under `src` and returns the owned CRD
/// description of each kind found, keyed by `(group, version, kind)`.
pub fn scan_descriptions(src: &Path) -> Result<BTreeMap<(String, String, String), CrdDescription>, MarkerError> {
    let mut files = Vec::new();
    collect_rs(src, &mut files)?;
    files.sort();
    let mut structs = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|source| MarkerError::Io { path: file.clone(), source })?;
        for s in parse_structs(&text, file)? {
            structs.insert(s.name.clone(), s);
        }
    }
    let mut out = BTreeMap::new();
    for s in structs.values() {
        let Some(kind) = s.kube.get("kind") else { continue };
        let group = s.kube.get("group").cloned().unwrap_or_default();
        let version = s.kube.get("version").cloned().unwrap_or_default();
        let plural = s.kube.get("plural").cloned().unwrap_or_else(|| format!("{}s", kind.to_lowercase()));
        let mut description = CrdDescription {
            name: format!("{plural}.{group}"),
            version: version.clone(),
            kind: kind.clone(),
            display_name: display_name(kind),
            description: s.doc.clone(),
            ..CrdDescription::default()
        };
        for marker in &s.markers {
            if let Some(name) = marker.get("displayName") {
                description.display_name = name.text();
            }
            if let Some(resources) = marker.get("resources") {
                description.resources.extend(resource_refs(resources, marker)?);
            }
        }
        description.resources.sort_by(|a, b| (&a.name, &a.kind).cmp(&(&b.name, &b.kind)));
        description.spec_descriptors = descriptors(&structs, s, "spec")?;
        if let Some(status) = s.kube.get("status").and_then(|n| structs.get(last_segment(n))) {
            description.status_descriptors = descriptors(&structs, status, "status")?;
        }
        out.insert((group, version, kind.clone()), description);
    }
    Ok(out)
}

fn resource_refs(arg: &Arg, marker: &Marker) -> Result<Vec<ApiResourceReference>, MarkerError> {
    let items = match arg {
        Arg::List(items) => items.clone(),
        Arg::Text(_) => vec![arg.clone()],
    };
    items
        .iter()
        .map(|item| {
            let parts = item.texts();
            if parts.len() < 2 {
                return Err(MarkerError::Marker {
                    file: marker.file.clone(),
                    line: marker.line,
                    reason: format!("resource {parts:?} did not have at least a kind and a version"),
                });
            }
            Ok(ApiResourceReference {
                kind: parts[0].trim().to_string(),
                version: parts[1].trim().to_string(),
                name: parts.get(2).map(|n| n.trim().to_string()).unwrap_or_default(),
            })
        })
        .collect()
}

/// The descriptors of `kind` (`spec` or `status`) found under struct `root`, ordered by
/// their `order` then path, as operator-sdk orders them.
fn descriptors(structs: &BTreeMap<String, Struct>, root: &Struct, kind: &str) -> Result<Vec<Descriptor>, MarkerError> {
    let mut found: Vec<(i64, Descriptor)> = Vec::new();
    walk(structs, root, &mut Vec::new(), kind, &mut found, 0)?;
    found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.path.cmp(&b.1.path)));
    Ok(found.into_iter().map(|(_, d)| d).collect())
}

fn walk(
    structs: &BTreeMap<String, Struct>,
    s: &Struct,
    prefix: &mut Vec<String>,
    kind: &str,
    found: &mut Vec<(i64, Descriptor)>,
    depth: usize,
) -> Result<(), MarkerError> {
    if depth > 16 {
        return Ok(());
    }
    for field in &s.fields {
        if field.skipped {
            continue;
        }
        let (inner, list) = inner_type(&field.ty);
        let segment = if field.flattened { None } else { Some(json_name(field, s.rename_all.as_deref())) };
        let mut display = None;
        let mut x_descriptors = Vec::new();
        let mut order = None;
        let mut seen = false;
        for marker in &field.markers {
            let marker_type = marker.get("type").map(Arg::text).unwrap_or_default();
            if marker_type != kind {
                continue;
            }
            seen = true;
            if let Some(o) = marker.order()? {
                order = Some(o);
            }
            if display.is_none()
                && let Some(d) = marker.get("displayName")
            {
                display = Some(d.text());
            }
            if let Some(x) = marker.get("xDescriptors") {
                x_descriptors.extend(x.texts());
            }
        }
        if seen && let Some(segment) = &segment {
            let mut path: Vec<String> = prefix.clone();
            path.push(segment.clone());
            found.push((
                order.unwrap_or(i64::MAX),
                Descriptor {
                    path: path.join("."),
                    display_name: display.unwrap_or_else(|| display_name(&field.rust_name)),
                    description: field.doc.clone(),
                    x_descriptors,
                    value: None,
                },
            ));
        }
        if let Some(child) = structs.get(inner)
            && child.name != s.name
        {
            let pushed = match &segment {
                Some(segment) => {
                    prefix.push(if list { format!("{segment}[0]") } else { segment.clone() });
                    true
                }
                None => false,
            };
            walk(structs, child, prefix, kind, found, depth + 1)?;
            if pushed {
                prefix.pop();
            }
        }
    }
    Ok(())
}

/// The type a field holds, through `Option`, `Box`, `Vec` (then a list) and paths.
fn inner_type(ty: &str) -> (&str, bool) {
    let mut ty = ty.trim();
    let mut list = false;
    while let Some(open) = ty.find('<') {
        let outer = last_segment(&ty[..open]);
        if !["Option", "Box", "Vec", "Arc", "Rc"].contains(&outer) || !ty.ends_with('>') {
            break;
        }
        list |= outer == "Vec";
        ty = ty[open + 1..ty.len() - 1].trim();
    }
    (last_segment(ty), list)
}

fn last_segment(path: &str) -> &str {
    path.rsplit("::").next().unwrap_or(path).trim()
}

/// The JSON name serde gives a field.
fn json_name(field: &Field, rename_all: Option<&str>) -> String {
    if let Some(name) = &field.serde_name {
        return name.clone();
    }
    let name = field.rust_name.trim_start_matches("r#");
    match rename_all {
        Some("camelCase") => {
            let mut out = String::new();
            for (i, part) in name.split('_').filter(|p| !p.is_empty()).enumerate() {
                if i == 0 {
                    out.push_str(part);
                } else {
                    let mut chars = part.chars();
                    if let Some(c) = chars.next() {
                        out.extend(c.to_uppercase());
                        out.push_str(chars.as_str());
                    }
                }
            }
            out
        }
        Some("PascalCase") => name
            .split('_')
            .map(|p| {
                let mut c = p.chars();
                c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
            })
            .collect(),
        Some("kebab-case") => name.replace('_', "-"),
        Some("lowercase") => name.replace('_', "").to_lowercase(),
        _ => name.to_string(),
    }
}

/// operator-sdk's `k8sutil.GetDisplayName`: words split at `.`, `-`, `_`, spaces and
/// lower-to-upper case changes, each capitalised.
pub(crate) fn display_name(name: &str) -> String {
    let words: Vec<String> = name
        .split(['.', '-', '_', ' '])
        .filter(|w| !w.is_empty())
        .map(|word| {
            let mut out = String::new();
            let mut previous_upper = true;
            for (i, c) in word.chars().enumerate() {
                if c.is_uppercase() && i > 0 && !previous_upper {
                    out.push(' ');
                }
                previous_upper = c.is_uppercase();
                out.push(c);
            }
            out
        })
        .collect();
    words
        .join(" ")
        .split(' ')
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), MarkerError> {
    if !dir.exists() {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|source| MarkerError::Io { path: dir.to_path_buf(), source })?;
    for entry in entries {
        let path = entry.map_err(|source| MarkerError::Io { path: dir.to_path_buf(), source })?.path();
        if path.is_dir() {
            collect_rs(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// What precedes an item: its comments and attributes.
#[derive(Default)]
struct Preamble {
    doc: Vec<String>,
    markers: Vec<Marker>,
    attrs: String,
}

/// Scans one file's structs, their fields, and the comments and attributes of both.
fn parse_structs(text: &str, file: &Path) -> Result<Vec<Struct>, MarkerError> {
    let mut structs = Vec::new();
    let mut pre = Preamble::default();
    let mut open_attr = 0i32;
    let mut current: Option<Struct> = None;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if open_attr > 0 {
            pre.attrs.push_str(line);
            pre.attrs.push('\n');
            open_attr += bracket_balance(line);
            continue;
        }
        if let Some(comment) = line.strip_prefix("//") {
            let doc = comment.strip_prefix('/').is_some() && !comment.starts_with("//");
            let body = comment.trim_start_matches('/').trim();
            if let Some(args) = body.strip_prefix(CSV_MARKER) {
                pre.markers.push(Marker {
                    args: parse_args(args, file, index + 1)?,
                    file: file.to_path_buf(),
                    line: index + 1,
                });
            } else if doc && !body.starts_with('+') {
                pre.doc.push(body.to_string());
            }
            continue;
        }
        if line.starts_with("#[") {
            pre.attrs.push_str(line);
            pre.attrs.push('\n');
            open_attr = bracket_balance(line);
            continue;
        }
        if line.is_empty() {
            continue;
        }
        if let Some(s) = current.as_mut() {
            if line.starts_with('}') {
                if let Some(done) = current.take() {
                    structs.push(done);
                }
            } else if let Some(field) = parse_field(line, &pre) {
                s.fields.push(field);
            }
            pre = Preamble::default();
            continue;
        }
        if let Some(name) = struct_name(line) {
            let s = Struct {
                name: name.to_string(),
                doc: join_doc(&pre.doc),
                markers: std::mem::take(&mut pre.markers),
                rename_all: serde_arg(&pre.attrs, "rename_all"),
                kube: kube_args(&pre.attrs),
                fields: Vec::new(),
            };
            if line.ends_with('{') {
                current = Some(s);
            } else {
                structs.push(s);
            }
        }
        pre = Preamble::default();
    }
    Ok(structs)
}

fn bracket_balance(line: &str) -> i32 {
    let mut balance = 0;
    let mut in_string = false;
    let mut escaped = false;
    for c in line.chars() {
        if in_string {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => in_string = false,
                _ => escaped = false,
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' => balance += 1,
            ']' => balance -= 1,
            _ => {}
        }
    }
    balance
}

fn join_doc(lines: &[String]) -> String {
    lines.join(" ").split_whitespace().collect::<Vec<_>>().join(" ")
}

fn struct_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("pub ").or_else(|| line.strip_prefix("pub(crate) ")).unwrap_or(line);
    let rest = rest.strip_prefix("struct ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
    Some(&rest[..end]).filter(|n| !n.is_empty())
}

fn parse_field(line: &str, pre: &Preamble) -> Option<Field> {
    let mut rest = line;
    if let Some(r) = rest.strip_prefix("pub") {
        rest = r.trim_start();
        if rest.starts_with('(') {
            rest = rest[rest.find(')')? + 1..].trim_start();
        }
    }
    let colon = rest.find(':')?;
    let name = rest[..colon].trim();
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '#') {
        return None;
    }
    let ty = rest[colon + 1..].trim().trim_end_matches(',').trim();
    Some(Field {
        rust_name: name.to_string(),
        serde_name: serde_arg(&pre.attrs, "rename"),
        skipped: serde_flag(&pre.attrs, "skip") || serde_flag(&pre.attrs, "skip_serializing"),
        flattened: serde_flag(&pre.attrs, "flatten"),
        ty: ty.to_string(),
        doc: join_doc(&pre.doc),
        markers: pre.markers.clone(),
    })
}

/// The contents of every `#[serde(...)]` attribute.
fn serde_attrs(attrs: &str) -> Vec<&str> {
    attrs.match_indices("#[serde(").filter_map(|(i, m)| attrs[i + m.len()..].split(")]").next()).collect()
}

fn serde_arg(attrs: &str, key: &str) -> Option<String> {
    serde_attrs(attrs).into_iter().find_map(|a| quoted_arg(a, key))
}

fn serde_flag(attrs: &str, key: &str) -> bool {
    serde_attrs(attrs).into_iter().any(|a| split_top(a).iter().any(|p| p.trim() == key))
}

/// `key = "value"` among comma-separated arguments.
fn quoted_arg(args: &str, key: &str) -> Option<String> {
    split_top(args).into_iter().find_map(|part| {
        let (k, v) = part.split_once('=')?;
        (k.trim() == key).then(|| unquote(v.trim()))
    })
}

/// The `key = "value"` arguments of `#[kube(...)]` (nested calls such as `printcolumn(...)`
/// are skipped).
fn kube_args(attrs: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (i, m) in attrs.match_indices("#[kube(") {
        let body = &attrs[i + m.len()..];
        let end = body.rfind(")]").unwrap_or(body.len());
        for part in split_top(&body[..end]) {
            if let Some((k, v)) = part.split_once('=')
                && !k.contains('(')
            {
                out.insert(k.trim().to_string(), unquote(v.trim()));
            }
        }
    }
    out
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        v[1..v.len() - 1].replace("\\\"", "\"").replace("\\\\", "\\")
    } else {
        v.to_string()
    }
}

/// Splits at commas outside quotes, braces and parentheses.
fn split_top(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut depth = 0i32;
    let mut in_string = false;
    let mut escaped = false;
    for c in s.chars() {
        if in_string {
            current.push(c);
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => in_string = false,
                _ => escaped = false,
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '(' | '[' => depth += 1,
            '}' | ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        parts.push(current);
    }
    parts
}

/// Parses `key=value,key={a,b},key="text"` as controller-tools reads marker arguments.
fn parse_args(text: &str, file: &Path, line: usize) -> Result<BTreeMap<String, Arg>, MarkerError> {
    let err = |reason: String| MarkerError::Marker { file: file.to_path_buf(), line, reason };
    let mut args = BTreeMap::new();
    for part in split_top(text.trim()) {
        let Some((key, value)) = part.split_once('=') else {
            return Err(err(format!("argument {:?} is not key=value", part.trim())));
        };
        let key = key.trim();
        const KEYS: [&str; 5] = ["displayName", "resources", "type", "xDescriptors", "order"];
        if !KEYS.contains(&key) {
            return Err(err(format!("unknown argument {key:?} (known: {})", KEYS.join(", "))));
        }
        let value = parse_value(value.trim()).map_err(err)?;
        if key == "type" && !matches!(value.text().as_str(), "spec" | "status") {
            return Err(err(format!("type must be spec or status, not {:?}", value.text())));
        }
        args.insert(key.to_string(), value);
    }
    Ok(args)
}

fn parse_value(value: &str) -> Result<Arg, String> {
    if let Some(inner) = value.strip_prefix('{') {
        let inner = inner.strip_suffix('}').ok_or_else(|| format!("unbalanced braces in {value:?}"))?;
        return split_top(inner).iter().map(|item| parse_value(item.trim())).collect::<Result<_, _>>().map(Arg::List);
    }
    Ok(Arg::Text(unquote(value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_as_operator_sdk() {
        assert_eq!(display_name("Memcached"), "Memcached");
        assert_eq!(display_name("node_names"), "Node Names");
        assert_eq!(display_name("MemcachedBackup"), "Memcached Backup");
        assert_eq!(display_name("size"), "Size");
    }

    #[test]
    fn reads_type_and_field_markers() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("memcached.rs"),
            r#"
/// Memcached is the Schema for the memcacheds API
// +operator-sdk:csv:customresourcedefinitions:displayName="Memcached App",resources={{Deployment,v1,memcached-deployment},{Service,v1}}
#[derive(CustomResource)]
#[kube(group = "cache.example.com", version = "v1alpha1", kind = "Memcached",
    status = "MemcachedStatus", printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size"))]
#[serde(rename_all = "camelCase")]
pub struct MemcachedSpec {
    /// Size defines the number of Memcached instances
    // +operator-sdk:csv:customresourcedefinitions:type=spec,xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
    pub size: i32,
    /// Not described.
    pub other_field: String,
    // +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Cache",order=1
    pub cache_config: Option<CacheConfig>,
}

#[serde(rename_all = "camelCase")]
pub struct CacheConfig {
    /// Memory in MB.
    // +operator-sdk:csv:customresourcedefinitions:type=spec
    pub memory_limit: i32,
}

#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    /// Nodes store the name of the pods
    // +operator-sdk:csv:customresourcedefinitions:type=status
    #[serde(default)]
    pub node_names: Vec<String>,
}
"#,
        )
        .expect("write");
        let found = scan_descriptions(dir.path()).expect("scan");
        let d = &found[&("cache.example.com".to_string(), "v1alpha1".to_string(), "Memcached".to_string())];
        assert_eq!(d.name, "memcacheds.cache.example.com");
        assert_eq!(d.display_name, "Memcached App");
        assert_eq!(d.description, "Memcached is the Schema for the memcacheds API");
        assert_eq!(d.resources.len(), 2);
        assert_eq!(d.resources[1].name, "memcached-deployment");
        let paths: Vec<&str> = d.spec_descriptors.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(paths, ["cacheConfig", "cacheConfig.memoryLimit", "size"]);
        assert_eq!(d.spec_descriptors[0].display_name, "Cache");
        assert_eq!(d.spec_descriptors[2].x_descriptors, ["urn:alm:descriptor:com.tectonic.ui:podCount"]);
        assert_eq!(d.spec_descriptors[2].description, "Size defines the number of Memcached instances");
        assert_eq!(d.status_descriptors[0].path, "nodeNames");
        assert_eq!(d.status_descriptors[0].display_name, "Node Names");
    }

    #[test]
    fn a_bad_marker_names_file_and_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("a.rs"),
            "// +operator-sdk:csv:customresourcedefinitions:type=other\npub struct A {}\n",
        )
        .expect("write");
        let err = scan_descriptions(dir.path()).expect_err("bad marker");
        assert!(err.to_string().ends_with("a.rs:1: csv marker: type must be spec or status, not \"other\""), "{err}");
    }
}
