//! RBAC from source markers: scans `*.rs` files for `+kubebuilder:rbac:` / `+opkit:rbac:`
//! comment markers and renders `config/rbac/role.yaml` the way controller-gen's
//! `rbac:roleName=<name>` generator does (see `render` for the normalisation and output form).

mod render;

pub use render::{render_roles, role_objects};

use std::fmt;
use std::path::{Path, PathBuf};

/// Marker prefixes that introduce an RBAC rule.
const PREFIXES: [&str; 2] = ["+kubebuilder:rbac:", "+opkit:rbac:"];

/// Keys a marker may carry.
const KNOWN_KEYS: &str = "groups, resources, resourceNames, verbs, urls, namespace, roleName";

/// Verbs accepted in markers (besides `*`): the Kubernetes API verbs, the special RBAC verbs, and
/// the lower-cased HTTP verbs used for non-resource URLs.
const KNOWN_VERBS: [&str; 19] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "use",
    "bind",
    "escalate",
    "impersonate",
    "approve",
    "sign",
    "attest",
    "post",
    "put",
    "head",
    "options",
];

/// One parsed `+kubebuilder:rbac:` marker with the place it came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RbacMarker {
    /// API groups; `core` has already been turned into the core group `""`.
    pub groups: Vec<String>,
    /// Resources, possibly with subresources (`memcacheds/status`).
    pub resources: Vec<String>,
    /// Object names the rule is restricted to.
    pub resource_names: Vec<String>,
    /// Verbs (`get`, `list`, ..., or `*`).
    pub verbs: Vec<String>,
    /// Non-resource URLs (`/metrics`).
    pub urls: Vec<String>,
    /// When set, the rule goes into a namespaced `Role` in this namespace instead of the
    /// `ClusterRole`.
    pub namespace: Option<String>,
    /// Overrides the role name for this rule (controller-gen's `roleName=` marker argument).
    pub role_name: Option<String>,
    /// File the marker was found in (as reached from the scanned directory).
    pub file: PathBuf,
    /// 1-based line number of the marker.
    pub line: usize,
}

/// What is wrong with a marker or with scanning the sources.
#[derive(Debug, thiserror::Error)]
pub enum RbacError {
    /// A marker could not be parsed.
    #[error("{}:{line}: rbac marker: {reason}", file.display())]
    Marker {
        /// File holding the marker.
        file: PathBuf,
        /// 1-based line number.
        line: usize,
        /// Why the marker is rejected.
        reason: String,
    },
    /// A file or directory could not be read.
    #[error("reading {}: {source}", path.display())]
    Io {
        /// Path that failed.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Walks `*.rs` files under `src_dir` (recursively, in sorted path order) and parses every RBAC
/// marker. The first malformed marker is reported with its file and line.
pub fn scan_markers(src_dir: &Path) -> Result<Vec<RbacMarker>, RbacError> {
    let mut out = Vec::new();
    for (shown, text) in sources(src_dir)? {
        out.extend(parse_markers(&text, &shown)?);
    }
    Ok(out)
}

/// The `*.rs` files under `src_dir` (recursively, in sorted path order) with their text,
/// each named relative to the scanned directory's parent (`src/controller/x.rs`).
pub(crate) fn sources(src_dir: &Path) -> Result<Vec<(PathBuf, String)>, RbacError> {
    let mut files = Vec::new();
    collect_rs_files(src_dir, &mut files)?;
    files.sort();
    let base = src_dir.parent().unwrap_or(Path::new(""));
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).map_err(|source| RbacError::Io { path: file.clone(), source })?;
            Ok((file.strip_prefix(base).unwrap_or(&file).to_path_buf(), text))
        })
        .collect()
}

/// The text of a `//`, `///` or `//!` comment line, trimmed; None for other lines.
pub(crate) fn comment_of(line: &str) -> Option<&str> {
    let comment = line.trim_start().strip_prefix("//")?;
    Some(comment.strip_prefix(['/', '!']).unwrap_or(comment).trim())
}

/// Markers opkit reads: RBAC rules and the scaffold's insertion points.
const UNDERSTOOD: [&str; 5] =
    ["+kubebuilder:rbac:", "+opkit:rbac:", "+kubebuilder:scaffold:", "+opkit:scaffold:", "+kubebuilder:webhook:"];

/// Every `+kubebuilder:` or `+opkit:` comment marker under `src_dir` that opkit does not
/// understand (a misspelt `+kubebuilder:rback:`, or a CRD marker, which opkit takes as
/// `#[kube]`/`#[schemars]` attributes instead), as `file:line: marker` for a warning.
pub fn unknown_markers(src_dir: &Path) -> Result<Vec<String>, RbacError> {
    let mut out = Vec::new();
    for (shown, text) in sources(src_dir)? {
        for (idx, raw) in text.lines().enumerate() {
            let Some(comment) = comment_of(raw) else { continue };
            let ours = comment.starts_with("+kubebuilder:") || comment.starts_with("+opkit:");
            if ours && !UNDERSTOOD.iter().any(|p| comment.starts_with(p)) {
                out.push(format!("{}:{}: {comment}", shown.display(), idx + 1));
            }
        }
    }
    Ok(out)
}

