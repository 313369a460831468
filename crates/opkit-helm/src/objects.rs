//! The methods of Helm's objects ([`Object`], a kind of template value) that templates
//! reach through the top-level data:
//! `.Files` (Get, GetBytes, Glob, AsConfig, AsSecrets, Lines), `.Capabilities.APIVersions`
//! (Has) and `.Capabilities.KubeVersion` (prints as its version).

use std::collections::BTreeMap;
use std::rc::Rc;

use base64::Engine as _;

use crate::value::{IntType, Object, Value};

impl Object {
    /// Go's type name, for `typeOf`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Object::Files(_) => "chart.Files",
            Object::ApiVersions(_) => "chartutil.VersionSet",
            Object::KubeVersion { .. } => "*chartutil.KubeVersion",
        }
    }

    /// Go's truth: `.Files` and `.Capabilities.APIVersions` are a map and a slice (false
    /// when empty, so `if .Files.Glob "x/*"` is false without matches).
    pub fn truthy(&self) -> bool {
        match self {
            Object::Files(f) => !f.is_empty(),
            Object::ApiVersions(v) => !v.is_empty(),
            Object::KubeVersion { .. } => true,
        }
    }

    /// A field or a method call on the object.
    pub fn field(&self, name: &str, args: Vec<Value>) -> Result<Value, String> {
        let arg = |i: usize| -> String { args.get(i).map(crate::value::go_string).unwrap_or_default() };
        match (self, name) {
            (Object::Files(files), "Get") => {
                Ok(Value::str(files.get(&arg(0)).map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default()))
            }
            (Object::Files(files), "GetBytes") => Ok(Value::list(
                files
                    .get(&arg(0))
                    .map(|b| b.iter().map(|x| Value::Int(i64::from(*x), IntType::Uint8)).collect())
                    .unwrap_or_default(),
            )),
            (Object::Files(files), "Glob") => {
                let pattern = glob_regex(&arg(0));
                Ok(Value::Object(Rc::new(Object::Files(
                    files
                        .iter()
                        .filter(|(k, _)| pattern.as_ref().is_some_and(|p| p.is_match(k)))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ))))
            }
            (Object::Files(files), "AsConfig") => {
                Ok(Value::str(files_as_map(files, |b| String::from_utf8_lossy(b).into_owned())))
            }
            (Object::Files(files), "AsSecrets") => {
                Ok(Value::str(files_as_map(files, |b| base64::engine::general_purpose::STANDARD.encode(b))))
            }
            (Object::Files(files), "Lines") => {
                let Some(b) = files.get(&arg(0)) else { return Ok(Value::list(Vec::new())) };
                let s = String::from_utf8_lossy(b);
                let s = s.strip_suffix('\n').unwrap_or(&s);
                Ok(Value::list(s.split('\n').map(Value::str).collect()))
            }
            (Object::ApiVersions(versions), "Has") => Ok(Value::Bool(versions.iter().any(|v| *v == arg(0)))),
            (Object::KubeVersion { version, .. }, "Version" | "GitVersion" | "String") => {
                Ok(Value::str(version.as_str()))
            }
            (Object::KubeVersion { major, .. }, "Major") => Ok(Value::str(major.as_str())),
            (Object::KubeVersion { minor, .. }, "Minor") => Ok(Value::str(minor.as_str())),
            _ => Err(format!("can't evaluate field {name} in type {}", self.type_name())),
        }
    }

    /// What `range` iterates over, when the object is a collection.
    pub fn range_items(&self) -> Option<Vec<(Value, Value)>> {
        match self {
            Object::ApiVersions(v) => {
                Some(v.iter().enumerate().map(|(i, s)| (Value::int(i as i64), Value::str(s.as_str()))).collect())
            }
            Object::Files(f) => Some(
                f.iter()
                    .map(|(k, v)| (Value::str(k.as_str()), Value::str(String::from_utf8_lossy(v).into_owned())))
                    .collect(),
            ),
            Object::KubeVersion { .. } => None,
        }
    }

    /// The object as plain data (for `toYaml`, `toJson`).
    pub fn to_value(&self) -> Value {
        match self {
            Object::ApiVersions(v) => Value::list(v.iter().map(|s| Value::str(s.as_str())).collect()),
            Object::Files(f) => Value::map(
                f.iter()
                    .map(|(k, v)| {
                        let b64 = base64::engine::general_purpose::STANDARD.encode(v);
                        (k.clone(), Value::str(b64))
                    })
                    .collect(),
            ),
            Object::KubeVersion { version, major, minor } => Value::map(BTreeMap::from([
                ("Version".to_string(), Value::str(version.as_str())),
                ("Major".to_string(), Value::str(major.as_str())),
                ("Minor".to_string(), Value::str(minor.as_str())),
            ])),
        }
    }

    /// The object as `fmt` prints it.
    pub fn to_go_string(&self) -> String {
        match self {
            Object::KubeVersion { version, .. } => version.clone(),
            Object::ApiVersions(v) => format!("[{}]", v.join(" ")),
            Object::Files(f) => {
                let inner: Vec<String> = f.iter().map(|(k, v)| format!("{k}:{v:?}")).collect();
                format!("map[{}]", inner.join(" "))
            }
        }
    }
}

/// `toYaml` of a map from each file's base name to its content (`AsConfig`/`AsSecrets`).
fn files_as_map(files: &BTreeMap<String, Rc<[u8]>>, encode: impl Fn(&[u8]) -> String) -> String {
    if files.is_empty() {
        return String::new();
    }
    let map: BTreeMap<String, Value> =
        files.iter().map(|(k, v)| (k.rsplit('/').next().unwrap_or(k).to_string(), Value::str(encode(v)))).collect();
    let y = crate::yaml::to_yaml(&Value::map(map));
    y.strip_suffix('\n').unwrap_or(&y).to_string()
}

/// A gobwas/glob pattern with `/` as separator: `*` and `?` stay within a path segment,
/// `**` crosses segments, `{a,b}` alternates, `[...]` classes.
pub fn glob_regex(pattern: &str) -> Option<regex::Regex> {
    let mut re = String::from("^");
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    let mut in_alt = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' if chars.get(i + 1) == Some(&'*') => {
                re.push_str(".*");
                i += 1;
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '{' => {
                in_alt += 1;
                re.push_str("(?:");
            }
            '}' if in_alt > 0 => {
                in_alt -= 1;
                re.push(')');
            }
            ',' if in_alt > 0 => re.push('|'),
            '[' => {
                let end = chars[i..].iter().position(|c| *c == ']').map(|p| p + i)?;
                let mut class: String = chars[i + 1..end].iter().collect();
                if let Some(rest) = class.strip_prefix('!') {
                    class = format!("^{rest}");
                }
                re.push('[');
                re.push_str(&class);
                re.push(']');
                i = end;
            }
            '\\' if i + 1 < chars.len() => {
                re.push_str(&regex::escape(&chars[i + 1].to_string()));
                i += 1;
            }
            c => re.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    re.push('$');
    regex::Regex::new(&re).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_helm_matches_them() {
        let g = glob_regex("files/*.conf").expect("glob");
        assert!(g.is_match("files/a.conf"));
        assert!(!g.is_match("files/sub/a.conf"));
        assert!(glob_regex("files/**.conf").expect("glob").is_match("files/sub/a.conf"));
        assert!(glob_regex("{a,b}.txt").expect("glob").is_match("b.txt"));
    }
}
