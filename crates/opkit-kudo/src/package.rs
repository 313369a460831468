//! A KUDO package as KUDO reads it: `operator.yaml` (metadata, tasks, plans),
//! `params.yaml` (parameters) and `templates/`, from a directory or a `.tgz`
//! (`kubectl kudo package create`'s archive, one top directory). Each error names the
//! file it comes from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::KudoError;
use crate::params::Parameter;

/// The package API version KUDO reads (`kudo.dev/v1beta1`).
pub(crate) const API_VERSION: &str = "kudo.dev/v1beta1";

/// `operator.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorFile {
    /// `apiVersion` (`kudo.dev/v1beta1`).
    #[serde(default)]
    pub api_version: String,
    /// The operator's name.
    #[serde(default)]
    pub name: String,
    /// The package's own version.
    #[serde(default)]
    pub operator_version: String,
    /// The version of the application it runs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app_version: String,
    /// The KUDO version it needs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kudo_version: String,
    /// The Kubernetes version it needs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubernetes_version: String,
    /// The maintainers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintainers: Vec<Maintainer>,
    /// The project's URL.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// The tasks steps run.
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// The plans, by name.
    #[serde(default)]
    pub plans: BTreeMap<String, Plan>,
}

/// A maintainer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Maintainer {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// E-mail address.
    #[serde(default)]
    pub email: String,
}

/// A task: what a step does.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Its name, which steps refer to.
    pub name: String,
    /// `Apply`, `Delete`, `Toggle`, `Pipe`, `Dummy` or `KudoOperator`.
    pub kind: String,
    /// The kind's settings (KUDO's inlined `TaskSpec`).
    #[serde(default)]
    pub spec: TaskSpec,
}

/// KUDO's `TaskSpec`: the settings of every task kind, inlined.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSpec {
    /// Apply, Delete, Toggle: the templates.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Dummy: fail.
    #[serde(default, skip_serializing_if = "is_false")]
    pub want_err: bool,
    /// Dummy: fail fatally.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fatal: bool,
    /// Dummy: done at once.
    #[serde(default, skip_serializing_if = "is_false")]
    pub done: bool,
    /// Pipe: the pod's template.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod: String,
    /// Pipe: the files it produces.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub pipe: Vec<PipeSpec>,
    /// Toggle: the boolean parameter.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parameter: String,
    /// KudoOperator: the package (a name, or a path relative to this package).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub package: String,
    /// KudoOperator: the dependency's instance name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance_name: String,
    /// KudoOperator: the dependency's app version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app_version: String,
    /// KudoOperator: the dependency's operator version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operator_version: String,
    /// KudoOperator: a template rendering the dependency's parameters.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parameter_file: String,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A file a Pipe task's pod produces.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PipeSpec {
    /// The file (one key in the artifact).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub file: String,
    /// An env file (one key per line).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub env_file: String,
    /// `ConfigMap` or `Secret`.
    pub kind: String,
    /// The key templates use (`.Pipes.KEY` is the artifact's name).
    pub key: String,
}

/// How the children of a plan or phase run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ordering {
    /// One after the other.
    #[default]
    Serial,
    /// All at once.
    Parallel,
}

/// A plan: phases.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// How its phases run.
    #[serde(default)]
    pub strategy: Ordering,
    /// The phases.
    #[serde(default, deserialize_with = "null_as_default")]
    pub phases: Vec<Phase>,
}

/// A phase: steps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// Its name.
    pub name: String,
    /// How its steps run.
    #[serde(default)]
    pub strategy: Ordering,
    /// The steps.
    #[serde(default, deserialize_with = "null_as_default")]
    pub steps: Vec<Step>,
}

/// A step: tasks, run in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Its name.
    pub name: String,
    /// The tasks' names.
    #[serde(default, deserialize_with = "null_as_default")]
    pub tasks: Vec<String>,
}

