//! `opkit create api`: adds a type, its controller, a sample and a test to the project; or,
//! with `--resource=false`, a controller for a built-in kind (k8s-openapi's type) or for
//! another crate's type (`--external-api-path`), as kubebuilder does for core and external
//! types.

use serde_json::json;

use super::{CliError, project_dir};
use crate::cli::{CreateApiArgs, InitPlugin};
use crate::output::Output;
use crate::project::{self, Project};
use crate::scaffold::{self, ApiOptions, TypeOrigin};

/// Scaffolds the API; refuses (writing nothing) on invalid names or an existing kind.
pub(super) fn create_api(args: CreateApiArgs, out: &mut Output) -> Result<(), CliError> {
    let root = project_dir()?;
    match args.plugins.or_else(|| layout_plugin(&root)) {
        Some(InitPlugin::Helm) => return crate::scaffold_helm::create_api(args, &root, out),
        Some(InitPlugin::Ansible) => return crate::scaffold_ansible::create_api(args, &root, out),
        Some(InitPlugin::Go) | None => {}
    }
    refuse_plugin_flags(&args)?;
    let project = Project::load(&root)?;
    project::validate_group(&args.group, &project.domain)?;
    project::validate_version(&args.version)?;
    project::validate_kind(&args.kind)?;
    if !args.resource && !args.controller {
        return Err(CliError::Usage("nothing to do: --resource=false and --controller=false".into()));
    }
    let (origin, group, plural) = origin_and_plural(&args)?;
    project::validate_plural(&plural)?;
    refuse_taken(&project, &args, &group, &plural)?;
    let opts = ApiOptions {
        group,
        version: args.version.clone(),
        kind: args.kind.clone(),
        plural: plural.clone(),
        resource: args.resource,
        controller: args.controller,
        namespaced: args.namespaced,
        origin: origin.clone(),
        force: args.force,
    };
    let (plan, updated) = scaffold::api_plan(&root, &project, &opts)?;
    let written = plan.commit()?;
    for w in &written {
        out.step(&format!("{} {}", w.action, w.path));
    }
    let resource = updated.resources.last();
    let full_group = resource.map(project::Resource::full_group).unwrap_or_default();
    let shown_group = if full_group.is_empty() { "core" } else { full_group.as_str() };
    let next = next_steps(&origin, &args.kind);
    if args.make {
        run_make_generate(&root, out)?;
    }
    let text = format!("Created API {shown_group}/{}, Kind={} (resource {plural}).\n{next}", args.version, args.kind);
    out.result(
        &text,
        json!({"group": full_group, "version": args.version, "kind": args.kind, "plural": plural,
               "external": matches!(origin, TypeOrigin::External { .. }), "path": resource.map(|r| r.path.clone()),
               "files": written}),
    );
    Ok(())
}

/// Refuses the flags of the Helm and Ansible plugins in a Go project.
fn refuse_plugin_flags(args: &CreateApiArgs) -> Result<(), CliError> {
    let plugin_flag = [
        (args.helm_chart.is_some(), "--helm-chart", "a Helm"),
        (args.generate_role, "--generate-role", "an Ansible"),
        (args.generate_playbook, "--generate-playbook", "an Ansible"),
    ];
    if let Some((_, flag, kind)) = plugin_flag.iter().find(|(given, _, _)| *given) {
        return Err(CliError::Usage(format!(
            "{flag} is for {kind} operator project (`opkit init --plugins {}`)",
            if kind.contains("Helm") { "helm" } else { "ansible" }
        )));
    }
    Ok(())
}

/// Refuses a kind PROJECT has already (unless `--force`), and a plural another kind of
/// the group uses.
fn refuse_taken(project: &Project, args: &CreateApiArgs, group: &str, plural: &str) -> Result<(), CliError> {
    if let Some(existing) = project.find(group, &args.version, &args.kind).filter(|_| !args.force) {
        return Err(CliError::Usage(format!(
            "API {}/{}, Kind={} already exists in PROJECT",
            existing.full_group(),
            args.version,
            args.kind
        )));
    }
    let clash = project.resources.iter().find(|r| r.group == group && r.plural == plural && r.kind != args.kind);
    if let Some(r) = clash {
        return Err(CliError::Usage(format!(
            "plural {plural:?} is already used by kind {} in group {}; choose another with --plural",
            r.kind,
            r.full_group()
        )));
    }
    Ok(())
}