fn collect_rs_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), RbacError> {
    let io = |source| RbacError::Io { path: dir.to_path_buf(), source };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let path = entry.path();
        let ty = entry.file_type().map_err(io)?;
        if ty.is_dir() {
            collect_rs_files(&path, out)?;
        } else if ty.is_file() && path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Parses all RBAC markers in one file's text; `file` is only used for positions in errors.
pub fn parse_markers(text: &str, file: &Path) -> Result<Vec<RbacMarker>, RbacError> {
    let mut out = Vec::new();
    for (idx, raw) in text.lines().enumerate() {
        let Some(comment) = comment_of(raw) else { continue };
        let Some(args) = PREFIXES.iter().find_map(|p| comment.strip_prefix(p)) else { continue };
        let line = idx + 1;
        let marker = parse_args(args.trim_end()).map_err(|reason| RbacError::Marker {
            file: file.to_path_buf(),
            line,
            reason,
        })?;
        out.push(RbacMarker { file: file.to_path_buf(), line, ..marker });
    }
    Ok(out)
}

/// Splits `s` on `sep` outside double quotes.
fn split_unquoted(s: &str, sep: char) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut in_quote = false;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        if c == '"' {
            in_quote = !in_quote;
        } else if c == sep && !in_quote {
            parts.push(&s[start..i]);
            start = i + 1;
        }
    }
    if in_quote {
        return Err(format!("unterminated quote in {s:?}"));
    }
    parts.push(&s[start..]);
    Ok(parts)
}

/// Parses one list value (`a;b;c`, optionally `{a,b}`), unquoting `"..."` items.
fn parse_list(key: &str, value: &str) -> Result<Vec<String>, String> {
    let (body, sep) = match value.strip_prefix('{').and_then(|v| v.strip_suffix('}')) {
        Some(inner) => (inner, ','),
        None => (value, ';'),
    };
    let mut items = Vec::new();
    for item in split_unquoted(body, sep)? {
        let item = item.trim();
        let unquoted = match item.strip_prefix('"').and_then(|i| i.strip_suffix('"')) {
            Some(inner) => inner,
            None if item.contains('"') => return Err(format!("bad quoting in {key} value {value:?}")),
            None if item.is_empty() => return Err(format!("empty item in {key} value {value:?}")),
            None => item,
        };
        items.push(unquoted.to_string());
    }
    Ok(items)
}

fn parse_args(args: &str) -> Result<RbacMarker, String> {
    let mut m = RbacMarker::default();
    let mut seen = Vec::new();
    if args.is_empty() {
        return Err("no arguments (expected key=value pairs)".into());
    }
    for pair in split_top_level(args)? {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!("bad syntax {pair:?} (expected key=value)"));
        };
        let key = key.trim();
        let value = value.trim();
        if seen.contains(&key) {
            return Err(format!("duplicate key {key:?}"));
        }
        seen.push(key);
        if value.is_empty() {
            return Err(format!("empty value for {key:?}"));
        }
        match key {
            "groups" => {
                m.groups =
                    parse_list(key, value)?.into_iter().map(|g| if g == "core" { String::new() } else { g }).collect();
            }
            "resources" => m.resources = parse_list(key, value)?,
            "resourceNames" => m.resource_names = parse_list(key, value)?,
            "verbs" => m.verbs = parse_list(key, value)?,
            "urls" => m.urls = parse_list(key, value)?,
            "namespace" => m.namespace = Some(parse_single(key, value)?),
            "roleName" => m.role_name = Some(parse_single(key, value)?),
            other => return Err(format!("unknown key {other:?} (expected one of {KNOWN_KEYS})")),
        }
    }
    if m.verbs.is_empty() {
        return Err("missing verbs".into());
    }
    if let Some(v) = m.verbs.iter().find(|v| *v != "*" && !KNOWN_VERBS.contains(&v.as_str())) {
        return Err(format!("unknown verb {v:?} (expected one of {} or *)", KNOWN_VERBS.join(", ")));
    }
    if m.resources.is_empty() && m.urls.is_empty() {
        return Err("missing resources and urls (one of them is required)".into());
    }
    if !m.resources.is_empty() && m.groups.is_empty() {
        return Err("resources without groups (use groups=core for the core API group)".into());
    }
    if !m.urls.is_empty() && !m.resources.is_empty() {
        return Err("urls cannot be combined with resources in one rule".into());
    }
    if !m.urls.is_empty() && m.namespace.is_some() {
        return Err("urls are cluster-wide and cannot have a namespace".into());
    }
    Ok(m)
}

