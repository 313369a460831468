//! `opkit create api`: adds a type, its controller, a sample and a test to the project.

use serde_json::json;

use super::{CliError, project_dir};
use crate::cli::{CreateApiArgs, InitPlugin};
use crate::output::Output;
use crate::project::{self, Project};
use crate::scaffold::{self, ApiOptions};

/// Scaffolds the API; refuses (writing nothing) on invalid names or an existing kind.
pub fn create_api(args: CreateApiArgs, out: &mut Output) -> Result<(), CliError> {
    if args.plugins == Some(InitPlugin::Helm) {
        return crate::scaffold_helm::create_api(args, &project_dir()?, out);
    }
    let root = project_dir()?;
    let project = Project::load(&root)?;
    project::validate_group(&args.group, &project.domain)?;
    project::validate_version(&args.version)?;
    project::validate_kind(&args.kind)?;
    let plural = args.plural.clone().unwrap_or_else(|| project::plural(&args.kind));
    project::validate_plural(&plural)?;
    if !args.resource && !args.controller {
        return Err(CliError::Usage("nothing to do: --resource=false and --controller=false".into()));
    }
    let full_group = project.full_group(&args.group);
    if project.find(&args.group, &args.version, &args.kind).is_some() {
        return Err(CliError::Usage(format!(
            "API {full_group}/{}, Kind={} already exists in PROJECT",
            args.version, args.kind
        )));
    }
    let clash = project.resources.iter().find(|r| r.group == args.group && r.plural == plural && r.kind != args.kind);
    if let Some(r) = clash {
        return Err(CliError::Usage(format!(
            "plural {plural:?} is already used by kind {} in group {full_group}; choose another with --plural",
            r.kind
        )));
    }
    let opts = ApiOptions {
        group: args.group.clone(),
        version: args.version.clone(),
        kind: args.kind.clone(),
        plural: plural.clone(),
        resource: args.resource,
        controller: args.controller,
        namespaced: args.namespaced,
    };
    let (plan, _) = scaffold::api_plan(&root, &project, &opts)?;
    let written = plan.commit()?;
    for w in &written {
        out.step(&format!("{} {}", w.action, w.path));
    }
    let text = format!(
        "Created API {full_group}/{}, Kind={} (resource {plural}).\nNext: edit the type and the reconciler, then `make manifests` (opkit generate).",
        args.version, args.kind
    );
    out.result(
        &text,
        json!({"group": full_group, "version": args.version, "kind": args.kind, "plural": plural, "files": written}),
    );
    Ok(())
}
