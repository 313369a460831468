//! Loading charts as Helm's loader does: a directory (honouring `.helmignore`) or a
//! `.tgz`, with `Chart.yaml` (v2), `values.yaml`, `values.schema.json`, `templates/`,
//! `crds/`, other files, and subcharts from `charts/` (directories and archives).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::HelmError;
use crate::value::Value;

/// A dependency listed in `Chart.yaml`.
#[derive(Debug, Clone, Default)]
pub struct Dependency {
    /// The chart's name.
    pub name: String,
    /// The version range.
    pub version: String,
    /// The name the parent uses for it (replaces `name` once processed).
    pub alias: String,
    /// Comma-separated value paths deciding whether it is enabled.
    pub condition: String,
    /// Tags enabling it.
    pub tags: Vec<String>,
    /// `import-values` entries (strings or `{child, parent}` maps).
    pub import_values: Vec<Value>,
    /// The dependency's raw entry, for `.Chart.Dependencies`.
    pub raw: serde_json::Value,
}

/// A loaded chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// `Chart.yaml` as read.
    pub metadata: serde_json::Value,
    /// The chart's name (an alias once dependencies are processed).
    pub name: String,
    /// `Chart.yaml`'s dependencies.
    pub dependencies: Vec<Dependency>,
    /// `values.yaml` (float64 numbers, as Helm reads it).
    pub values: Value,
    /// `values.schema.json`, if any.
    pub schema: Option<serde_json::Value>,
    /// Templates by path in the chart (`templates/x.yaml`), in load order.
    pub templates: Vec<(String, String)>,
    /// Other files by path in the chart, in load order.
    pub files: Vec<(String, Rc<[u8]>)>,
    /// Subcharts (from `charts/`).
    pub subcharts: Vec<Chart>,
    /// The chart's path from the root chart (`root/charts/sub`).
    pub full_path: String,
}

impl Chart {
    /// `type: library`.
    pub fn is_library(&self) -> bool {
        self.metadata.get("type").and_then(|t| t.as_str()) == Some("library")
    }

    /// The chart's version.
    pub fn version(&self) -> &str {
        self.metadata.get("version").and_then(|v| v.as_str()).unwrap_or("")
    }

    /// Sets the name and the full paths below it.
    pub fn set_full_path(&mut self, parent: Option<&str>) {
        self.full_path = match parent {
            Some(p) => format!("{p}/charts/{}", self.name),
            None => self.name.clone(),
        };
        let me = self.full_path.clone();
        for s in &mut self.subcharts {
            s.set_full_path(Some(&me));
        }
    }
}

/// Loads a chart from a directory or a `.tgz` archive.
pub fn load(path: &Path) -> Result<Chart, HelmError> {
    let meta =
        std::fs::metadata(path).map_err(|e| HelmError::Load(format!("path {:?} not found: {e}", path.display())))?;
    let files = if meta.is_dir() {
        read_dir_files(path)?
    } else {
        read_archive(&std::fs::read(path).map_err(|e| io_err(path, e))?)?
    };
    let mut chart = from_files(files)?;
    chart.set_full_path(None);
    Ok(chart)
}

fn io_err(path: &Path, e: std::io::Error) -> HelmError {
    HelmError::Load(format!("{}: {e}", path.display()))
}