/// What the user does next, as the command prints it.
fn next_steps(origin: &TypeOrigin, kind: &str) -> String {
    match origin {
        TypeOrigin::Project => {
            "Next: edit the type and the reconciler, then `make manifests` (opkit generate).".to_string()
        }
        TypeOrigin::Builtin { module, .. } => format!(
            "The controller uses k8s-openapi's {module}::{}; no CRD is generated.\nNext: edit the reconciler, then `make manifests` (opkit generate) for its RBAC.",
            kind
        ),
        TypeOrigin::External { module, .. } => format!(
            "The controller uses {module}::{}; add the crate that defines it to Cargo.toml (`cargo add`). No CRD is generated.\nNext: edit the reconciler, then `make manifests` (opkit generate) for its RBAC.",
            kind
        ),
    }
}

/// `make generate` in the project, as kubebuilder runs it after `create api --make`.
fn run_make_generate(root: &std::path::Path, out: &Output) -> Result<(), CliError> {
    out.step("Running make generate");
    let status = std::process::Command::new("make")
        .arg("generate")
        .current_dir(root)
        .stdout(std::io::stderr())
        .status()
        .map_err(|e| CliError::Build(format!("running make generate: {e}")))?;
    if !status.success() {
        return Err(CliError::Build(format!("make generate failed ({status})")));
    }
    Ok(())
}

/// The plugin PROJECT's `layout` names, as operator-sdk picks the plugin of `create api`:
/// Helm or Ansible for their layouts, else none (the Rust layout, or no readable PROJECT,
/// which the Rust layout's own check reports).
fn layout_plugin(root: &std::path::Path) -> Option<InitPlugin> {
    let text = std::fs::read_to_string(root.join(project::FILE)).ok()?;
    let project: serde_json::Value = serde_saphyr::from_str(&text).ok()?;
    let layouts = project.get("layout")?.as_array()?;
    layouts.iter().filter_map(serde_json::Value::as_str).find_map(|layout| match layout {
        crate::scaffold_helm::LAYOUT => Some(InitPlugin::Helm),
        crate::scaffold_ansible::LAYOUT => Some(InitPlugin::Ansible),
        _ => None,
    })
}

/// Where the type comes from, its group as PROJECT records it, and its plural resource
/// name: the project's own type (with `--resource`), a built-in kind the API server serves
/// (its real plural; `networking.k8s.io` is recorded as group `networking`, domain `k8s.io`),
/// or another crate's type (`--external-api-path`).
fn origin_and_plural(args: &CreateApiArgs) -> Result<(TypeOrigin, String, String), CliError> {
    let default_plural = || args.plural.clone().unwrap_or_else(|| project::plural(&args.kind));
    if let (Some(path), Some(domain)) = (&args.external_api_path, &args.external_api_domain) {
        if args.resource {
            return Err(CliError::Usage(
                "--external-api-path is for a type another crate defines: use it with --resource=false".into(),
            ));
        }
        project::validate_subdomain("external API domain", domain)?;
        let module = external_module(path, &args.kind)?;
        return Ok((TypeOrigin::External { domain: domain.clone(), module }, args.group.clone(), default_plural()));
    }
    if args.resource {
        return Ok((TypeOrigin::Project, args.group.clone(), default_plural()));
    }
    match builtin(&args.group, &args.version, &args.kind) {
        Some((origin, group, plural)) => {
            if let Some(given) = args.plural.as_ref().filter(|p| **p != plural) {
                return Err(CliError::Usage(format!(
                    "--plural {given}: the built-in kind {} is served as {plural}",
                    args.kind
                )));
            }
            Ok((origin, group, plural))
        }
        None => Err(CliError::Usage(format!(
            "--resource=false: {}/{}, Kind={} is not a built-in Kubernetes kind (groups are named as \
             kubebuilder names them: core, apps, batch, networking, rbac.authorization, ...); for a type \
             another crate defines, pass --external-api-path and --external-api-domain",
            args.group, args.version, args.kind
        ))),
    }
}

