//! `opkit generate`: the CRDs in config/crd/bases from the Rust types (the operator
//! binary prints them with `--print-crds`, built by kube's derive and schemars) and
//! config/rbac/role.yaml from the RBAC markers in the sources, and
//! config/webhook/manifests.yaml from the webhook markers (when there are any).

use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};

use super::{CliError, project_dir};
use crate::cli::GenerateArgs;
use crate::fileplan::FilePlan;
use crate::output::Output;
use crate::project::Project;

/// Regenerates the manifests; writes only files whose contents change.
pub(super) fn generate(args: GenerateArgs, out: &mut Output) -> Result<(), CliError> {
    if let Some(command) = args.command {
        return super::generate_bundle::run(command, out);
    }
    let root = project_dir()?;
    let project = Project::load(&root)?;
    let mut plan = FilePlan::new(&root);

    let markers = crate::rbac::scan_markers(&root.join("src"))?;
    for unknown in crate::rbac::unknown_markers(&root.join("src"))? {
        out.warn(&format!(
            "{unknown}: opkit does not understand this marker, so it has no effect (RBAC markers are \
             +kubebuilder:rbac:...; CRD markers are #[kube(...)] and #[schemars(...)] attributes)"
        ));
    }
    plan.write("config/rbac/role.yaml", crate::rbac::render_roles(&markers, "manager-role"));
    let webhooks = crate::webhook_markers::scan(&root.join("src"))?;
    if !webhooks.is_empty() {
        let configurations = crate::webhook_markers::configurations(&webhooks);
        plan.write(
            crate::webhook_markers::MANIFESTS,
            crate::webhook_markers::render(&configurations).map_err(CliError::Build)?,
        );
    }

    let mut crds = check_versions(print_crds(&root, &project.project_name, out)?)?;
    crds.iter_mut().for_each(opkit::crd::normalize_manifest);
    let mut crd_files = Vec::new();
    for crd in &crds {
        let (file, text) = crd_file(crd)?;
        plan.write(format!("config/crd/bases/{file}"), text);
        crd_files.push(file);
    }

    if args.check {
        let stale = plan.stale()?;
        if !stale.is_empty() {
            return Err(CliError::OutOfDate(stale.join(", ")));
        }
        out.result("Generated files are up to date.", json!({"upToDate": true}));
        return Ok(());
    }
    let written = plan.commit()?;
    for w in &written {
        out.step(&format!("{} {}", w.action, w.path));
    }
    let changed = written.iter().filter(|w| w.action != "unchanged").count();
    let webhook_text = if webhooks.is_empty() {
        String::new()
    } else {
        format!(", {} webhook(s) in config/webhook/manifests.yaml", webhooks.len())
    };
    let text =
        format!("Generated {} CRD(s), config/rbac/role.yaml{webhook_text} ({changed} file(s) changed).", crds.len());
    out.result(&text, json!({"crds": crd_files, "files": written}));
    Ok(())
}

/// Builds and runs the operator with `--print-crds`; its stdout is a JSON array of CRDs.
/// A cold build takes minutes, so cargo's progress goes straight to the user's stderr;
/// with `-o json` cargo is quiet and its stderr is kept for the error.
fn print_crds(root: &Path, name: &str, out: &Output) -> Result<Vec<Value>, CliError> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = std::process::Command::new(&cargo);
    cmd.arg("run").current_dir(root).stdin(Stdio::null()).stdout(Stdio::piped());
    if out.json() {
        cmd.arg("--quiet").stderr(Stdio::piped());
    } else {
        eprintln!("Building {name} to read its CRDs (cargo run -- --print-crds)");
        cmd.stderr(Stdio::inherit());
    }
    let output =
        cmd.args(["--", "--print-crds"]).output().map_err(|e| CliError::Build(format!("running {cargo}: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let detail = if out.json() { stderr.trim_end() } else { "see cargo's output above" };
        return Err(CliError::Build(format!("`cargo run -- --print-crds` failed ({}):\n{detail}", output.status)));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| CliError::Build(format!("`cargo run -- --print-crds` did not print a JSON array of CRDs: {e}")))
}

/// Checks the CRDs `--print-crds` printed: one per name (versions of a kind are joined
/// by `opkit::crd::merge_versions` in `api::crds()`), each with exactly one storage version.
pub(super) fn check_versions(crds: Vec<Value>) -> Result<Vec<Value>, CliError> {
    let mut seen: Vec<&str> = Vec::new();
    for crd in &crds {
        let name = crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            return Err(CliError::Build("a CRD printed by --print-crds has no metadata.name".into()));
        }
        if seen.contains(&name) {
            return Err(CliError::Build(format!(
                "CRD {name} is listed more than once: join its versions with opkit::crd::merge_versions in api::crds()"
            )));
        }
        seen.push(name);
        let versions = crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
        let storage: Vec<&str> = versions
            .iter()
            .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .filter_map(|v| v.get("name").and_then(Value::as_str))
            .collect();
        if storage.len() != 1 {
            return Err(CliError::Build(format!(
                "CRD {name} has versions {} and {} storage version(s) ({}): mark all but one version \
                 with #[kube(storage = false)]",
                versions.iter().filter_map(|v| v.get("name").and_then(Value::as_str)).collect::<Vec<_>>().join(", "),
                storage.len(),
                storage.join(", ")
            )));
        }
    }
    Ok(crds)
}

/// The file name (`<group>_<plural>.yaml`, as controller-gen names it) and YAML of a CRD.
fn crd_file(crd: &Value) -> Result<(String, String), CliError> {
    let group = crd.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default();
    let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or_default();
    if group.is_empty() || plural.is_empty() {
        return Err(CliError::Build("a CRD printed by --print-crds has no spec.group or spec.names.plural".into()));
    }
    let yaml =
        serde_saphyr::to_string(crd).map_err(|e| CliError::Build(format!("CRD {plural}.{group} as YAML: {e}")))?;
    Ok((format!("{group}_{plural}.yaml"), format!("---\n{yaml}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(versions: &[(&str, bool)]) -> Value {
        let versions: Vec<Value> =
            versions.iter().map(|(v, storage)| json!({"name": v, "served": true, "storage": storage})).collect();
        json!({"metadata": {"name": "memcacheds.cache.example.com"},
               "spec": {"group": "cache.example.com", "names": {"plural": "memcacheds"}, "versions": versions}})
    }

    #[test]
    fn one_crd_per_name_with_one_storage_version() {
        let good = check_versions(vec![crd(&[("v1", true), ("v1alpha1", false)])]).unwrap();
        let e = check_versions(vec![crd(&[("v1", true), ("v1alpha1", true)])]).unwrap_err().to_string();
        assert!(e.contains("2 storage version(s) (v1, v1alpha1)") && e.contains("storage = false"), "{e}");
        let e = check_versions(vec![crd(&[("v1", true)]), crd(&[("v1alpha1", false)])]).unwrap_err().to_string();
        assert!(e.contains("merge_versions"), "{e}");
        let (file, text) = crd_file(&good[0]).unwrap();
        assert_eq!(file, "cache.example.com_memcacheds.yaml");
        assert!(text.starts_with("---\nmetadata:"), "{text}");
    }
}