/// Reads the files of an archive, without the top directory.
fn read_archive(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, HelmError> {
    let gz = flate2::read::GzDecoder::new(bytes);
    let mut files = Vec::new();
    let mut tar = TarReader { inner: gz };
    while let Some((name, data)) = tar.next_file()? {
        let name = name.trim_start_matches("./").to_string();
        let Some((_, rest)) = name.split_once('/') else { continue };
        if rest.is_empty() {
            continue;
        }
        files.push((rest.to_string(), data));
    }
    Ok(files)
}

/// A minimal ustar reader (regular files; GNU long names and PAX paths).
struct TarReader<R> {
    inner: R,
}

impl<R: std::io::Read> TarReader<R> {
    fn read_block(&mut self, buf: &mut [u8]) -> Result<bool, HelmError> {
        let mut read = 0;
        while read < buf.len() {
            let n = self
                .inner
                .read(&mut buf[read..])
                .map_err(|e| HelmError::Load(format!("reading chart archive: {e}")))?;
            if n == 0 {
                return if read == 0 { Ok(false) } else { Err(HelmError::Load("chart archive is truncated".into())) };
            }
            read += n;
        }
        Ok(true)
    }

    fn next_file(&mut self) -> Result<Option<(String, Vec<u8>)>, HelmError> {
        let mut long_name: Option<String> = None;
        loop {
            let mut header = [0u8; 512];
            if !self.read_block(&mut header)? || header.iter().all(|b| *b == 0) {
                return Ok(None);
            }
            let field = |range: std::ops::Range<usize>| {
                let f = &header[range];
                let end = f.iter().position(|b| *b == 0).unwrap_or(f.len());
                String::from_utf8_lossy(&f[..end]).into_owned()
            };
            let size_text = field(124..136);
            let size = u64::from_str_radix(size_text.trim(), 8)
                .map_err(|_| HelmError::Load("chart archive has a bad header".into()))? as usize;
            let mut data = vec![0u8; size.div_ceil(512) * 512];
            if !self.read_block(&mut data)? && size > 0 {
                return Err(HelmError::Load("chart archive is truncated".into()));
            }
            data.truncate(size);
            let kind = header[156];
            let mut name = field(0..100);
            let prefix = field(345..500);
            if !prefix.is_empty() && &header[257..262] == b"ustar" {
                name = format!("{prefix}/{name}");
            }
            match kind {
                b'L' => long_name = Some(String::from_utf8_lossy(&data).trim_end_matches('\0').to_string()),
                b'x' => {
                    let text = String::from_utf8_lossy(&data);
                    for line in text.lines() {
                        if let Some((_, kv)) = line.split_once(' ')
                            && let Some(p) = kv.strip_prefix("path=")
                        {
                            long_name = Some(p.to_string());
                        }
                    }
                }
                b'0' | 0 => return Ok(Some((long_name.take().unwrap_or(name), data))),
                _ => long_name = None,
            }
        }
    }
}

/// `.helmignore` rules.
struct IgnoreRules {
    rules: Vec<(bool, bool, regex::Regex, bool)>,
}

impl IgnoreRules {
    fn parse(text: &str) -> IgnoreRules {
        let mut rules = Vec::new();
        let mut push = |line: &str| {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                return;
            }
            let (negate, line) = match line.strip_prefix('!') {
                Some(l) => (true, l),
                None => (false, line),
            };
            let (dir_only, pat) = match line.strip_suffix('/') {
                Some(p) => (true, p),
                None => (false, line),
            };
            let has_slash = pat.contains('/');
            let pat = pat.trim_start_matches('/');
            if let Some(re) = crate::objects::glob_regex(pat) {
                rules.push((negate, dir_only, re, has_slash));
            }
        };
        push("templates/.?*");
        for line in text.lines() {
            push(line);
        }
        IgnoreRules { rules }
    }

    fn ignored(&self, rel: &str, is_dir: bool) -> bool {
        let base = rel.rsplit('/').next().unwrap_or(rel);
        let mut ignored = false;
        for (negate, dir_only, re, has_slash) in &self.rules {
            if *dir_only && !is_dir {
                continue;
            }
            let subject = if *has_slash { rel } else { base };
            if re.is_match(subject) {
                ignored = !negate;
            }
        }
        ignored
    }
}

fn read_dir_files(root: &Path) -> Result<Vec<(String, Vec<u8>)>, HelmError> {
    let rules = match std::fs::read_to_string(root.join(".helmignore")) {
        Ok(t) => IgnoreRules::parse(&t),
        Err(_) => IgnoreRules::parse(""),
    };
    let mut out = Vec::new();
    walk(root, root, &rules, &mut out)?;
    Ok(out)
}

fn walk(root: &Path, dir: &Path, rules: &IgnoreRules, out: &mut Vec<(String, Vec<u8>)>) -> Result<(), HelmError> {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).map_err(|e| io_err(dir, e))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        let rel =
            path.strip_prefix(root).map_err(|_| HelmError::Load(format!("{} is outside the chart", path.display())))?;
        let rel = rel.to_string_lossy().replace('\\', "/");
        let is_dir = path.is_dir();
        if rules.ignored(&rel, is_dir) {
            continue;
        }
        if is_dir {
            walk(root, &path, rules, out)?;
        } else {
            let data = std::fs::read(&path).map_err(|e| io_err(&path, e))?;
            out.push((rel, data));
        }
    }
    Ok(())
}

fn parse_yaml_json(name: &str, data: &[u8]) -> Result<serde_json::Value, HelmError> {
    let text = String::from_utf8_lossy(data);
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Object(serde_json::Map::new()));
    }
    serde_saphyr::from_str_with_options(&text, crate::yaml::parse_options())
        .map_err(|e| HelmError::Load(format!("cannot load {name}: error converting YAML to JSON: {e}")))
}

