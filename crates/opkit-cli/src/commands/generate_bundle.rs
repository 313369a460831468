//! `opkit generate kustomize manifests` (the CSV base in config/manifests/bases, with the
//! CSV markers' descriptions and the UI metadata) and `opkit generate bundle` (the OLM
//! bundle from the kustomize-built config/manifests), as operator-sdk's commands of the
//! same names; the bundle model and generators are `opkit_olm_bundle`'s.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use opkit_olm_bundle::csv::{AppLink, ClusterServiceVersion, Icon, Maintainer};
use opkit_olm_bundle::generate::{self, BundleMetadata, BundleOptions, UiMetadata};
use serde_json::{Value, json};

use super::{CliError, project_dir};
use crate::cli::{GenerateBundleArgs, GenerateCommand, GenerateKustomizeCommand, GenerateKustomizeManifestsArgs};
use crate::fileplan::FilePlan;
use crate::output::Output;
use crate::project::Project;

/// The kustomization `generate kustomize manifests` writes next to the base when there is
/// none: the one `opkit init` scaffolds, as operator-sdk's manifests plugin does.
const MANIFESTS_KUSTOMIZATION: &str = include_str!("../../templates/init/config/manifests_kustomization.yaml.j2");

/// Runs an OLM `generate` subcommand.
pub(super) fn run(command: GenerateCommand, out: &mut Output) -> Result<(), CliError> {
    match command {
        GenerateCommand::Kustomize(GenerateKustomizeCommand::Manifests(args)) => kustomize_manifests(args, out),
        GenerateCommand::Bundle(args) => bundle(args, out),
    }
}

fn kustomize_manifests(args: GenerateKustomizeManifestsArgs, out: &mut Output) -> Result<(), CliError> {
    let root = project_dir()?;
    let project = Project::load_any_layout(&root)?;
    let package = args.package.clone().unwrap_or_else(|| project.project_name.clone());
    let base_rel = args.output_dir.join("bases").join(format!("{package}.clusterserviceversion.yaml"));
    let base_path = root.join(&base_rel);
    let existing = base_path.is_file();
    let mut base = if existing { read_base(&base_path, &package)? } else { generate::new_base(&package) };
    let mut meta = ui_metadata(&args)?;
    let interactive = args.interactive.unwrap_or(!existing && std::io::stdin().is_terminal());
    if interactive {
        prompt(&mut meta)?;
    }
    generate::apply_ui_metadata(&mut base, &meta);
    let descriptions = generate::scan_descriptions(&root.join(&args.apis_dir))?;
    let kinds: Vec<_> = project
        .resources
        .iter()
        .filter_map(|r| descriptions.get(&(r.full_group(), r.version.clone(), r.kind.clone())).cloned())
        .collect();
    for r in &project.resources {
        let key = (r.full_group(), r.version.clone(), r.kind.clone());
        // A Helm or Ansible project's kinds have no Rust type to read descriptions from.
        let rust = project.layout.iter().any(|l| l == crate::project::LAYOUT);
        if rust && r.api.is_some() && !descriptions.contains_key(&key) && !args.quiet {
            out.warn(&format!(
                "Skipping definitions parsing for API {}/{}, Kind={}: Rust type not found",
                key.0, key.1, key.2
            ));
        }
    }
    generate::apply_descriptions(&mut base, &kinds);
    let value = serde_json::to_value(&base).map_err(|e| CliError::Build(format!("the CSV base: {e}")))?;

    let mut plan = FilePlan::new(&root);
    plan.write(&base_rel, opkit_olm_bundle::yaml::to_yaml(&value));
    let kustomization = args.output_dir.join("kustomization.yaml");
    if !root.join(&kustomization).is_file() {
        let text = MANIFESTS_KUSTOMIZATION.replace("{{ project_name }}", &package);
        let webhooks = project.resources.iter().any(|r| r.webhooks.is_some());
        plan.write(&kustomization, if webhooks { crate::scaffold::with_manifests_webhook_patch(&text) } else { text });
    }
    let written = plan.commit()?;
    if !args.quiet {
        for w in &written {
            out.step(&format!("{} {}", w.action, w.path));
        }
    }
    let text = if args.quiet {
        String::new()
    } else {
        format!("Kustomize files generated successfully in {}", args.output_dir.display())
    };
    out.result(&text, json!({"base": base_rel, "ownedCRDs": kinds.len(), "files": written}));
    Ok(())
}

