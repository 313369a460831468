//! `opkit init`: scaffolds a new operator project in the current directory.

use serde_json::json;

use super::CliError;
use crate::cli::{InitArgs, InitPlugin, License};
use crate::output::Output;
use crate::project;
use crate::scaffold::{self, InitOptions, OpkitSource};
use crate::vendor;

/// Files whose presence means the directory already holds a project.
const CONFLICTS: &[&str] = &["PROJECT", "Cargo.toml", "src", "config", "Makefile"];

/// Scaffolds the project; refuses (writing nothing) in a directory that has one.
pub(super) fn init(args: InitArgs, out: &mut Output) -> Result<(), CliError> {
    // The directory itself: a project inside another is not an edit of the outer one.
    let root = std::env::current_dir()?;
    if args.plugins == Some(InitPlugin::Helm) {
        return crate::scaffold_helm::init(args, &root, out);
    }
    if args.plugins == Some(InitPlugin::Ansible) {
        return crate::scaffold_ansible::init(args, &root, out);
    }
    let repo = args.repo.clone().unwrap_or_default();
    let dir_name = root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let project_name = args.project_name.clone().unwrap_or_else(|| dir_name.to_lowercase());
    project::validate_project_name(&project_name)?;
    project::validate_subdomain("domain", &args.domain)?;
    if repo.trim().is_empty() || repo.contains(char::is_whitespace) {
        return Err(CliError::Usage(format!(
            "invalid --repo {repo:?}: expected e.g. github.com/example/{project_name}"
        )));
    }
    if let Some(existing) = CONFLICTS.iter().find(|f| root.join(f).exists()) {
        return Err(CliError::Usage(format!(
            "{} already contains {existing}; run `opkit init` in an empty directory",
            root.display()
        )));
    }
    let opkit = match &args.opkit_path {
        Some(path) => {
            let abs = std::path::absolute(path)?;
            if !abs.join("crates/opkit/Cargo.toml").is_file() {
                return Err(CliError::Usage(format!(
                    "--opkit-path {}: not an opkit checkout (no crates/opkit/Cargo.toml)",
                    path.display()
                )));
            }
            OpkitSource::Checkout(std::fs::canonicalize(abs)?)
        }
        None => OpkitSource::detect(&root),
    };
    let opts = InitOptions {
        domain: args.domain,
        repo,
        project_name: project_name.clone(),
        owner: args.owner,
        license: match args.license {
            License::Apache2 => "apache2".into(),
            License::None => "none".into(),
        },
        opkit: opkit.clone(),
    };
    let (plan, project) = scaffold::init_plan(&root, &opts)?;
    let written = plan.commit()?;
    let vendor_prefix = format!("{}/", vendor::DIR);
    let (vendored, own): (Vec<_>, Vec<_>) = written.iter().partition(|w| w.path.starts_with(&vendor_prefix));
    for w in own {
        out.step(&format!("{} {}", w.action, w.path));
    }
    if !vendored.is_empty() {
        out.step(&format!("created {} (the opkit crates, {} files)", vendor::DIR, vendored.len()));
        vendor::set_source_times(&root)?;
        // The Dockerfile builds with --locked: the lock file must match the project now.
        if let Err(e) = vendor::settle_lock(&root) {
            out.warn(&format!("Cargo.lock is not settled yet (the first cargo build will do it): {e}"));
        }
    }
    let source = match &opkit {
        OpkitSource::Registry => "crates.io".to_string(),
        OpkitSource::Vendored => format!("{} (vendored)", vendor::DIR),
        OpkitSource::Checkout(p) => p.display().to_string(),
    };
    let text = format!(
        "Scaffolded {project_name} (domain {}, opkit from {source}).\nNext: opkit create api --group <group> --version <version> --kind <Kind>",
        project.domain
    );
    out.result(&text, json!({"project": project_name, "domain": project.domain, "opkit": source, "files": written}));
    Ok(())
}
