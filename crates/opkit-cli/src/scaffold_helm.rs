//! `opkit init --plugins helm`: a Helm-chart operator project with no Rust code, as
//! operator-sdk's `helm.sdk.operatorframework.io/v1` plugin lays it out: the chart under
//! `helm-charts/<name>/`, `watches.yaml`, the CRD (spec and status keep unknown fields),
//! a sample from the chart's `values.yaml`, RBAC derived from the kinds the chart renders,
//! `config/` and a Makefile whose `run` is `opkit helm-operator`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use minijinja::context;
use serde_json::{Value, json};

use crate::cli::InitArgs;
use crate::commands::CliError;
use crate::fileplan::FilePlan;
use crate::output::Output;
use crate::project;
use crate::scaffold::{env, render};
use crate::scaffold_plugin_config::{CRD_MARKER, SAMPLE_MARKER};

/// Files whose presence means the directory already holds a project.
const CONFLICTS: &[&str] = &["PROJECT", "watches.yaml", "helm-charts", "config", "Makefile"];

/// The verbs the operator needs on every kind a release holds.
const MANAGE: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];

/// What `opkit init --plugins helm` scaffolds.
struct HelmProject {
    name: String,
    domain: String,
    group: String,
    version: String,
    kind: String,
    plural: String,
    chart_name: String,
    chart_dir: PathBuf,
}

/// Scaffolds the Helm-chart operator project into `root`; refuses (writing nothing) in a
/// directory that has a project.
pub(crate) fn init(args: InitArgs, root: &Path, out: &mut Output) -> Result<(), CliError> {
    let dir_name = root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let name = args.project_name.clone().unwrap_or_else(|| dir_name.to_lowercase());
    project::validate_project_name(&name)?;
    project::validate_subdomain("domain", &args.domain)?;
    let Some(chart_dir) = args.helm_chart.clone() else {
        return Err(CliError::Usage(
            "--plugins helm needs --helm-chart DIR: the chart the operator deploys".to_string(),
        ));
    };
    let chart = opkit_helm::chart::load(&chart_dir)?;
    let group_short = args.group.clone().unwrap_or_else(|| "charts".to_string());
    project::validate_group(&group_short, &args.domain)?;
    let version = args.version.clone().unwrap_or_else(|| "v1alpha1".to_string());
    project::validate_version(&version)?;
    let kind = args.kind.clone().unwrap_or_else(|| upper_camel_case(&chart.name));
    project::validate_kind(&kind)?;
    if let Some(existing) = CONFLICTS.iter().find(|f| root.join(f).exists()) {
        return Err(CliError::Usage(format!(
            "{} already contains {existing}; run `opkit init` in an empty directory",
            root.display()
        )));
    }
    let p = HelmProject {
        group: format!("{group_short}.{}", args.domain),
        plural: project::plural(&kind),
        chart_name: chart.name.clone(),
        name,
        domain: args.domain.clone(),
        version,
        kind,
        chart_dir,
    };
    let plan = plan(root, &p)?;
    let written = plan.commit()?;
    for w in &written {
        out.step(&format!("{} {}", w.action, w.path));
    }
    let text = format!(
        "Scaffolded the Helm operator {} ({}/{} {} from chart {}).\nNext: make install run",
        p.name, p.group, p.version, p.kind, p.chart_name
    );
    out.result(
        &text,
        json!({"project": p.name, "group": p.group, "version": p.version, "kind": p.kind, "chart": p.chart_name, "files": written}),
    );
    Ok(())
}

/// Markers the kind-specific lines are inserted above (by `init` and `create api`).
/// PROJECT's layout for this plugin.
pub(crate) const LAYOUT: &str = "helm.sdk.operatorframework.io/v1";

const WATCH_MARKER: &str = "# +kubebuilder:scaffold:watch";
const RULES_MARKER: &str = "# +kubebuilder:scaffold:rules";
const PROJECT_MARKER: &str = "version: \"3\"";

