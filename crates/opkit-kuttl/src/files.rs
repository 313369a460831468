//! Test case directories as kuttl reads them: a file's name says its step index and its
//! role (`NN-assert.yaml`, `NN-errors.yaml`, anything else applies), a `NN-name/`
//! directory is a whole step, and names matching the suite's `ignoreFiles` are skipped
//! silently while other unmatched names are logged as ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

/// kuttl's file name pattern: `(<number>-)<name>(-<name>)((.gotmpl).yaml)`.
static FILE_NAME: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^(\d+-)?([^-.]+)(-[^.]+)?((?:\.gotmpl)?\.yaml)?$").ok());

/// What a file in a test case does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileRole {
    /// Objects to create or update (and perhaps a `TestStep`).
    Apply,
    /// Objects that must match (and perhaps a `TestAssert`).
    Assert,
    /// Objects that must not match.
    Errors,
}

/// A parsed test file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileName {
    /// Its role.
    pub role: FileRole,
    /// The step index, when the name starts with one.
    pub index: Option<i64>,
    /// The step name an apply file gives (`install` for `00-install.yaml`).
    pub step_name: String,
    /// A `.gotmpl.yaml` template.
    pub template: bool,
}

impl FileName {
    /// Parses a base name; `Err` says why it does not follow kuttl's pattern.
    pub(crate) fn parse(name: &str) -> Result<FileName, String> {
        let pattern = "(<number>-)<name>(-<name>)((.gotmpl).yaml)";
        let caps = FILE_NAME
            .as_ref()
            .and_then(|re| re.captures(name))
            .ok_or_else(|| format!("name does not follow pattern {pattern:?}"))?;
        let index = match caps.get(1) {
            Some(m) => Some(
                m.as_str()
                    .trim_end_matches('-')
                    .parse::<i32>()
                    .map_err(|e| format!("parsing index failed: {e}"))?
                    .into(),
            ),
            None => None,
        };
        let first = caps.get(2).map_or("", |m| m.as_str());
        let rest = caps.get(3).map_or("", |m| m.as_str());
        let template = caps.get(4).is_some_and(|m| m.as_str().starts_with(".gotmpl"));
        let role = match first.to_lowercase().as_str() {
            "assert" => FileRole::Assert,
            "errors" => FileRole::Errors,
            _ => FileRole::Apply,
        };
        let step_name = if role == FileRole::Apply { format!("{first}{rest}") } else { String::new() };
        Ok(FileName { role, index, step_name, template })
    }
}

/// The files of one step, in name order, and the step's name when it is a directory.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepFiles {
    /// The files.
    pub files: Vec<PathBuf>,
    /// The step directory's name without its index, when the step is a directory.
    pub dir_name: Option<String>,
}

/// Whether `name` matches one of the shell patterns (`README*`).
pub(crate) fn ignored(name: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| opkit_helm::objects::glob_regex(p).is_some_and(|re| re.is_match(name)))
}

/// Collects a test case's step files by index (`CollectTestStepFiles`); names that are
/// not steps are reported through `log` (`Ignoring "x": ...`).
pub(crate) fn collect_step_files(
    dir: &Path,
    ignore: &[String],
    log: &mut dyn FnMut(String),
) -> std::io::Result<BTreeMap<i64, StepFiles>> {
    let mut steps: BTreeMap<i64, StepFiles> = BTreeMap::new();
    for entry in sorted_entries(dir)? {
        let Some(name) = entry.file_name().and_then(|n| n.to_str()).map(str::to_string) else { continue };
        if ignored(&name, ignore) {
            continue;
        }
        let parsed = match FileName::parse(&name) {
            Ok(p) => p,
            Err(e) => {
                log(format!("Ignoring {name:?}: {e}."));
                continue;
            }
        };
        let Some(index) = parsed.index else {
            log(format!("Ignoring {name:?}: does not begin with a number followed by a dash."));
            continue;
        };
        let step = steps.entry(index).or_default();
        if entry.is_dir() {
            step.files.extend(sorted_entries(&entry)?);
            step.dir_name = Some(parsed.step_name.clone());
        } else {
            step.files.push(entry);
        }
    }
    Ok(steps)
}

/// The entries of a directory, sorted by name as Go's `os.ReadDir` returns them.
pub(crate) fn sorted_entries(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    entries.sort();
    Ok(entries)
}

/// The YAML files a `TestStep`'s `apply`/`assert`/`error` entry names: the file, or the
/// `*.yaml` files of a directory.
pub(crate) fn yaml_files_at(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if path.is_dir() {
        Ok(sorted_entries(path)?.into_iter().filter(|p| p.extension().is_some_and(|e| e == "yaml")).collect())
    } else if path.exists() {
        Ok(vec![path.to_path_buf()])
    } else {
        Err(std::io::Error::new(std::io::ErrorKind::NotFound, format!("{} does not exist", path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_as_kuttl_parses_them() {
        let install = FileName::parse("00-install.yaml").expect("parses");
        assert_eq!((install.role, install.index, install.step_name.as_str()), (FileRole::Apply, Some(0), "install"));
        let assert = FileName::parse("01-assert.yaml").expect("parses");
        assert_eq!((assert.role, assert.index), (FileRole::Assert, Some(1)));
        let errors = FileName::parse("02-errors-more.yaml").expect("parses");
        assert_eq!(errors.role, FileRole::Errors);
        assert_eq!(
            FileName::parse("10-create-deployment.yaml").map(|f| f.step_name).as_deref(),
            Ok("create-deployment")
        );
        assert!(FileName::parse("03-x.gotmpl.yaml").is_ok_and(|f| f.template));
        assert_eq!(FileName::parse("assert.yaml").map(|f| (f.role, f.index)), Ok((FileRole::Assert, None)));
        assert!(FileName::parse("README.md").is_err());
    }

    #[test]
    fn ignore_patterns_match_like_go_filepath_match() {
        let defaults = vec!["README*".to_string()];
        assert!(ignored("README.md", &defaults));
        assert!(!ignored("00-install.yaml", &defaults));
        assert!(ignored("notes.md", &["*.md".to_string()]));
    }
}