fn read_base(path: &Path, package: &str) -> Result<ClusterServiceVersion, CliError> {
    let text = std::fs::read_to_string(path)?;
    let docs = opkit_olm_bundle::yaml::documents(&text).map_err(|e| {
        CliError::Usage(format!("error reading existing ClusterServiceVersion base {}: {e}", path.display()))
    })?;
    let doc = docs
        .into_iter()
        .find(|d| d.get("kind").and_then(Value::as_str) == Some(opkit_olm_bundle::csv::CSV_KIND))
        .ok_or_else(|| CliError::Usage(format!("no ClusterServiceVersion manifest in {}", path.display())))?;
    let mut base: ClusterServiceVersion = serde_json::from_value(doc).map_err(|e| {
        CliError::Usage(format!("error unmarshaling ClusterServiceVersion from manifest {}: {e}", path.display()))
    })?;
    if base.name() == format!("{package}.vX.Y.Z") {
        base.metadata.name = Some(format!("{package}.v{}", base.spec.version));
    }
    Ok(base)
}

/// `NAME=VALUE` pairs of a list flag.
fn pairs(flag: &str, items: &[String]) -> Result<Vec<(String, String)>, CliError> {
    items
        .iter()
        .filter(|i| !i.trim().is_empty())
        .map(|i| {
            i.split_once('=')
                .map(|(a, b)| (a.trim().to_string(), b.trim().to_string()))
                .ok_or_else(|| CliError::Usage(format!("--{flag} {i:?}: expected NAME=VALUE")))
        })
        .collect()
}

fn ui_metadata(args: &GenerateKustomizeManifestsArgs) -> Result<UiMetadata, CliError> {
    let icon = match &args.icon {
        Some(path) => vec![icon_from_file(path)?],
        None => Vec::new(),
    };
    for mode in &args.install_modes {
        if !opkit_olm_bundle::csv::INSTALL_MODE_TYPES.contains(&mode.as_str()) {
            return Err(CliError::Usage(format!(
                "--install-modes: {mode:?} is not one of {}",
                opkit_olm_bundle::csv::INSTALL_MODE_TYPES.join(", ")
            )));
        }
    }
    Ok(UiMetadata {
        display_name: args.display_name.clone().unwrap_or_default(),
        description: args.description.clone().unwrap_or_default(),
        capabilities: args.capabilities.clone().unwrap_or_default(),
        maturity: args.maturity.clone().unwrap_or_default(),
        keywords: args.keywords.iter().filter(|k| !k.is_empty()).cloned().collect(),
        maintainers: pairs("maintainers", &args.maintainers)?
            .into_iter()
            .map(|(name, email)| Maintainer { name, email })
            .collect(),
        provider: AppLink {
            name: args.provider_name.clone().unwrap_or_default(),
            url: args.provider_url.clone().unwrap_or_default(),
        },
        links: pairs("links", &args.links)?.into_iter().map(|(name, url)| AppLink { name, url }).collect(),
        icon,
        install_modes: args.install_modes.clone(),
        min_kube_version: args.min_kube_version.clone().unwrap_or_default(),
    })
}

fn icon_from_file(path: &Path) -> Result<Icon, CliError> {
    use base64::Engine as _;
    let data = std::fs::read(path).map_err(|e| CliError::Usage(format!("--icon {}: {e}", path.display())))?;
    let mediatype = match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        _ => return Err(CliError::Usage(format!("--icon {}: not an svg, png, jpeg or gif file", path.display()))),
    };
    Ok(Icon { base64data: base64::engine::general_purpose::STANDARD.encode(data), mediatype: mediatype.into() })
}

/// Asks for what the flags left empty, as operator-sdk's interactive prompt does.
fn prompt(meta: &mut UiMetadata) -> Result<(), CliError> {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut ask = |question: &str| -> Result<String, CliError> {
        eprint!("{question}: ");
        std::io::stderr().flush()?;
        Ok(lines.next().transpose()?.unwrap_or_default().trim().to_string())
    };
    eprintln!("\nDisplay name for the operator (required):");
    if meta.display_name.is_empty() {
        meta.display_name = ask("> ")?;
    }
    if meta.description.is_empty() {
        meta.description = ask("Description for the operator (required)")?;
    }
    if meta.provider.name.is_empty() {
        meta.provider.name = ask("Provider's name for the operator (required)")?;
    }
    if meta.provider.url.is_empty() {
        meta.provider.url = ask("Any relevant URL for the provider name (optional)")?;
    }
    if meta.keywords.is_empty() {
        let keywords = ask("Comma-separated list of keywords for your operator (required)")?;
        meta.keywords = keywords.split(',').map(str::trim).filter(|k| !k.is_empty()).map(String::from).collect();
    }
    if meta.maintainers.is_empty() {
        let maintainers =
            ask("Comma-separated list of maintainers and their emails (e.g. 'name1:email1, name2:email2') (required)")?;
        meta.maintainers = maintainers
            .split(',')
            .filter_map(|m| m.split_once(':'))
            .map(|(name, email)| Maintainer { name: name.trim().into(), email: email.trim().into() })
            .collect();
    }
    Ok(())
}