fn plan(root: &Path, p: &HelmProject) -> Result<FilePlan, CliError> {
    let mut plan = FilePlan::new(root);
    let env = env();
    let ctx = context! { project_name => &p.name };
    plan.create("PROJECT", project_file(p))?;
    plan.create(
        "watches.yaml",
        format!("# Use the 'create api' subcommand to add watches to this file.\n{WATCH_MARKER}\n"),
    )?;
    plan.create("Makefile", render(&env, "helm_Makefile", &ctx)?)?;
    plan.create("Dockerfile", render(&env, "helm_Dockerfile", &ctx)?)?;
    plan.create("kuttl-test.yaml", render(&env, "plugin_kuttl-test.yaml", &ctx)?)?;
    plan.create("config/manager/manager.yaml", render(&env, "helm_manager.yaml", &ctx)?)?;
    crate::scaffold_plugin_config::create_rbac_and_kustomizations(&mut plan, &p.name, base_role())?;
    plan.create(
        "config/default/kustomization.yaml",
        format!("# Adds namespace to all resources.\nnamespace: {0}-system\n\n# Prefixed to the names of all resources.\nnamePrefix: {0}-\n\nresources:\n- ../crd\n- ../rbac\n- ../manager\n", p.name),
    )?;
    add_kind(&mut plan, p)?;
    Ok(plan)
}

/// Plans what one watched kind adds: its chart, watch entry, CRD, sample, RBAC rules and
/// PROJECT resource.
fn add_kind(plan: &mut FilePlan, p: &HelmProject) -> Result<(), CliError> {
    let ctx = context! {
        group => &p.group,
        version => &p.version,
        kind => &p.kind,
        chart => &p.chart_name,
    };
    let watch = render(&env(), "helm_watches.yaml", &ctx)?;
    plan.insert_before_marker("watches.yaml", WATCH_MARKER, watch.trim_end())?;
    copy_chart(plan, &p.chart_dir, &PathBuf::from("helm-charts").join(&p.chart_name))?;

    let values_schema = opkit_helm::chart::load(&p.chart_dir)?.schema;
    let crd = opkit_helm_operator::crd_for(&p.group, &p.version, &p.kind, &p.plural, values_schema.as_ref())?;
    let crd = serde_json::to_value(&crd).map_err(|e| CliError::Build(format!("the CRD: {e}")))?;
    let crd_file = format!("{}_{}.yaml", p.group, p.plural);
    plan.create(format!("config/crd/bases/{crd_file}"), crate::kustomize::to_yaml_stream(&[crd])?)?;
    plan.insert_before_marker("config/crd/kustomization.yaml", CRD_MARKER, &format!("- bases/{crd_file}"))?;

    let lower = p.kind.to_lowercase();
    let sample = format!("{}_{}_{lower}.yaml", p.group, p.version);
    plan.create(format!("config/samples/{sample}"), sample_file(p))?;
    // The kuttl test: the sample, then the conditions of its installed release.
    plan.create(format!("tests/kuttl/{lower}/00-install.yaml"), sample_file(p))?;
    let ctx = context! { group => &p.group, version => &p.version, kind => &p.kind, kind_lower => &lower };
    plan.create(format!("tests/kuttl/{lower}/00-assert.yaml"), render(&env(), "helm_kuttl_assert.yaml", &ctx)?)?;
    plan.insert_before_marker("config/samples/kustomization.yaml", SAMPLE_MARKER, &format!("- {sample}"))?;

    plan.insert_before_marker("config/rbac/role.yaml", RULES_MARKER, kind_rules(p).trim_end())?;
    plan.insert_before_marker("PROJECT", PROJECT_MARKER, project_resource(p).trim_end())?;
    Ok(())
}