/// Splits `key=value,key=value` on commas that are outside quotes and `{...}`.
fn split_top_level(args: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut in_quote, mut start) = (0usize, false, 0);
    for (i, c) in args.char_indices() {
        match c {
            '"' => in_quote = !in_quote,
            '{' if !in_quote => depth += 1,
            '}' if !in_quote => depth = depth.checked_sub(1).ok_or("unbalanced '}'")?,
            ',' if !in_quote && depth == 0 => {
                parts.push(&args[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if in_quote || depth != 0 {
        return Err("unbalanced quotes or braces".into());
    }
    parts.push(&args[start..]);
    Ok(parts)
}

fn parse_single(key: &str, value: &str) -> Result<String, String> {
    let v = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
    if v.is_empty() || v.contains(['"', ';']) {
        return Err(format!("bad {key} value {value:?}"));
    }
    Ok(v.to_string())
}

impl fmt::Display for RbacMarker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err_of(line: &str) -> String {
        let text = format!("fn main() {{}}\n\n{line}\n");
        match parse_markers(&text, Path::new("src/controller/memcached.rs")) {
            Ok(m) => panic!("expected an error for {line:?}, got {m:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn unknown_markers_are_found_with_file_and_line() {
        let tmp = tempfile::tempdir().expect("tmp");
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).expect("mkdir");
        std::fs::write(
            src.join("main.rs"),
            "// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get\n\
             // +kubebuilder:rback:groups=apps,resources=pods,verbs=get\n\
             // +kubebuilder:scaffold:imports\n\
             /// +kubebuilder:validation:Minimum=1\n",
        )
        .expect("write");
        let found = unknown_markers(&src).expect("scan");
        assert_eq!(
            found,
            [
                "src/main.rs:2: +kubebuilder:rback:groups=apps,resources=pods,verbs=get",
                "src/main.rs:4: +kubebuilder:validation:Minimum=1"
            ]
        );
    }

    #[test]
    fn parses_prefixes_and_core_group() {
        let text = "// +kubebuilder:rbac:groups=core,resources=pods,verbs=get;list\n\
                    ///+opkit:rbac:groups=apps;\"\",resources=deployments,verbs=*\n\
                    //! +kubebuilder:rbac:urls=/metrics,verbs=get\n\
                    // kubebuilder:rbac:groups=x,resources=y,verbs=get\n\
                    let s = \"+kubebuilder:rbac:nope\";\n";
        let m = parse_markers(text, Path::new("a.rs")).expect("parse");
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].groups, vec![""]);
        assert_eq!(m[0].verbs, vec!["get", "list"]);
        assert_eq!(m[1].groups, vec!["apps", ""]);
        assert_eq!(m[1].verbs, vec!["*"]);
        assert_eq!(m[1].line, 2);
        assert_eq!(m[2].urls, vec!["/metrics"]);
    }

    #[test]
    fn malformed_markers_report_file_and_line() {
        let cases = [
            ("//+kubebuilder:rbac:groups=apps,resources=deployments,verb=get", "unknown key \"verb\""),
            ("//+kubebuilder:rbac:groups=apps,resources=deployments", "missing verbs"),
            ("//+kubebuilder:rbac:groups=apps,verbs=get", "missing resources and urls"),
            ("//+kubebuilder:rbac:groups=,resources=deployments,verbs=get", "empty value for \"groups\""),
            ("//+kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;fetch", "unknown verb \"fetch\""),
            ("//+kubebuilder:rbac:groups=apps,resources,verbs=get", "bad syntax \"resources\""),
            ("//+kubebuilder:rbac:groups=apps,resources=a;;b,verbs=get", "empty item"),
            ("//+kubebuilder:rbac:groups=\"apps,resources=a,verbs=get", "unbalanced"),
            ("//+kubebuilder:rbac:", "no arguments"),
        ];
        for (line, reason) in cases {
            let e = err_of(line);
            assert!(e.starts_with("src/controller/memcached.rs:3: rbac marker: "), "{e}");
            assert!(e.contains(reason), "{line}: {e}");
        }
        assert!(err_of("//+kubebuilder:rbac:groups=apps,resources=d,verb=get").contains("(expected one of groups"));
    }

    #[test]
    fn scans_sorted_recursively() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("controller")).expect("mkdir");
        std::fs::write(root.join("main.rs"), "//+kubebuilder:rbac:groups=core,resources=pods,verbs=get\n")
            .expect("write");
        std::fs::write(
            root.join("controller/a.rs"),
            "\n//+kubebuilder:rbac:groups=apps,resources=deployments,verbs=get\n",
        )
        .expect("write");
        std::fs::write(root.join("notes.txt"), "//+kubebuilder:rbac:bogus\n").expect("write");
        let m = scan_markers(root).expect("scan");
        let top = root.file_name().map(PathBuf::from).unwrap_or_default();
        assert_eq!(m[1].file, top.join("main.rs"), "paths are shown relative to the scanned dir's parent");
        assert_eq!(m.len(), 2);
        assert!(m[0].file.ends_with("controller/a.rs"));
        assert_eq!(m[0].line, 2);
        assert!(m[1].file.ends_with("main.rs"));

        std::fs::write(root.join("controller/b.rs"), "// +opkit:rbac:groups=apps\n").expect("write");
        let e = scan_markers(root).expect_err("bad marker").to_string();
        assert!(e.contains("controller/b.rs:1: rbac marker: missing verbs"), "{e}");
        assert!(matches!(scan_markers(&root.join("nope")), Err(RbacError::Io { .. })));
    }
}
