//! Values as Helm combines them: user values (`-f` files merged in order, then `--set`
//! parsed as `strvals` does), chart defaults coalesced under them (a user `null` deletes a
//! default), subchart values under the subchart's name with `global` copied down,
//! dependencies enabled by `condition`/`tags`, and `import-values`.

use std::collections::BTreeMap;

use crate::HelmError;
use crate::chart::Chart;
use crate::value::{Map, Value};

fn entries(m: &Map) -> Vec<(String, Value)> {
    m.borrow().iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn get(m: &Map, k: &str) -> Option<Value> {
    m.borrow().get(k).cloned()
}

fn new_map() -> Map {
    std::rc::Rc::new(std::cell::RefCell::new(BTreeMap::new()))
}

/// Helm's `mergeMaps`: `b` over `a`, maps merged deeply (a copy; `a` is not changed).
pub(crate) fn merge_maps(a: &Map, b: &Map) -> Map {
    let out = new_map();
    for (k, v) in entries(a) {
        out.borrow_mut().insert(k, v);
    }
    for (k, v) in entries(b) {
        if let Value::Map(bm) = &v
            && let Some(Value::Map(am)) = get(&out, &k)
        {
            let merged = merge_maps(&am, bm);
            out.borrow_mut().insert(k, Value::Map(merged));
            continue;
        }
        out.borrow_mut().insert(k, v);
    }
    out
}

/// Reads a values file (`-f`).
pub(crate) fn read_values_file(text: &str) -> Result<Map, HelmError> {
    match crate::yaml::from_yaml_str(text).map_err(HelmError::Values)? {
        Value::Map(m) => Ok(m),
        Value::Nil => Ok(new_map()),
        _ => Err(HelmError::Values("error unmarshaling JSON: while decoding JSON: json: cannot unmarshal into Go value of type map[string]interface {}".into())),
    }
}

/// strvals' `typedVal`: true/false/null, int64 unless it starts with 0, else a string.
fn typed_value(s: &str) -> Value {
    if s.eq_ignore_ascii_case("true") {
        return Value::Bool(true);
    }
    if s.eq_ignore_ascii_case("false") {
        return Value::Bool(false);
    }
    if s.eq_ignore_ascii_case("null") {
        return Value::Nil;
    }
    if s == "0" {
        return Value::int64(0);
    }
    if !s.is_empty()
        && !s.starts_with('0')
        && let Ok(i) = s.parse::<i64>()
    {
        return Value::int64(i);
    }
    Value::str(s)
}

/// Splits on `sep` where it is not escaped with `\` and not inside `{}`.
fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut depth = 0;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push('\\');
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '{' => {
                depth += 1;
                cur.push(c);
            }
            '}' => {
                depth -= 1;
                cur.push(c);
            }
            c if c == sep && depth == 0 => parts.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    parts.push(cur);
    parts
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[derive(Debug)]
enum PathPart {
    Key(String),
    Index(usize),
}

fn parse_key(key: &str) -> Result<Vec<PathPart>, HelmError> {
    let mut parts = Vec::new();
    for seg in split_unescaped(key, '.') {
        let (name, mut rest) = match seg.find('[') {
            Some(i) => (&seg[..i], &seg[i..]),
            None => (seg.as_str(), ""),
        };
        if !name.is_empty() {
            parts.push(PathPart::Key(unescape(name)));
        }
        while let Some(r) = rest.strip_prefix('[') {
            let end = r
                .find(']')
                .ok_or_else(|| HelmError::Values(format!("key {key:?} has no value (cannot end with ,)")))?;
            let idx: usize =
                r[..end].parse().map_err(|_| HelmError::Values(format!("failed to parse index in key {key:?}")))?;
            parts.push(PathPart::Index(idx));
            rest = &r[end + 1..];
        }
    }
    Ok(parts)
}

/// `strvals.ParseInto(set, dest)` for one `--set` argument.
pub(crate) fn parse_set_into(set: &str, dest: &Map, string_values: bool) -> Result<(), HelmError> {
    for assignment in split_unescaped(set, ',') {
        if assignment.is_empty() {
            continue;
        }
        let Some((key, raw)) = assignment.split_once('=') else {
            return Err(HelmError::Values(format!("key {assignment:?} has no value")));
        };
        let value = if raw.starts_with('{') && raw.ends_with('}') && !string_values {
            let inner = &raw[1..raw.len() - 1];
            Value::list(if inner.is_empty() {
                Vec::new()
            } else {
                split_unescaped(inner, ',').iter().map(|v| typed_value(&unescape(v))).collect()
            })
        } else if string_values {
            Value::str(unescape(raw))
        } else {
            typed_value(&unescape(raw))
        };
        let path = parse_key(key)?;
        set_path(&Value::Map(dest.clone()), &path, value)?;
    }
    Ok(())
}

fn set_path(container: &Value, path: &[PathPart], value: Value) -> Result<Value, HelmError> {
    let Some((first, rest)) = path.split_first() else { return Ok(value) };
    match first {
        PathPart::Key(k) => {
            let map = match container {
                Value::Map(m) => m.clone(),
                _ => new_map(),
            };
            let child =
                if rest.is_empty() { value } else { set_path(&get(&map, k).unwrap_or(Value::Nil), rest, value)? };
            map.borrow_mut().insert(k.clone(), child);
            Ok(Value::Map(map))
        }
        PathPart::Index(i) => {
            let mut list = match container {
                Value::List(l) => l.as_ref().clone(),
                _ => Vec::new(),
            };
            if *i > 65536 {
                return Err(HelmError::Values(format!(
                    "index of {i} is greater than maximum supported index of 65536"
                )));
            }
            if list.len() <= *i {
                list.resize(*i + 1, Value::Nil);
            }
            list[*i] = if rest.is_empty() { value } else { set_path(&list[*i], rest, value)? };
            Ok(Value::list(list))
        }
    }
}

/// Chartutil's `coalesce`: `dest` (user values) over the chart's defaults, then each
/// subchart's values under its name with globals copied down.
pub(crate) fn coalesce(chart: &Chart, dest: &Map, merge: bool) {
    coalesce_values(chart, dest, merge);
    coalesce_deps(chart, dest, merge);
}

fn coalesce_deps(chart: &Chart, dest: &Map, merge: bool) {
    for sub in &chart.subcharts {
        let sub_map = match get(dest, &sub.name) {
            None => {
                let m = new_map();
                dest.borrow_mut().insert(sub.name.clone(), Value::Map(m.clone()));
                m
            }
            Some(Value::Map(m)) => m,
            Some(_) => continue,
        };
        coalesce_globals(&sub_map, dest);
        coalesce(sub, &sub_map, merge);
    }
}

fn coalesce_globals(dest: &Map, src: &Map) {
    let dg = match get(dest, "global") {
        None => new_map(),
        Some(Value::Map(m)) => m,
        Some(_) => return,
    };
    let sg = match get(src, "global") {
        None => new_map(),
        Some(Value::Map(m)) => m,
        Some(_) => return,
    };
    for (key, val) in entries(&sg) {
        if let Value::Map(vm) = &val {
            let vv = match val.deep_copy() {
                Value::Map(m) => m,
                _ => vm.clone(),
            };
            match get(&dg, &key) {
                None => {
                    dg.borrow_mut().insert(key, Value::Map(vv));
                }
                Some(Value::Map(destv)) => {
                    coalesce_tables(&vv, &destv, true);
                    dg.borrow_mut().insert(key, Value::Map(vv));
                }
                Some(_) => {}
            }
        } else if matches!(get(&dg, &key), Some(Value::Map(_))) {
        } else {
            dg.borrow_mut().insert(key, val);
        }
    }
    dest.borrow_mut().insert("global".into(), Value::Map(dg));
}

fn coalesce_values(chart: &Chart, v: &Map, merge: bool) {
    let Value::Map(defaults) = chart.values.deep_copy() else { return };
    for (key, val) in entries(&defaults) {
        match get(v, &key) {
            Some(Value::Nil) if !merge => {
                v.borrow_mut().remove(&key);
            }
            Some(Value::Map(dest)) => {
                if let Value::Map(src) = &val {
                    let child_merge = merge || chart.subcharts.iter().any(|s| s.name == key);
                    coalesce_tables(&dest, src, child_merge);
                }
            }
            Some(_) => {}
            None => {
                v.borrow_mut().insert(key, val);
            }
        }
    }
}

/// `coalesceTablesFullKey`: `src` fills `dst`; `dst` wins; a `dst` null deletes unless merging.
pub(crate) fn coalesce_tables(dst: &Map, src: &Map, merge: bool) {
    for (key, val) in entries(src) {
        match get(dst, &key) {
            Some(Value::Nil) if !merge => {
                dst.borrow_mut().remove(&key);
            }
            None => {
                dst.borrow_mut().insert(key, val);
            }
            Some(Value::Map(dv)) => {
                if let Value::Map(sv) = &val {
                    coalesce_tables(&dv, sv, merge);
                }
            }
            Some(_) => {}
        }
    }
}

/// A value at a dotted path (`Values.PathValue`).
fn path_value(root: &Map, path: &str) -> Option<Value> {
    let mut cur = Value::Map(root.clone());
    for seg in path.split('.') {
        cur = match &cur {
            Value::Map(m) => get(m, seg)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Drops disabled dependencies (by `condition` and `tags`, on `user` values coalesced with
/// the chart's) and renames aliased ones, recursively.
pub(crate) fn process_dependency_enabled(chart: &mut Chart, user: &Map, path: &str) -> Result<(), HelmError> {
    if chart.dependencies.is_empty() {
        return Ok(());
    }
    let listed = |c: &Chart, deps: &[crate::chart::Dependency]| deps.iter().any(|d| d.name == c.name);
    let mut subcharts: Vec<Chart> =
        chart.subcharts.iter().filter(|c| !listed(c, &chart.dependencies)).cloned().collect();
    for dep in &mut chart.dependencies {
        if let Some(c) = chart.subcharts.iter().find(|c| c.name == dep.name) {
            let mut c = c.clone();
            if !dep.alias.is_empty() {
                c.name = dep.alias.clone();
                c.metadata["name"] = serde_json::Value::String(dep.alias.clone());
            }
            subcharts.push(c);
        }
        if !dep.alias.is_empty() {
            dep.name = dep.alias.clone();
        }
    }
    chart.subcharts = subcharts;
    let cvals = match Value::Map(user.clone()).deep_copy() {
        Value::Map(m) => m,
        _ => new_map(),
    };
    coalesce(chart, &cvals, false);
    let tags = match get(&cvals, "tags") {
        Some(Value::Map(t)) => Some(t),
        _ => None,
    };
    let mut disabled = Vec::new();
    for dep in &chart.dependencies {
        let mut enabled = true;
        if let Some(tags) = &tags {
            let (mut has_true, mut has_false) = (false, false);
            for t in &dep.tags {
                match get(tags, t) {
                    Some(Value::Bool(true)) => has_true = true,
                    Some(Value::Bool(false)) => has_false = true,
                    _ => {}
                }
            }
            if !has_true && has_false {
                enabled = false;
            }
        }
        for cond in dep.condition.trim().split(',') {
            if cond.is_empty() {
                continue;
            }
            if let Some(Value::Bool(b)) = path_value(&cvals, &format!("{path}{cond}")) {
                enabled = b;
                break;
            }
        }
        if !enabled {
            disabled.push(dep.name.clone());
        }
    }
    chart.subcharts.retain(|c| !disabled.contains(&c.name));
    chart.dependencies.retain(|d| !disabled.contains(&d.name));
    for sub in &mut chart.subcharts {
        let subpath = format!("{path}{}.", sub.name);
        process_dependency_enabled(sub, &cvals, &subpath)?;
    }
    Ok(())
}

/// `import-values`: children's values copied into the parent's (children first).
pub(crate) fn process_import_values(chart: &mut Chart) {
    for sub in &mut chart.subcharts {
        process_import_values(sub);
    }
    if chart.dependencies.is_empty() {
        return;
    }
    let cvals = new_map();
    coalesce(chart, &cvals, true);
    let imported = new_map();
    for dep in &chart.dependencies {
        for iv in &dep.import_values {
            let (child, parent) = match iv {
                Value::Map(m) => {
                    let s = |k: &str| get(m, k).and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
                    (s("child"), s("parent"))
                }
                Value::Str(s) => (format!("exports.{s}"), ".".to_string()),
                _ => continue,
            };
            let Some(Value::Map(table)) = path_value(&cvals, &format!("{}.{child}", dep.name)) else { continue };
            let Value::Map(table) = Value::Map(table).deep_copy() else { continue };
            let to_merge = if parent == "." || parent.is_empty() {
                table
            } else {
                let mut m = table;
                for seg in parent.split('.').rev() {
                    let wrapper = new_map();
                    wrapper.borrow_mut().insert(seg.to_string(), Value::Map(m));
                    m = wrapper;
                }
                m
            };
            // Earlier imports win over later ones (`MergeTables(b, ...)`).
            coalesce_tables(&imported, &to_merge, true);
        }
    }
    // The chart's values become its coalesced values; imports fill what they leave unset.
    let Value::Map(result) = Value::Map(cvals).deep_copy() else { return };
    coalesce_tables(&result, &imported, true);
    chart.values = Value::Map(result);
}
