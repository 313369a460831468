//! Rendering KUDO templates with opkit-helm's Go `text/template` engine and its Sprig
//! functions (a superset of KUDO's `sprig.TxtFuncMap()` plus `toYaml`), with KUDO's
//! variables: `.Name`, `.Namespace`, `.OperatorName`, `.OperatorVersion`, `.AppVersion`,
//! `.Params`, `.Pipes`, `.PlanName`, `.PhaseName`, `.StepName`.

use std::collections::BTreeMap;

use opkit_helm::template::{Exec, Templates};
use serde_json::{Value, json};

/// What a template sees.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Variables {
    /// The operator's name (`.OperatorName`).
    pub operator_name: String,
    /// The Instance's name (`.Name`).
    pub name: String,
    /// The Instance's namespace (`.Namespace`).
    pub namespace: String,
    /// The package's app version (`.AppVersion`).
    pub app_version: String,
    /// The package's version (`.OperatorVersion`).
    pub operator_version: String,
    /// The plan running (`.PlanName`).
    pub plan_name: String,
    /// The phase running (`.PhaseName`).
    pub phase_name: String,
    /// The step running (`.StepName`).
    pub step_name: String,
    /// The parameters (`.Params`), typed by [`crate::params::template_params`].
    pub params: Value,
    /// The pipe artifacts' names by key (`.Pipes`).
    pub pipes: BTreeMap<String, String>,
}

impl Variables {
    fn data(&self) -> Value {
        json!({
            "OperatorName": self.operator_name,
            "Name": self.name,
            "Namespace": self.namespace,
            "AppVersion": self.app_version,
            "OperatorVersion": self.operator_version,
            "PlanName": self.plan_name,
            "PhaseName": self.phase_name,
            "StepName": self.step_name,
            "Params": self.params,
            "Pipes": self.pipes,
        })
    }
}

/// Renders the template `file` (its text `source`); the error is Go's, prefixed as KUDO's.
pub(crate) fn render(file: &str, source: &str, vars: &Variables) -> Result<String, String> {
    let mut templates = Templates::new();
    templates.add(file, source).map_err(|e| format!("error parsing template: {e}"))?;
    let data = opkit_helm::value::Value::from_json(&vars.data());
    let out = Exec::new(&templates).execute(file, &data).map_err(|e| format!("error rendering template: {e}"))?;
    Ok(out.replace("<no value>", ""))
}

/// Renders `file` and reads its YAML documents as objects (empty documents skipped).
pub fn render_objects(file: &str, source: &str, vars: &Variables) -> Result<Vec<Value>, String> {
    let text = render(file, source, vars)?;
    parse_objects(file, &text)
}

/// The objects of a multi-document YAML text, read as go-yaml v2 reads them (`0755` is
/// octal); each needs `apiVersion`, `kind` and a name.
pub(crate) fn parse_objects(file: &str, text: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> = serde_saphyr::from_multiple_with_options(text, opkit_helm::yaml::parse_options())
        .map_err(|e| format!("{file}: not YAML: {e}"))?;
    let mut out = Vec::new();
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        if doc.get("kind").and_then(Value::as_str).is_none_or(str::is_empty)
            || doc.get("apiVersion").and_then(Value::as_str).is_none_or(str::is_empty)
        {
            return Err(format!("{file}: an object has no apiVersion or kind"));
        }
        if doc.pointer("/metadata/name").and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(format!("{file}: an object has no metadata.name"));
        }
        out.push(doc);
    }
    Ok(out)
}

/// The names a template uses under `.Params` (also `$.Params`), in order, without repeats.
pub(crate) fn referenced(source: &str, root: &str) -> Vec<String> {
    let needle = format!(".{root}.");
    let mut out: Vec<String> = Vec::new();
    let mut rest = source;
    while let Some(i) = rest.find(&needle) {
        let before = rest[..i].chars().last();
        rest = &rest[i + needle.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_kudo_variables_and_sprig() {
        let vars = Variables {
            name: "zk".into(),
            namespace: "ns".into(),
            operator_name: "zookeeper".into(),
            params: json!({"replicas": "3", "list": ["a", "b"]}),
            plan_name: "deploy".into(),
            ..Variables::default()
        };
        let out = render("t.yaml", "{{ .Name }}-{{ .OperatorName }} {{ .Params.replicas | int | add 1 }} {{ index .Params.list 1 }} {{ .PlanName | upper }}", &vars).expect("renders");
        assert_eq!(out, "zk-zookeeper 4 b DEPLOY");
        let err = render("t.yaml", "{{ .Name", &vars).unwrap_err();
        assert!(err.starts_with("error parsing template: template: t.yaml:1"), "{err}");
    }

    #[test]
    fn octal_numbers_are_read_as_kudo_reads_them() {
        let objects = parse_objects("d.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\nmode: 0755\n")
            .expect("yaml");
        assert_eq!(objects[0]["mode"], json!(493));
    }

    #[test]
    fn finds_referenced_params() {
        let src = "{{ .Params.A }} {{ if $.Params.B_2 }}{{ .Params.A }}{{ end }} {{ .Pipes.x }} {{ x.Params.C }}";
        assert_eq!(referenced(src, "Params"), vec!["A".to_string(), "B_2".to_string()]);
        assert_eq!(referenced(src, "Pipes"), vec!["x".to_string()]);
    }
}