/// `params.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParamsFile {
    /// `apiVersion` (`kudo.dev/v1beta1`).
    #[serde(default)]
    pub api_version: String,
    /// The parameters.
    #[serde(default, deserialize_with = "null_as_default")]
    pub parameters: Vec<Parameter>,
}

/// A package read from disk.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Package {
    /// Where it was read from (a directory or an archive).
    pub source: PathBuf,
    /// `operator.yaml`.
    pub operator: OperatorFile,
    /// `params.yaml`.
    pub params: ParamsFile,
    /// `templates/*`, by file name.
    pub templates: BTreeMap<String, String>,
}

impl Package {
    /// The task named `name`.
    pub fn task(&self, name: &str) -> Option<&Task> {
        self.operator.tasks.iter().find(|t| t.name == name)
    }

    /// The parameter named `name`.
    pub fn parameter(&self, name: &str) -> Option<&Parameter> {
        self.params.parameters.iter().find(|p| p.name == name)
    }

    /// The archive's file name, as KUDO's `packageVersionedName` (`zookeeper-3.6.2_0.3.3.tgz`).
    pub fn archive_name(&self) -> String {
        let op = &self.operator;
        if op.app_version.is_empty() {
            format!("{}-{}.tgz", op.name, op.operator_version)
        } else {
            format!("{}-{}_{}.tgz", op.name, op.app_version, op.operator_version)
        }
    }
}

