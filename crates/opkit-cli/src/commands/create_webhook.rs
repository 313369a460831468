//! `opkit create webhook`: adds defaulting, validating and conversion webhooks to an API,
//! refusing (writing nothing) where operator-sdk refuses.

use serde_json::json;

use super::{CliError, project_dir};
use crate::cli::CreateWebhookArgs;
use crate::output::Output;
use crate::project::{self, Project};
use crate::scaffold::{self, WebhookOptions};

/// Scaffolds the webhooks of one API.
pub(super) fn create_webhook(args: CreateWebhookArgs, out: &mut Output) -> Result<(), CliError> {
    let root = project_dir()?;
    let project = Project::load(&root)?;
    let opts = check(&project, &args)?;
    let (plan, _) = scaffold::webhook_plan(&root, &project, &opts)?;
    let written = plan.commit()?;
    for w in &written {
        out.step(&format!("{} {}", w.action, w.path));
    }
    let full_group = project.full_group(&args.group);
    let kinds: Vec<&str> =
        [(opts.defaulting, "defaulting"), (opts.validation, "validating"), (!opts.spokes.is_empty(), "conversion")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect();
    let text = format!(
        "Created {} webhook(s) for {full_group}/{}, Kind={}.\nNext: implement them in src/webhook/, then `make manifests` (opkit generate) and `make run`.",
        kinds.join(", "),
        args.version,
        args.kind
    );
    out.result(
        &text,
        json!({"group": full_group, "version": args.version, "kind": args.kind, "webhooks": kinds, "files": written}),
    );
    Ok(())
}

/// The options, or why the webhook cannot be created (the reasons kubebuilder gives).
fn check(project: &Project, args: &CreateWebhookArgs) -> Result<WebhookOptions, CliError> {
    project::validate_group(&args.group, &project.domain)?;
    project::validate_version(&args.version)?;
    project::validate_kind(&args.kind)?;
    if !args.defaulting && !args.programmatic_validation && !args.conversion {
        return Err(CliError::Usage(
            "opkit create webhook requires at least one of --defaulting, --programmatic-validation and --conversion to be true"
                .into(),
        ));
    }
    if args.conversion && args.spoke.is_empty() {
        return Err(CliError::Usage(
            "--conversion requires at least one --spoke version to convert to and from the hub".into(),
        ));
    }
    if !args.conversion && !args.spoke.is_empty() {
        return Err(CliError::Usage("--spoke is only used with --conversion".into()));
    }
    let full_group = project.full_group(&args.group);
    let gvk = format!("{full_group}/{}, Kind={}", args.version, args.kind);
    let Some(resource) = project.find(&args.group, &args.version, &args.kind) else {
        return Err(CliError::Usage(format!(
            "opkit create webhook requires a previously created API: {gvk} is not in PROJECT (run `opkit create api` first)"
        )));
    };
    if resource.api.is_none() {
        return Err(CliError::Usage(format!(
            "{gvk} has no type in this project (created with --resource=false): webhooks are scaffolded for the project's own types"
        )));
    }
    if let Some(plural) = args.plural.as_ref().filter(|p| **p != resource.plural) {
        return Err(CliError::Usage(format!("--plural {plural}: {gvk} is served as {} (PROJECT)", resource.plural)));
    }
    if resource.webhooks.is_some() && !args.force {
        return Err(CliError::Usage(format!(
            "webhook resource already exists for {gvk} (--force scaffolds its webhooks again)"
        )));
    }
    let other_conversion = |r: &project::Resource| {
        r.group == args.group
            && r.kind == args.kind
            && r.webhooks.as_ref().is_some_and(|w| w.conversion)
            && !(args.force && r.version == args.version)
    };
    if args.conversion && project.resources.iter().any(other_conversion) {
        return Err(CliError::Usage(format!(
            "{full_group}, Kind={} already has a conversion webhook: its hub is the version it was created for",
            args.kind
        )));
    }
    let mut spokes: Vec<String> = Vec::new();
    for spoke in &args.spoke {
        project::validate_version(spoke)?;
        if *spoke == args.version {
            return Err(CliError::Usage(format!("--spoke {spoke} is the hub version itself")));
        }
        if project.find(&args.group, spoke, &args.kind).is_none_or(|r| r.api.is_none()) {
            return Err(CliError::Usage(format!(
                "spoke version {spoke} of {full_group}, Kind={} does not exist: create it with `opkit create api --group {} --version {spoke} --kind {}`",
                args.kind, args.group, args.kind
            )));
        }
        if !spokes.contains(spoke) {
            spokes.push(spoke.clone());
        }
    }
    Ok(WebhookOptions {
        group: args.group.clone(),
        version: args.version.clone(),
        kind: args.kind.clone(),
        defaulting: args.defaulting,
        validation: args.programmatic_validation,
        spokes,
        force: args.force,
    })
}