/// `opkit create api --plugins helm`: another chart and kind in a Helm operator project.
pub(crate) fn create_api(args: crate::cli::CreateApiArgs, root: &Path, out: &mut Output) -> Result<(), CliError> {
    let project_text = std::fs::read_to_string(root.join("PROJECT")).map_err(|e| {
        CliError::Usage(format!(
            "no Helm operator project here (reading PROJECT: {e}); run `opkit init --plugins helm` first"
        ))
    })?;
    let project: Value = serde_saphyr::from_str(&project_text).map_err(|e| CliError::Usage(format!("PROJECT: {e}")))?;
    let is_helm = project["layout"].as_array().is_some_and(|l| l.iter().any(|x| x == LAYOUT));
    if !is_helm {
        return Err(CliError::Usage(format!(
            "PROJECT's layout is not {LAYOUT}; `--plugins helm` adds APIs to Helm operator projects"
        )));
    }
    let domain = project["domain"].as_str().unwrap_or_default().to_string();
    let name = project["projectName"].as_str().unwrap_or_default().to_string();
    let Some(chart_dir) = args.helm_chart.clone() else {
        return Err(CliError::Usage(
            "--plugins helm needs --helm-chart DIR: the chart the operator deploys".to_string(),
        ));
    };
    let chart = opkit_helm::chart::load(&chart_dir)?;
    project::validate_group(&args.group, &domain)?;
    project::validate_version(&args.version)?;
    project::validate_kind(&args.kind)?;
    let plural = args.plural.clone().unwrap_or_else(|| project::plural(&args.kind));
    project::validate_plural(&plural)?;
    let p = HelmProject {
        group: format!("{}.{domain}", args.group),
        plural,
        chart_name: chart.name.clone(),
        name,
        domain,
        version: args.version.clone(),
        kind: args.kind.clone(),
        chart_dir,
    };
    let watches = std::fs::read_to_string(root.join("watches.yaml"))?;
    let known = opkit_helm_operator::parse_watches(&watches, root, &|_| None)
        .map_err(|e| CliError::Usage(format!("watches.yaml: {e}")))?;
    if known.iter().any(|w| w.group == p.group && w.version == p.version && w.kind == p.kind) {
        return Err(CliError::Usage(format!(
            "API {}/{}, Kind={} already exists in watches.yaml",
            p.group, p.version, p.kind
        )));
    }
    let mut plan = FilePlan::new(root);
    add_kind(&mut plan, &p)?;
    let written = plan.commit()?;
    for w in &written {
        out.step(&format!("{} {}", w.action, w.path));
    }
    out.result(
        &format!("Added {}/{} {} (chart {}) to watches.yaml.", p.group, p.version, p.kind, p.chart_name),
        json!({"group": p.group, "version": p.version, "kind": p.kind, "chart": p.chart_name, "files": written}),
    );
    Ok(())
}

fn project_file(p: &HelmProject) -> String {
    format!(
        "# Code generated by opkit. DO NOT EDIT.\n# This file is used to track the info used to scaffold your project\n# and allow the plugins properly work.\ndomain: {}\nlayout:\n- {LAYOUT}\nprojectName: {}\nresources:\n{PROJECT_MARKER}\n",
        p.domain, p.name
    )
}

fn project_resource(p: &HelmProject) -> String {
    format!(
        "- api:\n    crdVersion: v1\n    namespaced: true\n  domain: {}\n  group: {}\n  kind: {}\n  version: {}\n",
        p.domain,
        p.group.strip_suffix(&format!(".{}", p.domain)).unwrap_or(&p.group),
        p.kind,
        p.version
    )
}

/// The sample custom resource: the chart's `values.yaml` (comments kept) as its spec.
fn sample_file(p: &HelmProject) -> String {
    let values = std::fs::read_to_string(p.chart_dir.join("values.yaml")).unwrap_or_default();
    let has_values = values.lines().any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    let spec = if has_values {
        let indented: Vec<String> =
            values.lines().map(|l| if l.is_empty() { String::new() } else { format!("  {l}") }).collect();
        format!(
            "spec:\n  # Default values copied from <project_dir>/helm-charts/{}/values.yaml\n{}\n",
            p.chart_name,
            indented.join("\n")
        )
    } else {
        "spec: {}\n".to_string()
    };
    format!(
        "apiVersion: {}/{}\nkind: {}\nmetadata:\n  name: {}-sample\n{spec}",
        p.group,
        p.version,
        p.kind,
        p.kind.to_lowercase()
    )
}

/// The manager's ClusterRole with what every Helm operator needs: namespaces, release
/// Secrets, events; each kind adds its rules above the marker.
fn base_role() -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: manager-role\nrules:\n##\n## Base operator rules\n##\n# We need to get namespaces so the operator can read namespaces to ensure they exist\n- apiGroups:\n  - \"\"\n  resources:\n  - namespaces\n  verbs:\n  - get\n# We need to manage Helm release secrets\n- apiGroups:\n  - \"\"\n  resources:\n  - secrets\n  verbs:\n  - \"*\"\n# We need to create events on CRs about things happening during reconciliation\n- apiGroups:\n  - \"\"\n  resources:\n  - events\n  verbs:\n  - create\n{RULES_MARKER}\n"
    )
}