/// The built-in kind at `group` (kubebuilder's names: `core`, `apps`, `networking`,
/// `rbac.authorization`, or the full group `networking.k8s.io`): k8s-openapi's module and
/// the domain kubebuilder records, the short group, and the plural; None when the API
/// server does not serve such a kind.
fn builtin(group: &str, version: &str, kind: &str) -> Option<(TypeOrigin, String, String)> {
    let short = group.strip_suffix(".k8s.io").unwrap_or(group);
    let candidates: [(String, &str); 2] = if group == "core" {
        [(String::new(), ""), (String::new(), "")]
    } else {
        [(short.to_string(), ""), (format!("{short}.k8s.io"), "k8s.io")]
    };
    candidates.into_iter().find_map(|(full, domain)| {
        let (plural, _namespaced) = opkit_apiserver::builtin_kind(&full, version, kind)?;
        let module = k8s_openapi_module(&full, version);
        Some((TypeOrigin::Builtin { domain: domain.to_string(), module }, short.to_string(), plural))
    })
}

/// k8s-openapi's module of a built-in group version (`apps`, `v1` → `k8s_openapi::api::apps::v1`).
fn k8s_openapi_module(full_group: &str, version: &str) -> String {
    let package = match full_group {
        "" => "api::core".to_string(),
        "apiextensions.k8s.io" => "apiextensions_apiserver::pkg::apis::apiextensions".to_string(),
        "apiregistration.k8s.io" => "kube_aggregator::pkg::apis::apiregistration".to_string(),
        "internal.apiserver.k8s.io" => "api::apiserverinternal".to_string(),
        other => format!("api::{}", other.split('.').next().unwrap_or(other)),
    };
    format!("k8s_openapi::{package}::{version}")
}

/// The module of `--external-api-path`: the path itself, or without its last segment when
/// that is the kind (`cert_manager::v1::Certificate` → `cert_manager::v1`).
fn external_module(path: &str, kind: &str) -> Result<String, CliError> {
    let segments: Vec<&str> = path.split("::").collect();
    let is_ident = |s: &str| {
        let s = s.strip_prefix("r#").unwrap_or(s);
        s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !segments.iter().all(|s| is_ident(s)) {
        return Err(CliError::Usage(format!(
            "invalid --external-api-path {path:?}: expected a Rust path such as cert_manager::v1 (the module) or \
             cert_manager::v1::Certificate (the type)"
        )));
    }
    match segments.split_last() {
        Some((last, module)) if *last == kind && !module.is_empty() => Ok(module.join("::")),
        _ => Ok(path.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_kinds_map_to_k8s_openapi_as_kubebuilder_names_their_groups() {
        let builtin_of = |g, v, k| builtin(g, v, k).map(|(origin, _, plural)| (origin, plural));
        let (origin, plural) = builtin_of("apps", "v1", "Deployment").expect("apps/v1 Deployment");
        assert_eq!(origin, TypeOrigin::Builtin { domain: String::new(), module: "k8s_openapi::api::apps::v1".into() });
        assert_eq!(plural, "deployments");
        let (origin, plural) = builtin_of("core", "v1", "Endpoints").expect("core/v1 Endpoints");
        assert_eq!(origin, TypeOrigin::Builtin { domain: String::new(), module: "k8s_openapi::api::core::v1".into() });
        assert_eq!(plural, "endpoints");
        let (origin, _) = builtin_of("networking", "v1", "Ingress").expect("networking Ingress");
        assert_eq!(
            origin,
            TypeOrigin::Builtin { domain: "k8s.io".into(), module: "k8s_openapi::api::networking::v1".into() }
        );
        assert!(builtin_of("rbac.authorization", "v1", "Role").is_some());
        let (_, group, _) = builtin("networking.k8s.io", "v1", "Ingress").expect("networking.k8s.io Ingress");
        assert_eq!(group, "networking");
        assert!(builtin_of("apps", "v1", "Deploymnt").is_none());
        assert!(builtin_of("core", "v1", "Deployment").is_none());
        assert_eq!(
            k8s_openapi_module("apiextensions.k8s.io", "v1"),
            "k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1"
        );
    }

    #[test]
    fn external_paths_name_a_module_or_the_type() {
        assert_eq!(external_module("cert_manager::v1", "Certificate").unwrap(), "cert_manager::v1");
        assert_eq!(external_module("cert_manager::v1::Certificate", "Certificate").unwrap(), "cert_manager::v1");
        assert_eq!(external_module("certs", "Certificate").unwrap(), "certs");
        assert!(external_module("github.com/cert-manager/cert-manager", "Certificate").is_err());
        assert!(external_module("a::::b", "Certificate").is_err());
    }
}