/// Reads a package from a directory or a `.tgz`.
pub fn load(path: &Path) -> Result<Package, KudoError> {
    let read_err = |p: &Path, e: std::io::Error| KudoError::Read { path: p.to_path_buf(), source: e };
    let files: Vec<(String, Vec<u8>)> = if path.is_dir() {
        let mut files = Vec::new();
        for name in ["operator.yaml", "params.yaml"] {
            let file = path.join(name);
            if file.exists() {
                files.push((name.to_string(), std::fs::read(&file).map_err(|e| read_err(&file, e))?));
            }
        }
        let templates = path.join("templates");
        if templates.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(&templates)
                .map_err(|e| read_err(&templates, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect();
            entries.sort();
            for file in entries {
                let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                files.push((format!("templates/{name}"), std::fs::read(&file).map_err(|e| read_err(&file, e))?));
            }
        }
        files
    } else if path.is_file() {
        let bytes = std::fs::read(path).map_err(|e| read_err(path, e))?;
        crate::archive::read_tgz(&bytes)
            .map_err(|e| KudoError::Package { file: path.display().to_string(), message: e.to_string() })?
    } else {
        return Err(KudoError::Read {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such package directory or archive"),
        });
    };
    from_files(path, files)
}

/// Builds a package from its files (paths relative to the package root).
pub fn from_files(source: &Path, files: Vec<(String, Vec<u8>)>) -> Result<Package, KudoError> {
    let display = |name: &str| source.join(name).display().to_string();
    let text = |name: &str, bytes: Vec<u8>| {
        String::from_utf8(bytes)
            .map_err(|_| KudoError::Package { file: display(name), message: "the file is not UTF-8".into() })
    };
    let mut operator = None;
    let mut params = ParamsFile::default();
    let mut templates = BTreeMap::new();
    for (name, bytes) in files {
        match name.as_str() {
            "operator.yaml" => {
                operator = Some(
                    parse_operator(&text(&name, bytes)?)
                        .map_err(|message| KudoError::Package { file: display(&name), message })?,
                )
            }
            "params.yaml" => {
                params = parse_params(&text(&name, bytes)?)
                    .map_err(|message| KudoError::Package { file: display(&name), message })?
            }
            n if n.starts_with("templates/") => {
                let key = n.trim_start_matches("templates/").to_string();
                templates.insert(key, text(&name, bytes)?);
            }
            _ => {}
        }
    }
    let Some(operator) = operator else {
        return Err(KudoError::Package {
            file: display("operator.yaml"),
            message: "the package has no operator.yaml".into(),
        });
    };
    Ok(Package { source: source.to_path_buf(), operator, params, templates })
}

/// `operator.yaml`: KUDO's API version (an empty one is it), a name and an operator
/// version. The error is the message for the file.
fn parse_operator(body: &str) -> Result<OperatorFile, String> {
    let mut parsed: OperatorFile =
        serde_saphyr::from_str(body).map_err(|e| format!("failed to unmarshal operator file: {e}"))?;
    if parsed.api_version.is_empty() {
        parsed.api_version = API_VERSION.to_string();
    }
    if parsed.api_version != API_VERSION {
        return Err(format!("expecting supported API version {API_VERSION} but got {:?}", parsed.api_version));
    }
    if parsed.name.is_empty() || parsed.operator_version.is_empty() {
        return Err("failed to parse yaml into valid operator: name and operatorVersion are required".into());
    }
    Ok(parsed)
}

/// `params.yaml`: KUDO's API version and valid parameter declarations, with KUDO's
/// defaults (a parameter is required and mutable unless it says otherwise). The error is
/// the message for the file.
fn parse_params(body: &str) -> Result<ParamsFile, String> {
    let mut params: ParamsFile =
        serde_saphyr::from_str(body).map_err(|e| format!("failed to unmarshal parameters file: {e}"))?;
    if params.api_version.is_empty() {
        params.api_version = API_VERSION.to_string();
    }
    for p in &mut params.parameters {
        p.required.get_or_insert(true);
        p.immutable.get_or_insert(false);
    }
    if params.api_version != API_VERSION {
        return Err(format!("expecting supported API version {API_VERSION} but got {:?}", params.api_version));
    }
    for p in &params.parameters {
        crate::params::check_declaration(p).map_err(|message| format!("parameter {:?}: {message}", p.name))?;
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_operator_params_and_templates() {
        let files = vec![
            (
                "operator.yaml".to_string(),
                b"apiVersion: kudo.dev/v1beta1\nname: demo\noperatorVersion: 0.1.0\ntasks:\n- name: app\n  kind: Apply\n  spec:\n    resources: [cm.yaml]\nplans:\n  deploy:\n    strategy: serial\n    phases:\n    - name: main\n      strategy: parallel\n      steps:\n      - name: app\n        tasks: [app]\n".to_vec(),
            ),
            (
                "params.yaml".to_string(),
                b"apiVersion: kudo.dev/v1beta1\nparameters:\n- name: replicas\n  default: 2\n".to_vec(),
            ),
            ("templates/cm.yaml".to_string(), b"kind: ConfigMap".to_vec()),
        ];
        let pkg = from_files(Path::new("demo"), files).expect("valid");
        assert_eq!(pkg.operator.name, "demo");
        assert_eq!(pkg.operator.plans["deploy"].phases[0].strategy, Ordering::Parallel);
        assert_eq!(pkg.params.parameters[0].default, Some(serde_json::json!(2)));
        assert_eq!(pkg.templates["cm.yaml"], "kind: ConfigMap");
    }

    #[test]
    fn a_wrong_api_version_names_the_file() {
        let files = vec![("operator.yaml".to_string(), b"apiVersion: kudo.dev/v1alpha1\nname: x\n".to_vec())];
        let err = from_files(Path::new("pkg"), files).unwrap_err().to_string();
        assert!(err.starts_with("pkg/operator.yaml: expecting supported API version"), "{err}");
        // An empty apiVersion is KUDO's version.
        let files = vec![("operator.yaml".to_string(), b"name: x\noperatorVersion: 0.1.0\n".to_vec())];
        assert!(from_files(Path::new("pkg"), files).is_ok());
        let files = vec![("operator.yaml".to_string(), b"apiVersion: kudo.dev/v1alpha1\nname: x\n".to_vec())];
        let err = from_files(Path::new("pkg"), files).unwrap_err().to_string();
        assert!(err.starts_with("pkg/operator.yaml: expecting supported API version"), "{err}");
    }
}