fn bundle(args: GenerateBundleArgs, out: &mut Output) -> Result<(), CliError> {
    let root = project_dir()?;
    let project = Project::load_any_layout(&root)?;
    let package = args.package.clone().unwrap_or_else(|| project.project_name.clone());
    let (write_manifests, write_metadata) = match (args.manifests, args.metadata) {
        (false, false) => (true, true),
        flags => flags,
    };
    if let Some(v) = &args.version
        && !generate::is_semver(v)
    {
        return Err(CliError::Usage(format!("{v:?} is not a valid semantic version")));
    }
    let bundle_dir = args.output_dir.to_string_lossy().trim_end_matches('/').to_string();
    let mut plan = FilePlan::new(&root);
    let mut generated_files: Vec<String> = Vec::new();
    let mut stale = Vec::new();

    let (generated, files) = generate_files(&root, &project, &args, &bundle_dir, &package)?;
    if write_manifests {
        if !args.quiet {
            out.step("Generating bundle manifests");
        }
        let manifests_dir = Path::new(&bundle_dir).join("manifests");
        let keep: Vec<&PathBuf> = files.manifests.iter().map(|(p, _)| p).collect();
        stale = stale_files(&root, &manifests_dir, &keep);
        for (path, text) in files.manifests.iter().chain(files.scorecard.iter()) {
            plan.write(path, text.clone());
            generated_files.push(path.display().to_string());
        }
    }
    if write_metadata {
        let annotations_exist = root.join(&files.annotations.0).is_file();
        if !annotations_exist || args.overwrite {
            if !args.quiet {
                out.step("Generating bundle metadata");
            }
            for (path, text) in [&files.annotations, &files.dockerfile] {
                plan.write(path, text.clone());
                generated_files.push(path.display().to_string());
            }
        }
    }
    let written = plan.commit()?;
    // operator-sdk rewrites bundle/manifests: files left from an earlier bundle go, once
    // the new ones are written.
    for path in stale {
        std::fs::remove_file(path)?;
    }
    let csv = generated.bundle.csv.name().to_string();
    let text = if args.quiet {
        String::new()
    } else {
        format!("Bundle manifests generated successfully in {bundle_dir} ({csv})")
    };
    out.result(&text, json!({"csv": csv, "bundleDir": bundle_dir, "files": written}));
    Ok(())
}

/// The bundle of the project's manifests (kustomize's build of `--kustomize-dir`, or
/// the objects of `--input-dir`, with `--image` as the controller's image) and its
/// files under `bundle_dir`.
fn generate_files(
    root: &Path,
    project: &Project,
    args: &GenerateBundleArgs,
    bundle_dir: &str,
    package: &str,
) -> Result<(generate::GeneratedBundle, generate::BundleFiles), CliError> {
    let mut objects = match &args.input_dir {
        Some(dir) => read_dir_objects(&root.join(dir))?,
        None => crate::kustomize::build(&root.join(&args.kustomize_dir))?,
    };
    if let Some(image) = &args.image {
        crate::kustomize::set_image(&mut objects, "controller", image);
    }
    let builder = format!("opkit-v{}", env!("CARGO_PKG_VERSION"));
    let layout = project.layout.first().cloned().unwrap_or_else(|| "rust.opkit.dev/v1".into());
    let options = BundleOptions {
        package: package.to_string(),
        version: args.version.clone().unwrap_or_default(),
        builder: builder.clone(),
        project_layout: layout.clone(),
        created_at: jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    };
    let generated = generate::generate_bundle(&objects, None, &options)?;
    let scorecard =
        generated.scorecard_config.is_some() || root.join(bundle_dir).join("tests/scorecard/config.yaml").is_file();
    let metadata = BundleMetadata {
        bundle_dir: bundle_dir.to_string(),
        package: package.to_string(),
        channels: args.channels.clone().unwrap_or_default(),
        default_channel: args.default_channel.clone().unwrap_or_default(),
        other_labels: BundleMetadata::metrics_labels(&builder, &layout),
        scorecard,
    };
    let files = generate::bundle_files(&generated.bundle, &metadata, generated.scorecard_config.as_ref())?;
    Ok((generated, files))
}

/// The files of `dir` that the new bundle does not write.
fn stale_files(root: &Path, dir: &Path, keep: &[&PathBuf]) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root.join(dir)) else { return Vec::new() };
    entries
        .flatten()
        .filter(|entry| entry.path().is_file() && !keep.iter().any(|k| **k == dir.join(entry.file_name())))
        .map(|entry| entry.path())
        .collect()
}

/// Every object of the YAML files in `dir` (operator-sdk's `--input-dir`).
fn read_dir_objects(dir: &Path) -> Result<Vec<Value>, CliError> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| CliError::Usage(format!("--input-dir {}: {e}", dir.display())))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    paths.sort();
    let mut objects = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path)?;
        let docs = opkit_olm_bundle::yaml::documents(&text)
            .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
        objects.extend(docs);
    }
    Ok(objects)
}