/// A chart's `values.yaml`: a map (empty when the file is).
fn parse_values(data: &[u8]) -> Result<Value, HelmError> {
    let text = String::from_utf8_lossy(data);
    match crate::yaml::from_yaml_str(&text).map_err(|e| HelmError::Load(format!("cannot load values.yaml: {e}")))? {
        Value::Nil => Ok(Value::map(BTreeMap::new())),
        v @ Value::Map(_) => Ok(v),
        _ => Err(HelmError::Load("cannot load values.yaml: values are not a map".into())),
    }
}

impl Dependency {
    /// One entry of `Chart.yaml`'s `dependencies`.
    fn from_json(d: &serde_json::Value) -> Dependency {
        let s = |k: &str| d.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
        Dependency {
            name: s("name"),
            version: s("version"),
            alias: s("alias"),
            condition: s("condition"),
            tags: d
                .get("tags")
                .and_then(|t| t.as_array())
                .map(|t| t.iter().filter_map(|x| x.as_str().map(String::from)).collect())
                .unwrap_or_default(),
            import_values: d
                .get("import-values")
                .and_then(|t| t.as_array())
                .map(|t| t.iter().map(Value::from_json).collect())
                .unwrap_or_default(),
            raw: d.clone(),
        }
    }
}

fn from_files(files: Vec<(String, Vec<u8>)>) -> Result<Chart, HelmError> {
    let mut chart = Chart {
        metadata: serde_json::Value::Null,
        name: String::new(),
        dependencies: Vec::new(),
        values: Value::map(BTreeMap::new()),
        schema: None,
        templates: Vec::new(),
        files: Vec::new(),
        subcharts: Vec::new(),
        full_path: String::new(),
    };
    let mut subchart_files: BTreeMap<String, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    let mut requirements = None;
    for (name, data) in files {
        match name.as_str() {
            "Chart.yaml" => chart.metadata = parse_yaml_json("Chart.yaml", &data)?,
            "values.yaml" => chart.values = parse_values(&data)?,
            "values.schema.json" => {
                chart.schema = Some(
                    serde_json::from_slice(&data)
                        .map_err(|e| HelmError::Load(format!("cannot load values.schema.json: {e}")))?,
                )
            }
            "requirements.yaml" => requirements = Some(parse_yaml_json("requirements.yaml", &data)?),
            "Chart.lock" | "requirements.lock" => {}
            n if n.starts_with("templates/") => {
                chart.templates.push((name.clone(), String::from_utf8_lossy(&data).into_owned()))
            }
            n if n.starts_with("charts/") && !n.ends_with(".prov") => {
                let rest = &n["charts/".len()..];
                let (cname, inner) = rest.split_once('/').unwrap_or((rest, ""));
                subchart_files.entry(cname.to_string()).or_default().push((inner.to_string(), data));
            }
            _ => chart.files.push((name, data.into())),
        }
    }
    if chart.metadata.is_null() {
        return Err(HelmError::Load("Chart.yaml file is missing".into()));
    }
    chart.name = chart.metadata.get("name").and_then(|n| n.as_str()).unwrap_or_default().to_string();
    if chart.name.is_empty() {
        return Err(HelmError::Load("validation: chart.metadata.name is required".into()));
    }
    // apiVersion v1 charts list their dependencies in requirements.yaml.
    if chart.metadata.get("apiVersion").and_then(|v| v.as_str()) == Some("v1")
        && let Some(deps) = requirements.as_ref().and_then(|r| r.get("dependencies"))
        && let Some(meta) = chart.metadata.as_object_mut()
    {
        meta.insert("dependencies".to_string(), deps.clone());
    }
    if let Some(deps) = chart.metadata.get("dependencies").and_then(|d| d.as_array()) {
        chart.dependencies = deps.iter().map(Dependency::from_json).collect();
    }
    for (cname, files) in subchart_files {
        if cname.ends_with(".tgz") || cname.ends_with(".tar.gz") {
            if let Some((_, data)) = files.into_iter().find(|(inner, _)| inner.is_empty()) {
                chart.subcharts.push(from_files(read_archive(&data)?)?);
            }
        } else if files.iter().any(|(inner, _)| inner == "Chart.yaml") {
            chart.subcharts.push(from_files(files)?);
        }
    }
    Ok(chart)
}