/// A kind's rules: its custom resource (with status and finalizers) and every kind its
/// chart renders with default values; a chart that does not render without values gets
/// a wildcard rule, as operator-sdk writes then.
fn kind_rules(p: &HelmProject) -> String {
    let (group, version, kind, plural) = (&p.group, &p.version, &p.kind, &p.plural);
    let mut rules = format!(
        "##\n## Rules for {group}/{version}, Kind: {kind}\n##\n- apiGroups:\n  - {group}\n  resources:\n  - {plural}\n  - {plural}/status\n  - {plural}/finalizers\n  verbs:\n{}",
        verbs(MANAGE)
    );
    let options = opkit_helm::TemplateOptions { release_name: p.kind.to_lowercase(), ..Default::default() };
    match opkit_helm::template(&p.chart_dir, &options).map(|text| rendered_kinds(&text)) {
        Ok(kinds) => {
            for (group, resources) in kinds {
                rules.push_str(&format!("- apiGroups:\n  - {group:?}\n  resources:\n"));
                for r in resources {
                    rules.push_str(&format!("  - {r}\n"));
                }
                rules.push_str(&format!("  verbs:\n{}", verbs(MANAGE)));
            }
        }
        Err(e) => rules.push_str(&format!(
            "# The chart did not render with its default values ({}); grant what its\n# objects need instead of this wildcard.\n- apiGroups:\n  - \"*\"\n  resources:\n  - \"*\"\n  verbs:\n  - \"*\"\n",
            e.to_string().replace('\n', " ")
        )),
    }
    rules
}

fn verbs(list: &[&str]) -> String {
    list.iter().map(|v| format!("  - {v}\n")).collect()
}

/// The API groups and resources of the objects in a rendered chart.
fn rendered_kinds(rendered: &str) -> BTreeMap<String, Vec<String>> {
    let mut kinds: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for doc in rendered.split("\n---\n").flat_map(|d| d.split_once("# Source: ").map(|(_, rest)| rest)) {
        let Ok(object) = serde_saphyr::from_str::<Value>(doc.split_once('\n').map_or("", |(_, body)| body)) else {
            continue;
        };
        let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let Some(kind) = object.get("kind").and_then(Value::as_str).filter(|k| !k.is_empty()) else { continue };
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g).to_string();
        let resource = project::plural(kind);
        let list = kinds.entry(group).or_default();
        if !list.contains(&resource) {
            list.push(resource);
        }
    }
    kinds
}

/// `my-chart` → `MyChart`.
fn upper_camel_case(name: &str) -> String {
    name.split(['-', '_', '.'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars.next().map(|c| c.to_uppercase().chain(chars).collect::<String>()).unwrap_or_default()
        })
        .collect()
}

/// Adds the chart's files to the plan under `dest`.
fn copy_chart(plan: &mut FilePlan, src: &Path, dest: &Path) -> Result<(), CliError> {
    let mut entries: Vec<_> = std::fs::read_dir(src)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let target = dest.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_chart(plan, &path, &target)?;
        } else {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                CliError::Usage(format!("{}: {e}; only charts of text files can be copied", path.display()))
            })?;
            plan.create(target, text)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_a_rendered_chart_and_names() {
        let rendered = "---\n# Source: c/templates/a.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\n---\n# Source: c/templates/b.yaml\napiVersion: v1\nkind: Service\nmetadata:\n  name: b\n---\n# Source: c/templates/i.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: i\n";
        let kinds = rendered_kinds(rendered);
        assert_eq!(kinds.get("apps"), Some(&vec!["deployments".to_string()]));
        assert_eq!(kinds.get(""), Some(&vec!["services".to_string()]));
        assert_eq!(kinds.get("networking.k8s.io"), Some(&vec!["ingresses".to_string()]));
        assert_eq!(upper_camel_case("my-web_app"), "MyWebApp");
    }
}
